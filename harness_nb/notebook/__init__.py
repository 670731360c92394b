"""The notebook layer: magics, widgets, input transformers. The only place importing IPython."""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register harness_nb's magics (filled in by the notebook layer)."""
    from .extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .extension import unload

    unload(ipython)
