"""What contains the agent's effects on the machine: the bubblewrap sandbox ``bash`` runs in,
and the list of paths only the person may change.

- ``bubblewrap.py``: ``Sandbox`` (how a command runs: bubblewrap where it works, else
  unsandboxed with one warning) and ``command_environment`` (the allow-listed environment
  every command gets).
- ``protected.py``: ``protection(rel)``, the one list of protected paths that the
  permission hook, the sandbox and the checkpoints all consult.
- ``checkpoint.py``: ``Checkpoints``, the workdir checkpointed around every call that can
  change files, what each call did, rewind and undo; built on ``snapshot.py`` (the bounded
  walk) and ``watch.py`` (inotify: whether a walk is needed), ``effects.py`` (what changed,
  in words), ``restore.py`` (putting paths back without following symlinks),
  ``rewind.py`` (what going back does, and its diff), ``history.py`` (the checkpoints on
  disk) and ``gitstore.py`` (the shadow git repository).

May import ``core`` only (and the standard library): tools, the engine and everything
above build on it.
"""

from .bubblewrap import (
    CREDENTIAL_PATHS,
    DOTENV_MAX_ENTRIES,
    INSTALL_HINT,
    SANDBOX_MODES,
    Plan,
    Sandbox,
    SandboxMode,
    command_environment,
    default_sandbox,
    dotenv_files,
)
from .checkpoint import DEFAULT_MAX_FILE_MB, CallEffects, Checkpoint, Checkpoints, Rewind
from .protected import HARNESS_STATE, PROTECTED_FOLDERS, Protection, protection

__all__ = [
    "CREDENTIAL_PATHS",
    "DEFAULT_MAX_FILE_MB",
    "CallEffects",
    "Checkpoint",
    "Checkpoints",
    "DOTENV_MAX_ENTRIES",
    "HARNESS_STATE",
    "INSTALL_HINT",
    "PROTECTED_FOLDERS",
    "SANDBOX_MODES",
    "Plan",
    "Protection",
    "Rewind",
    "Sandbox",
    "SandboxMode",
    "command_environment",
    "default_sandbox",
    "dotenv_files",
    "protection",
]
