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


def current_harness() -> Any:
    """The ``Harness`` behind this kernel's magics (for the Python API inside a notebook:
    ``h = current_harness(); h.tracker.list(); await h.teams.wait_idle("alice")``)."""
    from ..core.imports import shielded_imports

    with shielded_imports():
        from IPython import get_ipython

    shell = get_ipython()
    controller = getattr(shell, "_harness_nb", None) if shell is not None else None
    if controller is None:
        raise RuntimeError("harness_nb is not loaded in this kernel: run %load_ext harness_nb first")
    return controller.harness()
