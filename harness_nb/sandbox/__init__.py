"""What contains the agent's effects on the machine: the bubblewrap sandbox ``bash`` runs in,
and the list of paths only the person may change.

- ``bubblewrap.py``: ``Sandbox`` (how a command runs: bubblewrap where it works, else
  unsandboxed with one warning) and ``command_environment`` (the allow-listed environment
  every command gets); ``launch.py``: ``Plan``, one command's argv.
- ``identity.py``: who a sandboxed command runs as (the kernel's user; as root an unused
  uid owning the working directory through an idmapped mount, kept by the root helper of
  ``helper.py`` / ``helper_program.py``; or, where that cannot be made, root without
  capabilities) and what of the machine it needs; ``as_root.py``: what a root kernel's
  command adds to its launch.
- ``machine.py``: ``machine_folder_problem``, the machine's own folders (``/``, ``/usr``, a
  home itself), which no harness takes as its working directory.
- ``program.py``: ``harness_program``, the programs the harness itself runs outside the
  sandbox (bubblewrap, nsenter, prlimit, bash, rg, git), never from a folder commands may
  write (``note_workdir``).
- ``seccomp.py``: the seccomp filter every sandboxed command runs under.
- ``limits.py``: ``SandboxLimits``, what one command may use (processes, memory, file size,
  CPU time).
- ``protected.py``: ``protection(rel)``, the one list of protected paths that the
  permission hook, the sandbox and the checkpoints all consult.
- ``watch.py``: inotify — ``FolderWatch`` (whether a checkpoint's walk is needed) and
  ``ReadWatch`` (whether files read before, the settings files and the skills, may have changed).
- ``checkpoints/``: ``Checkpoints``, the workdir checkpointed around every call that can
  change files — what each call did, rewind and undo, protected paths reverted (its
  ``__init__`` says which module holds what).

May import ``core`` only (and the standard library): tools, the engine and everything
above build on it.
"""

from .bubblewrap import (
    CREDENTIAL_PATHS,
    INSTALL_HINT,
    SANDBOX_MODES,
    Sandbox,
    SandboxMode,
    command_environment,
    default_sandbox,
    dotenv_files,
)
from .checkpoints import DEFAULT_MAX_FILE_MB, CallEffects, Checkpoint, Checkpoints, Rewind
from .helper import stop_mount_helper
from .identity import ROOT_SECRETS, SANDBOX_UID, Identity
from .launch import Plan
from .limits import LIMIT_NAMES, SandboxLimits
from .machine import machine_folder_problem
from .program import harness_program, note_workdir
from .protected import HARNESS_STATE, PROTECTED_FOLDERS, Protection, protection

__all__ = [
    "CREDENTIAL_PATHS",
    "DEFAULT_MAX_FILE_MB",
    "CallEffects",
    "Checkpoint",
    "Checkpoints",
    "HARNESS_STATE",
    "INSTALL_HINT",
    "LIMIT_NAMES",
    "ROOT_SECRETS",
    "SANDBOX_UID",
    "Identity",
    "PROTECTED_FOLDERS",
    "SANDBOX_MODES",
    "Plan",
    "Protection",
    "Rewind",
    "Sandbox",
    "SandboxLimits",
    "SandboxMode",
    "command_environment",
    "default_sandbox",
    "dotenv_files",
    "harness_program",
    "machine_folder_problem",
    "note_workdir",
    "protection",
    "stop_mount_helper",
]
