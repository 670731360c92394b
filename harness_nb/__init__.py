"""harness_nb: an LLM agent harness that lives inside a Jupyter kernel.

In a notebook: ``%load_ext harness_nb`` then ``%%agent``. From Python::

    from harness_nb import Harness
    result = await Harness(model="openai/gpt-4o-mini").run("…")

Importing this package does no I/O and loads the heavy parts only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "AgentEngine",
    "Approved",
    "Denied",
    "Harness",
    "HarnessError",
    "RunResult",
    "RunSettings",
    "__version__",
    "load_ipython_extension",
    "unload_ipython_extension",
]

_LAZY = {
    "Harness": "harness_nb.harness",
    "AgentEngine": "harness_nb.engine",
    "Approved": "harness_nb.engine",
    "Denied": "harness_nb.engine",
    "RunResult": "harness_nb.engine",
    "RunSettings": "harness_nb.settings",
    "HarnessError": "harness_nb.core",
}

if TYPE_CHECKING:
    from .core import HarnessError
    from .engine import AgentEngine, Approved, Denied, RunResult
    from .harness import Harness
    from .settings import RunSettings


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness_nb' has no attribute {name!r}")
    from .core.imports import import_module  # after start-up too: never from the notebook's folder

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where ``jupyter labextension develop .`` finds the built frontend extension: the
    npm build of ``labextension/`` writes it to ``harness_nb/labextension`` (a wheel ships
    it under ``share/jupyter/labextensions/harness-nb`` instead)."""
    return [{"src": "labextension", "dest": "harness-nb"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext harness_nb``: register the magics, transformers and configuration."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext harness_nb``: remove what ``load_ipython_extension`` registered."""
    from .notebook import unload_ipython_extension as unload

    unload(ipython)
