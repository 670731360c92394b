"""Registration of the notebook layer. For now only a marker that the extension loaded;
the magics arrive with the notebook issue."""

from __future__ import annotations

from typing import Any


def load(ipython: Any) -> None:
    """Register harness_nb with ``ipython``."""
    ipython.user_ns.setdefault("_harness_nb_loaded", True)


def unload(ipython: Any) -> None:
    ipython.user_ns.pop("_harness_nb_loaded", None)
