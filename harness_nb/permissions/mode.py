"""The names of the approval policies and the permission modes (what each does is the
hook's module doc, ``hook.py``). Kept apart from the hook so that agent files
(``subagents.definition``) and the settings can check a name without loading it.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

Policy: TypeAlias = Literal["allowlist", "always", "never"]
"""An approval policy."""
POLICIES: tuple[Policy, ...] = get_args(Policy)
PermissionMode: TypeAlias = Literal["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto"]
"""Claude Code's ``permissionMode`` of one agent."""
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)
