"""The paths of a working directory that only the person may change: ``protection(rel)``.

A file is protected when changing it would let the agent vouch for itself: it configures
what runs later, outside any sandbox and without asking, or it holds credentials.

==============================  =============================================  ============
what                            where (relative to the workdir)                 reason
==============================  =============================================  ============
agents, skills, settings        ``agents/``, ``skills/``, ``.claude/``,          ``AGENTS``
                                ``.harness_nb/`` (and agent folders given to
                                the harness)
MCP servers                     ``.mcp.json``                                    ``MCP``
git's config and hooks          in any git directory — a ``.git`` folder, or    ``GIT``
                                one recognised by what it holds (``HEAD``,
                                ``config``, ``objects``/``refs``/``commondir``:
                                a bare repository, a ``--separate-git-dir``, a
                                common dir) at any depth, ``node_modules``
                                too: ``config``, ``config.worktree``,
                                ``commondir``, ``gitdir``, ``hooks/``, and the
                                directory itself; a ``.git`` *file*
                                (``gitdir:``); the folder ``core.hooksPath``
                                names and what a hook symlink points at
code run at the next start      ``sitecustomize.py``, ``usercustomize.py``,      ``STARTUP``
                                ``*.pth``, ``.envrc`` (direnv) at any depth,
                                a virtualenv's ``site-packages`` included;
                                IPython and Jupyter config files at the top
                                (both load them from the current folder)
compiled Python                 ``*.pyc``, ``*.pyo`` at any depth: a kernel      ``BYTECODE``
                                imports one in place of its source (a call's
                                are removed, never restored)
commands developer tools run    ``.pre-commit-config.yaml``, ``lefthook.yml``    ``TOOLS``
                                and its kin, ``.devcontainer.json``; folders
                                ``.githooks/``, ``.husky/``, ``.vscode/``,
                                ``.devcontainer/``, ``.idea/`` — at any depth
the home's startup files        every dot-entry of the person's home when the    ``HOME``
                                workdir is or holds it; anywhere, the shell's,
                                git's, package managers', IPython's and
                                Jupyter's (``.bashrc``, ``.profile``, ``.ssh/``,
                                ``.config/``, ``.local/``, ``.gitconfig``,
                                ``.npmrc``, ``.pypirc``, …: ``HOME_FILES``,
                                ``HOME_FOLDERS``)
instructions other agents read  ``AGENTS.md``, ``CLAUDE.md``,                    ``INSTRUCTIONS``
                                ``CLAUDE.local.md`` at any depth
credentials                     ``.env``, ``.env.*``, ``*.env`` at any depth     ``CREDENTIALS``
==============================  =============================================  ============

What a path's name cannot show — where the home is, which folders are git directories,
what ``core.hooksPath`` names — is a ``ProtectedPlaces``, found by looking at the workdir:
the checkpoints' walk finds it for the whole tree, ``places_around`` for one path.

Three layers consult this one list, so they cannot disagree:

- the permission hook: a file tool's write to a protected path asks, whatever the policy
  (only an approval or a rule the person gave directly lets it run, never a rule read from
  a file in the workdir);
- the sandbox: the protected folders (and the files that exist) are read-only mounts for
  ``bash`` (``SANDBOX_READ_ONLY``);
- the checkpoints: a change to a protected path, by any tool or command, that no approval
  covered is reverted at once — files that did not exist before included.

Names are compared as they are stored (case-sensitive), as Linux does.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from collections.abc import Container, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = [
    "HARNESS_STATE",
    "HOME_FILES",
    "HOME_FOLDERS",
    "PROTECTED_FOLDERS",
    "SANDBOX_READ_ONLY",
    "ProtectedPlaces",
    "Protection",
    "home_in",
    "hooks_folder",
    "hooks_path",
    "link_target",
    "looks_like_git_dir",
    "name_protection",
    "places_around",
    "protection",
    "sandbox_mount_point",
]

PROTECTED_FOLDERS: tuple[str, ...] = ("agents", "skills", ".claude", ".harness_nb")
"""Top-level folders holding agent, skill and settings files (the harness and Claude Code
load them). Every agent and skill folder the registry and the prompt builder read lies
under one of these or is given to the harness explicitly (a test holds that)."""

SANDBOX_READ_ONLY: tuple[str, ...] = (*PROTECTED_FOLDERS, ".git/hooks")
"""The folders a sandboxed command may read but never change, with the agent folders given
to the harness. One that is missing is made as an empty folder to mount on while the
command runs (``launch.py``): a mount needs a place, and no other way keeps a command from
creating a name in a folder it may otherwise write. Every process sees that folder
meanwhile, so an empty folder there is nobody's doing (``sandbox_mount_point``)."""


def sandbox_mount_point(rel: str, *, folders: Iterable[str] = ()) -> bool:
    """Whether the sandbox may make ``rel`` (relative to the workdir) as an empty folder to
    mount on: one of ``SANDBOX_READ_ONLY`` or of ``folders`` (the agent folders given to the
    harness). Such a folder, while empty, is no call's effect: the checkpoints never record
    it, so a call that ran beside a command neither reports nor "reverts" it."""
    return rel in SANDBOX_READ_ONLY or any(rel == folder.strip("/") for folder in folders)


HARNESS_STATE: tuple[str, ...] = ("sessions", "offload", "teams", "maps", "cassettes")
"""Folders under ``.harness_nb/`` that the harness itself writes (transcripts, offloaded
results, team rosters, map stores, recordings). Tools may not change them (they lie in a
protected folder); checkpoints leave them out, as the harness's own writes are no tool's
effect."""

HOME_FILES = frozenset(
    {
        # shells read these at login or at every start
        ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
        ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc", ".inputrc", ".xprofile",
        ".xinitrc", ".xsession", ".pam_environment",
        # tools that run commands or fetch code as their config says
        ".gitconfig", ".git-credentials", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pypirc", ".condarc",
        ".netrc", ".vimrc", ".emacs",
    }
)  # fmt: skip
"""A home's startup files, protected wherever they are (a workdir holding them is a home,
or will be copied into one)."""
HOME_FOLDERS = frozenset(
    {
        ".ssh",
        ".config",
        ".local",
        ".ipython",
        ".jupyter",
        ".pip",
        ".docker",
        ".kube",
        ".aws",
        ".gnupg",
        ".emacs.d",
        ".vim",
    }
)
"""A home's folders of startup files, keys and installed programs (``.local/bin``,
IPython's startup scripts, ``.config/autostart``), protected wherever they are."""

_TOP_LEVEL_FILES = frozenset(
    {
        ".mcp.json",
        # IPython and Jupyter read config from the current folder at start-up
        "ipython_config.py",
        "ipython_config.json",
        "ipython_kernel_config.py",
        "ipython_kernel_config.json",
        "jupyter_config.py",
        "jupyter_config.json",
        "jupyter_server_config.py",
        "jupyter_server_config.json",
        "jupyter_notebook_config.py",
        "jupyter_notebook_config.json",
        "jupyter_lab_config.py",
        "jupyter_lab_config.json",
    }
)
_STARTUP_NAMES = frozenset({"sitecustomize.py", "usercustomize.py", ".envrc"})
_INSTRUCTION_NAMES = frozenset({"AGENTS.md", "CLAUDE.md", "CLAUDE.local.md"})
_GIT_FILES = frozenset({"config", "config.worktree", "commondir", "gitdir"})
_TOOL_FILES = frozenset(
    {".pre-commit-config.yaml", ".devcontainer.json"}
    | {
        f"{dot}lefthook{local}.{ext}"
        for dot in ("", ".")
        for local in ("", "-local")
        for ext in ("yml", "yaml", "json", "toml")
    }
)
"""Files hook managers run commands from (pre-commit, lefthook) and a dev container's."""
_TOOL_FOLDERS = frozenset({".githooks", ".husky", ".vscode", ".devcontainer", ".idea"})
"""Folders of git hooks (the usual ``core.hooksPath``, husky's), and of editors' tasks,
launch and settings files (VS Code runs a task on opening a folder) and dev containers."""
_BYTECODE = (".pyc", ".pyo")
_GIT_MARKERS = ("HEAD", "config", "objects", "refs", "commondir")
_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.*?)\s*$", re.IGNORECASE)
_SECTION = re.compile(r"^\s*\[\s*([A-Za-z0-9.-]+)")
CONFIG_READ_LIMIT = 64 * 1024
"""Most bytes of a git config read for its ``core.hooksPath``."""


@dataclass(frozen=True, slots=True)
class Protection:
    """Why a path is protected: ``kind`` names the row of the module's table, ``text`` is
    what an approval card or a tool result says ("writes an agent, skill or settings
    file")."""

    kind: str
    text: str


AGENTS = Protection("agents", "an agent, skill or settings file")
MCP = Protection("mcp", "the MCP server list, which names commands the harness runs")
GIT = Protection("git", "git's config or hooks, which git runs later")
STARTUP = Protection("startup", "a file that runs code at the next start (Python, IPython, direnv)")
BYTECODE = Protection("bytecode", "compiled Python, which a kernel runs in place of its source")
TOOLS = Protection(
    "tools", "a file developer tools run commands from (git hooks, pre-commit, an editor, a dev container)"
)
HOME = Protection("home", "a startup file of a home folder (a shell's, git's, a package manager's, IPython's)")
INSTRUCTIONS = Protection("instructions", "instructions that other agents follow")
CREDENTIALS = Protection("credentials", "a credentials file")


@dataclass(frozen=True)
class ProtectedPlaces:
    """The protected places of one workdir that a path's name does not show, found by
    looking at it: the ``home`` folder whose every dot-entry is protected (relative to the
    workdir, ``""`` when the workdir is the home; ``None`` when it lies outside), the
    ``git_dirs`` recognised by what they hold (``looks_like_git_dir``), and the ``hooks``
    git runs from there (the folder ``core.hooksPath`` names, what a hook symlink points
    at)."""

    home: str | None = None
    git_dirs: frozenset[str] = frozenset()
    hooks: frozenset[str] = frozenset()

    def __or__(self, other: ProtectedPlaces) -> ProtectedPlaces:
        return ProtectedPlaces(
            self.home if self.home is not None else other.home,
            self.git_dirs | other.git_dirs,
            self.hooks | other.hooks,
        )


_NOWHERE = ProtectedPlaces()


def protection(
    rel: str | PurePosixPath, *, folders: Iterable[str] = (), places: ProtectedPlaces | None = None
) -> Protection | None:
    """Why the path ``rel`` (relative to the workdir, ``/``-separated, no ``..``) is one only
    the person may change, or ``None``. ``folders`` adds protected folders (relative paths of
    agent folders given to the harness); ``places``, what looking at the workdir found."""
    parts = PurePosixPath(rel).parts
    if not parts or parts[0] in ("..", "/"):
        return None
    if parts[0] in PROTECTED_FOLDERS:
        return AGENTS
    path = "/".join(parts)
    for folder in folders:
        folder = folder.strip("/")
        if folder and (path == folder or path.startswith(folder + "/")):
            return AGENTS
    places = places or _NOWHERE
    for hook in places.hooks:
        if path == hook or path.startswith(hook + "/"):
            return GIT
    at = _innermost_git(parts, places.git_dirs)
    if at >= 0:
        found = _git_protection(parts, at)
        if found is not None:
            return found
    for part in parts[:-1]:
        if part in _TOOL_FOLDERS:
            return TOOLS
        if part in HOME_FOLDERS:
            return HOME
    found = name_protection(parts[-1], top=len(parts) == 1)
    if found is None and at < 0 and places.home is not None and _home_dot_entry(parts, path, places.home):
        return HOME  # what lies in a git directory is git's: its objects are no startup file
    return found


def name_protection(name: str, *, top: bool) -> Protection | None:
    """Why an entry named ``name`` is protected by its name alone (``top``: it lies at the
    top of the workdir), or ``None``: the rules of the module's table that need no folder."""
    if top and name in _TOP_LEVEL_FILES:
        return MCP if name == ".mcp.json" else STARTUP
    if name in _STARTUP_NAMES or name.endswith(".pth"):
        return STARTUP
    if name.endswith(_BYTECODE):
        return BYTECODE
    if name in _INSTRUCTION_NAMES:
        return INSTRUCTIONS
    if name == ".env" or name.startswith(".env.") or name.endswith(".env"):
        return CREDENTIALS
    if name in _TOOL_FILES or name in _TOOL_FOLDERS:
        return TOOLS
    if name in HOME_FILES or name in HOME_FOLDERS:
        return HOME
    if name == ".git":
        return GIT
    return None


def looks_like_git_dir(names: Container[str]) -> bool:
    """Whether a folder holding ``names`` is a git directory, whatever it is called: a
    repository's (``HEAD`` and ``objects`` or ``refs``), a linked worktree's (``HEAD`` and
    ``commondir``) or a common one (``config``, ``objects`` and ``refs``)."""
    if "HEAD" in names:
        return "objects" in names or "refs" in names or "commondir" in names
    return "config" in names and "objects" in names and "refs" in names


def hooks_path(config: str) -> str | None:
    """The ``core.hooksPath`` a git config sets (the last one), or ``None``."""
    found = None
    section = ""
    for line in config.splitlines():
        head = _SECTION.match(line)
        if head is not None:
            section = head.group(1).lower()
            continue
        value = _HOOKS_PATH.match(line)
        if value is not None and section == "core":
            found = value.group(1).split(" #")[0].split(" ;")[0].strip().strip('"') or None
    return found


def hooks_folder(value: str, git_dir: str, *, workdir: Path, home: str | None) -> str | None:
    """Where ``core.hooksPath = value`` of the git directory ``git_dir`` points, relative to
    the workdir (``None``: outside it). A relative path counts from the working tree (a
    ``.git`` folder's parent), or from the directory itself for a bare repository."""
    if value.startswith("~/"):
        return None if home is None else _inside(posixpath.join(home, value[2:]))
    if value.startswith("/"):
        try:
            return _inside(Path(value).relative_to(workdir).as_posix())
        except ValueError:
            return None
    base = posixpath.dirname(git_dir) if posixpath.basename(git_dir) == ".git" else git_dir
    return _inside(posixpath.join(base, value))


def link_target(rel: str, target: str, *, workdir: Path) -> str | None:
    """What the symlink ``rel`` pointing at ``target`` names, relative to the workdir
    (``None``: outside it)."""
    if target.startswith("/"):
        try:
            return _inside(Path(target).relative_to(workdir).as_posix())
        except ValueError:
            return None
    return _inside(posixpath.join(posixpath.dirname(rel), target))


def places_around(workdir: Path, rel: str, *, home: Path | None) -> ProtectedPlaces:
    """The ``ProtectedPlaces`` that bear on the path ``rel`` of ``workdir`` (a real path):
    the home when it lies in the workdir, the git directories among the folders above
    ``rel`` and ``rel`` itself, and the hooks folder their configs name. A few ``stat``
    calls per folder and bounded reads: for one write, not a walk."""
    home_rel = home_in(workdir, home)
    git_dirs: set[str] = set()
    hooks: set[str] = set()
    parts = [p for p in rel.split("/") if p]
    for n in range(len(parts) + 1):
        folder = "/".join(parts[:n])
        here = workdir / folder if folder else workdir
        present = {name for name in _GIT_MARKERS if os.path.lexists(here / name)}
        candidates = []
        if present and looks_like_git_dir(present):
            git_dirs.add(folder)
            candidates.append(folder)
        if os.path.isdir(here / ".git") and not os.path.islink(here / ".git"):
            candidates.append(posixpath.join(folder, ".git") if folder else ".git")
        for git_dir in candidates:
            text = _read_head(workdir / git_dir / "config")
            value = hooks_path(text) if text else None
            found = hooks_folder(value, git_dir, workdir=workdir, home=home_rel) if value else None
            if found is not None:
                hooks.add(found)
    return ProtectedPlaces(home_rel, frozenset(git_dirs), frozenset(hooks))


def home_in(workdir: Path, home: Path | None) -> str | None:
    """``home`` relative to the real path ``workdir`` (``""``: it is the workdir), or
    ``None`` when it lies outside."""
    if home is None:
        return None
    try:
        rel = Path(os.path.realpath(home)).relative_to(workdir).as_posix()
    except ValueError:
        return None
    return "" if rel == "." else rel


def _home_dot_entry(parts: tuple[str, ...], path: str, home: str) -> bool:
    depth = len(home.split("/")) if home else 0
    return len(parts) > depth and parts[depth].startswith(".") and (not home or path.startswith(home + "/"))


def _innermost_git(parts: tuple[str, ...], git_dirs: frozenset[str]) -> int:
    """The index in ``parts`` of the innermost git directory (``-1``: none)."""
    at = len(parts) - 1 - parts[::-1].index(".git") if ".git" in parts else -1
    if git_dirs:
        for n in range(len(parts), at + 1, -1):
            if "/".join(parts[:n]) in git_dirs:
                return n - 1
    return at


def _git_protection(parts: tuple[str, ...], at: int) -> Protection | None:
    """git's own files that run programs: in a git directory (``parts[at]``), its config,
    hooks and the files that point git at another repository; the directory itself (a
    ``.git`` file, ``gitdir: …``, or a new repository) too."""
    inside = parts[at + 1 :]
    if not inside:
        return GIT
    if "hooks" in inside[:-1] or inside[-1] in _GIT_FILES or inside[0] == "hooks":
        return GIT
    return None


def _inside(rel: str) -> str | None:
    rel = posixpath.normpath(rel)
    if rel in (".", "..") or rel.startswith(("../", "/")):
        return None
    return rel


def _read_head(path: Path) -> str:
    """The start of the regular file ``path`` ("" for anything else: a pipe is never
    opened to wait on, a symlink never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, CONFIG_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
