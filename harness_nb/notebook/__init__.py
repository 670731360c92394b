"""The notebook layer, the only place importing IPython, ipywidgets and ipykernel:
``extension.py`` registers everything at ``%load_ext``; ``controller.py`` is the
extension's state in one kernel; ``config.py`` its settings and ``%config``;
``magics/``, ``widgets/`` and ``kernel/`` hold the magics, what the notebook shows, and
what runs inside the kernel (each package's docstring says more).

May import every layer below it. Nothing here is imported by them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .magics.agent import HarnessMagics


def load_ipython_extension(ipython: Any) -> None:
    """Register harness_nb's magics (filled in by the notebook layer)."""
    from .extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .extension import unload

    unload(ipython)


def harness_magics(shell: Any) -> HarnessMagics | None:
    """The ``HarnessMagics`` registered with ``shell`` (where the extension keeps its state:
    ``.controller``), or ``None`` when harness_nb is not loaded there."""
    registry = getattr(getattr(shell, "magics_manager", None), "registry", None) or {}
    found = registry.get("HarnessMagics")
    if found is None:
        return None
    from .magics.agent import HarnessMagics  # loaded already: the instance is one

    return found if isinstance(found, HarnessMagics) else None


def current_harness() -> Any:
    """The ``Harness`` behind this kernel's magics (for the Python API inside a notebook:
    ``h = current_harness(); h.tracker.list(); await h.teams.wait_idle("alice")``)."""
    from ..core.imports import shielded_imports

    with shielded_imports():
        from IPython import get_ipython

    shell = get_ipython()
    magics = harness_magics(shell) if shell is not None else None
    if magics is None:
        raise RuntimeError("harness_nb is not loaded in this kernel: run %load_ext harness_nb first")
    return magics.controller.harness()
