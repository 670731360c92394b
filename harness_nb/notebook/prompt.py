"""The main agent's system prompt in a notebook: ``NOTEBOOK_PROMPT``, written for the
person's kernel and cells, and ``kernel_state``, the section about the kernel that goes
last and is read again as each run starts (``engine.prompt.MainPrompt``).

The text is reviewed as text: each paragraph answers a question a capable model asked
when it worked in a notebook with only six generic lines to go on (issue 20's trial) —
what the person sees of a tool call, whether state belongs in ``run_python`` or in a
proposed cell, how to look without changing anything, what a denial means, when to
delegate and how a background result comes back, which library versions to write for.

When the notebook tools are offered (the running cell's page has the extension),
``BRIDGE_PROMPT`` says in two sentences which tools they replace and how to edit, ahead
of the kernel's section.

``kernel_state`` is bounded (``STATE_MAX_VARIABLES`` names, ``STATE_MAX_CHARS``
characters), imports nothing (a library's version is read from the module already in
``sys.modules``) and names a credential-named variable with its type only, as
``list_variables`` does.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any

from ..core.credential import is_credential_key
from ..engine import MainPrompt
from .kernel.tools import size_text, user_variables

__all__ = ["BRIDGE_PROMPT", "DATA_LIBRARIES", "NOTEBOOK_PROMPT", "kernel_state", "notebook_prompt"]

NOTEBOOK_PROMPT = """\
You are an assistant inside the person's Jupyter notebook. You share their Python kernel \
(their variables) and their working directory (their files).

What the person sees: under their cell, each tool call you make and its result as it \
happens, the figures and tables run_python shows, then your answer in Markdown. Refer to \
what they saw ("the chart above") rather than repeating it.

Working in their notebook:
- Look before you act. list_variables and inspect_variable show their data without running \
anything; the notebook tools show their cells and what failed. Use run_python to \
compute or check, not to look.
- State the person should keep (loading data, a new column, a fix to their code) goes into \
a cell for them: they review and run it, and the notebook still runs from the top. What \
run_python creates lives in the kernel only.
- Never silently change or delete their variables. When you create something outside a \
cell (a variable in run_python, a file), say so in your answer.
- run_python blocks their kernel while it runs: keep each call short.
- Some calls wait for the person's approval, and the project's rules protect some files. \
A denial is final: do not reach the same end another way; say what was denied and offer \
another way (a new file, a proposed cell).
- Write code for the library versions listed under "The kernel" below.

Delegate a self-contained job with task: explore searches files or code read-only without \
filling your context; general-purpose does multi-step work. A subagent knows only the \
prompt you write. With background=true you get a task id at once and go on working; the \
report comes back by itself as a <background-task-completed> message at your next step \
after it ends, or with the person's next message if you have answered by then. Do not \
poll for it.

Answer concisely: lead with the answer, name files by path and variables by name."""

# The data libraries whose version the prompt names when the kernel has imported them,
# as (module, name shown).
DATA_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("pandas", "pandas"),
    ("polars", "polars"),
    ("numpy", "numpy"),
    ("pyarrow", "pyarrow"),
    ("duckdb", "duckdb"),
    ("scipy", "scipy"),
    ("statsmodels", "statsmodels"),
    ("sklearn", "scikit-learn"),
    ("xarray", "xarray"),
    ("matplotlib", "matplotlib"),
    ("seaborn", "seaborn"),
    ("plotly", "plotly"),
    ("altair", "altair"),
    ("torch", "torch"),
)
STATE_MAX_VARIABLES = 30
STATE_MAX_CHARS = 1_500


# Said only when the notebook tools are offered (the page has the extension), with the
# state: the text above keeps its words, and the prompt cache with them.
BRIDGE_PROMPT = """\
## This page has harness_nb's notebook extension
notebook_read shows every cell, markdown and unrun ones too; notebook_edit and notebook_insert \
change and add cells. Read a cell before you edit it unless this conversation already shows its \
source; one focused edit per call: the person accepts or rejects each diff in the cell."""


def notebook_prompt(shell: Any, *, bridged: Callable[[], bool] = lambda: False) -> MainPrompt:
    """The main agent's prompt in the notebook of ``shell``; ``bridged()``: the running
    cell's page has the notebook extension (its tools are offered)."""

    def state() -> str:
        kernel = kernel_state(shell)
        return f"{BRIDGE_PROMPT}\n\n{kernel}" if bridged() else kernel

    return MainPrompt(NOTEBOOK_PROMPT, state=state)


def kernel_state(shell: Any) -> str:
    """The kernel as a run starts: the data libraries imported, with their versions, and
    the notebook's variables (name, type, size), bounded (see the module doc)."""
    libraries = [f"{shown} {_version(module)}".rstrip() for module, shown in DATA_LIBRARIES if module in sys.modules]
    lines = [
        "## The kernel, as this run starts (list_variables shows later changes)",
        f"Imported: {', '.join(libraries)}." if libraries else _none_imported(),
    ]
    names = user_variables(shell)
    if not names:
        return "\n".join([*lines, "Variables: none yet."])
    shown: list[str] = []
    used = sum(len(line) for line in lines)
    for name in names[:STATE_MAX_VARIABLES]:
        item = _variable(name, shell.user_ns.get(name))
        if used + len(item) > STATE_MAX_CHARS:
            break
        shown.append(item)
        used += len(item) + 2
    more = len(names) - len(shown)
    tail = f", and {more} more" if more else ""
    return "\n".join([*lines, f"Variables ({len(names)}): {', '.join(shown)}{tail}."])


def _variable(name: str, value: Any) -> str:
    """``weather (DataFrame 365×4)``; a credential-named one by its type only."""
    kind = type(value).__name__
    size = "value masked" if is_credential_key(name) else size_text(value)
    return f"{name} ({kind} {size})" if size else f"{name} ({kind})"


def _none_imported() -> str:
    """The line for a kernel that has imported no data library yet: the versions installed,
    so that the model's first code fits them too."""
    installed = installed_libraries()
    return f"Imported: no data libraries yet; installed: {', '.join(installed)}." if installed else (
        "Imported: no data libraries yet (none of the usual ones is installed)."
    )


@functools.cache
def installed_libraries() -> tuple[str, ...]:
    """``DATA_LIBRARIES`` installed in the kernel's environment, with their versions, read from
    their distributions' metadata (nothing imported; read once per process)."""
    found = []
    for _module, shown in DATA_LIBRARIES:
        try:
            found.append(f"{shown} {metadata.version(shown)}")
        except metadata.PackageNotFoundError:
            continue
    return tuple(found)


def _version(module: str) -> str:
    version = getattr(sys.modules.get(module), "__version__", "")
    return version if isinstance(version, str) else ""
