"""The notebook bridge: the kernel's side of the comm to harness_nb's JupyterLab and
Notebook 7 extension (the protocol is docs/notebook-bridge.md) — ``endpoint.py`` the comm,
the pages and the requests; ``cells.py`` the notebook a page describes, checked, bounded
and rendered for the model; ``tools.py`` ``notebook_read``, ``notebook_edit``,
``notebook_insert`` and ``notebook_run``, offered while the running cell's page has the
extension.

The one place of harness_nb with a comm protocol of its own (the widgets' comms are
ipywidgets'). May import ``kernel/`` and every layer below the notebook; never the magics
or the controller.
"""

from __future__ import annotations

from .endpoint import TARGET, NotebookBridge
from .tools import fix_by_edit, notebook_tools

__all__ = ["TARGET", "NotebookBridge", "fix_by_edit", "notebook_tools"]
