"""What git runs by itself, and the read-only check's look at a repository before it.

git runs programs a repository's own configuration names: ``core.fsmonitor`` on ``git
status``; ``diff.external``, and a ``diff.<driver>.textconv`` or ``.command`` that
``.gitattributes`` points a file at, on ``git diff``, ``log -p``, ``show``, ``blame``; a
``filter.<driver>.clean`` on ``git status``; ``core.sshCommand`` or a credential helper when
``log -p`` fetches a missing object of a partial clone; a hook when ``status`` rewrites the
index. It finds the repository by walking up from where it runs, bare ones included, and
goes on into submodules. The workdir may be a hostile repository, and ``git status`` is a
read-only command that runs unasked: unsandboxed, it must not run what the repository
names. (In the sandbox whatever git runs is contained like any command.) Two parts:

- Every command gets ``GIT_ENVIRONMENT`` (``sandbox.command_environment``): overrides that
  outrank every configuration file — ``safe.bareRepository=explicit`` (a bare repository
  is never found by walking up), ``core.fsmonitor=false`` — and ``GIT_OPTIONAL_LOCKS=0`` (a
  read-only command rewrites no index, so runs no hook). They cost only speed, so an
  approved command keeps the person's own git settings.
- A driver has any name, so what names one cannot be overridden:
  ``repository_program(folder, workdir)`` asks git itself (its own parser: includes
  followed, every spelling) for the repository's configuration, local and worktree scope,
  and names a key there that makes a read-only command run a program; also submodules
  (git runs in them, their configuration unread) and a ``PATH`` folder in the workdir (git
  runs ``gpg`` and ``ssh`` by name). Unsandboxed, such a ``git`` is not read-only: it asks
  (``command_policy``). A pager never starts: commands have no terminal. An alias cannot
  stand for a command git has.

The look costs two short runs of git, made only for a read-only ``git`` that would run
unsandboxed.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from ...sandbox import command_environment, harness_program

__all__ = ["repository_program"]

# Keys of a repository's own configuration that make a read-only command run a program:
# diffs, filters (named by .gitattributes), signature checks, and what a lazy fetch of a
# partial clone runs (ssh, credential helpers, remote helpers, transports such as ext::).
_PROGRAM_KEYS = re.compile(
    r"diff\.external|diff\..+\.(command|textconv)|filter\..+\.(clean|smudge|process)|gpg\.(.+\.)?program"
    r"|core\.(sshcommand|gitproxy|askpass)|credential\.(.+\.)?helper|remote\..+\.(uploadpack|vcs)"
    r"|protocol\.(.+\.)?allow",
    re.IGNORECASE,
)
_REPOSITORY_SCOPES = ("local", "worktree")
_TIMEOUT = 10.0


def repository_program(folder: Path, workdir: Path) -> str | None:
    """Why a read-only git command run in ``folder`` (of ``workdir``), unsandboxed, could
    run a program the repository names, in words for an approval card; ``None`` when it
    cannot. Blocking (it runs git): call it off the event loop."""
    env = command_environment()
    interpreter = Path(sys.prefix).resolve()  # the kernel's own, kept read-only in the sandbox
    for on_path in env["PATH"].split(os.pathsep):
        real = Path(os.path.realpath(on_path)) if os.path.isabs(on_path) else None
        if real is not None and real.is_relative_to(workdir) and not real.is_relative_to(interpreter):
            return f"git runs gpg and ssh found on PATH, which holds {on_path}, a folder in the workdir"
    git = harness_program("git")
    if git is None:
        return "git's configuration here cannot be checked: no git on PATH outside the working directories"
    try:
        listed = subprocess.run(
            [git, "config", "--list", "--show-scope", "-z"],
            cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=_TIMEOUT, check=False,
        )  # fmt: skip
        if listed.returncode != 0:
            said = listed.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"git's configuration here cannot be checked ({said[0] if said else 'git failed'})"
        tokens = listed.stdout.split(b"\0")
        for scope, entry in zip(tokens[::2], tokens[1::2]):
            key = entry.split(b"\n", 1)[0].decode("utf-8", "replace")
            if scope.decode("utf-8", "replace") in _REPOSITORY_SCOPES and _PROGRAM_KEYS.fullmatch(key):
                return f"the repository's git configuration names a program git would run ({key})"
        if _index_holds_gitlink(git, folder, env):
            return "git also runs in the repository's submodules, whose configuration is not checked"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"git's configuration here cannot be checked ({exc})"
    return None


def _index_holds_gitlink(git: str, folder: Path, env: dict[str, str]) -> bool:
    """Whether the index of ``folder``'s repository holds a submodule (``False`` outside a
    repository), read as git lists it: stopped at the first one, or after ``_TIMEOUT``
    seconds (``TimeoutExpired``), however large a hostile index is."""
    argv = [git, "ls-files", "--stage", "-z"]
    deadline = time.monotonic() + _TIMEOUT
    with subprocess.Popen(
        argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as proc:
        out = proc.stdout
        assert out is not None
        try:
            before = b"\x00"  # entries are "<mode> <id> <stage>\t<path>\0": a gitlink's mode is 160000
            while select.select([out], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = os.read(out.fileno(), 65536)
                if not chunk:
                    return False
                if b"\x00160000 " in before[-7:] + chunk:
                    return True
                before = chunk
            raise subprocess.TimeoutExpired(argv, _TIMEOUT)
        finally:
            proc.kill()
