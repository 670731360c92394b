"""Holes an attacker found in bash's sandbox, each reproduced, for real.

The model plays a prompt-injected agent, the workdir is a hostile repository, and the kernel
often runs as root. Each test failed on the code before its fix:

1. A workdir that is the machine (``/``, ``/usr``, a home folder itself) was bound read-write
   into the sandbox: the "sandbox" wrote the host. Such a workdir is refused when the
   harness is built.
2. As root, every working directory's idmapped view (on which the sandbox uid owns its files)
   lived in the root helper's one namespace, so a command in workdir A read B's root-only
   files through B's view. Each workdir now has a namespace of its own: a command sees only
   its own view.
3. The harness's own programs (bubblewrap, nsenter, prlimit, bash, sh, rg, git) were found by
   name on ``PATH``: a ``bwrap`` a command planted in a workdir folder on ``PATH`` (or one a
   hostile repository shipped) ran next, unsandboxed, as root. They now never come from a
   working directory.
4. ``git status``, ``git diff``, ``git log -p`` are read-only commands that run unasked; a
   repository's configuration made them run programs (fsmonitor, diff and filter drivers,
   ssh, hooks, a bare repository found inside, submodules). Unsandboxed they now run none:
   overrides every command gets stop what they can, and the read-only check asks before a
   git whose repository names the rest.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness_nb.core import ConfigError, ToolCall, ToolError
from harness_nb.engine import Denied
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.sandbox import Sandbox
from harness_nb.sandbox.machine import machine_folder_problem
from harness_nb.tools.shell import run_command
from notebook_support import error_name, notebook
from sandbox_support import bwrap_sandbox, identity_sandbox

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs Linux /proc")


# ---------------------------------------------------------------- 1. a workdir that is the machine
MACHINE = ["/", "/usr", "/etc", "/bin", "/lib", "/var", "/proc", "/sys", "/dev", "/root", "/tmp", "/var/tmp",
           "/usr/lib", "/usr/local", "/usr/local/bin", "/etc/cron.d", "/usr/lib/python3/dist-packages"]  # fmt: skip


@pytest.mark.parametrize("folder", [f for f in MACHINE if Path(f).is_dir()])
def test_a_harness_is_not_built_on_a_machine_folder(folder):
    with pytest.raises(ConfigError) as refused:
        Harness("scripted/x.yaml", workdir=folder, sandbox="off", teams=False)
    message = str(refused.value)
    assert f"workdir {os.path.realpath(folder)} is " in message
    assert "make a project folder and pass it as workdir" in message


def test_the_home_folder_itself_is_refused_and_a_project_in_it_is_not(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    (home / ".config").mkdir()
    (home / ".ipython").mkdir()
    monkeypatch.setenv("HOME", str(home))
    for refused, why in ((home, "a home folder"), (home / ".config", ".config of the home folder"),
                         (home / ".ipython", ".ipython of the home folder")):  # fmt: skip
        with pytest.raises(ConfigError, match=why):
            Harness("scripted/x.yaml", workdir=refused, sandbox="off", teams=False)
    assert Harness("scripted/x.yaml", workdir=home / "project", sandbox="off", teams=False).workdir == home / "project"


@pytest.mark.parametrize(
    "folder",
    ["/tmp/x", "/var/tmp/x", "/root/project", "/home/alice/project", "/srv/app", "/opt/app", "/usr/src/app",
     "/usr/local/src/tool", "/var/lib/jenkins/workspace/x", "/mnt/data/project", "/workspace", "/app"],
)  # fmt: skip
def test_project_folders_inside_the_machines_are_fine(folder):
    assert machine_folder_problem(folder) is None


def test_a_project_in_roots_home_works_for_a_root_kernel(tmp_path):
    if os.geteuid() != 0 or not Path("/root").is_dir():
        pytest.skip("a root kernel's case")
    project = Path(tempfile.mkdtemp(prefix="harness-attack-", dir="/root"))
    try:
        assert Harness("scripted/x.yaml", workdir=project, sandbox="off", teams=False).workdir == project
    finally:
        shutil.rmtree(project)


@pytest.mark.kernel
async def test_a_kernel_started_at_the_root_says_what_to_do(tmp_path):
    """A kernel whose working directory is ``/`` (the default workdir ``.``) loads harness_nb
    and runs other cells quietly; ``%%agent`` fails its cell with one line naming the fix,
    and so does ``%config HarnessNB.workdir = '/'``; a project folder then works."""
    async with notebook(tmp_path, {"agents": {"main": [{"text": "hello"}]}}, cwd=Path("/")) as k:
        quiet = await k.run("1 + 1")
        assert k.text(quiet).strip() == "2"
        for cell in ("%%agent\nhello", "%config HarnessNB.workdir = '/'"):
            refused = await k.run(cell, check=False)
            assert error_name(refused) == "UsageError", k.error(refused)
            text = k.text(refused).strip()
            assert "workdir / is the root of the file system" in text and "make a project folder" in text, text
            assert "\n" not in text and "Traceback" not in text, text
        (tmp_path / "project").mkdir()
        await k.run(f"%config HarnessNB.workdir = '{tmp_path / 'project'}'")
        assert "hello" in k.text(await k.run("%%agent\nhello"))


# ---------------------------------------------------------------- 2. one workdir's view per command
# Every way a command in A could reach B: its files, a listing, a search of the folder above,
# writes and a rename into it, and the mounts it can see.
_REACH_B = (
    "cat {b}/secret.txt; cat {b}/../b/secret.txt; ls -la {b}; grep -rs 'B secret' {base};"
    " echo planted > {b}/planted.txt; touch {b}/secret.txt; mv {b}/secret.txt {b}/moved.txt;"
    " grep -c ' {b} ' /proc/self/mountinfo; echo done"
)


@pytest.mark.parametrize("base_mode", [0o700, 0o755])
async def test_a_root_command_in_one_workdir_cannot_reach_another_workdirs_view(base_mode):
    """Two workdirs of one kernel (two harnesses, or teammates), their views prepared in turn:
    a command in A reads nothing of B's root-only file and changes nothing there, before and
    after B's commands ran, by any path; B's own command still owns B."""
    sandbox = identity_sandbox("idmapped")
    base = Path(tempfile.mkdtemp(prefix="harness-attack-", dir="/var/tmp"))  # /tmp is the command's own
    try:
        base.chmod(base_mode)
        a, b = base / "a", base / "b"
        for folder in (a, b):
            folder.mkdir()
        (b / "secret.txt").write_text("B secret\n")
        (b / "secret.txt").chmod(0o600)
        reach = _REACH_B.format(b=b, base=base)
        for first in ("a", "b"):  # A before B's view exists, then after it
            if first == "b":
                assert (await run_command(b, "cat secret.txt", timeout=60, sandbox=sandbox)).startswith("B secret")
            output = await run_command(a, reach, timeout=60, sandbox=sandbox)
            assert "B secret" not in output, output
            assert "\n0\ndone\n" in output, output  # no mount of B in A's view
            assert not {"planted.txt", "moved.txt"} & {p.name for p in b.iterdir()}, output
            assert (b / "secret.txt").read_text() == "B secret\n"
        owned = await run_command(b, "cat secret.txt && echo more >> secret.txt", timeout=60, sandbox=sandbox)
        assert owned.startswith("B secret") and (b / "secret.txt").read_text() == "B secret\nmore\n"
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- 3. the harness's own programs
OWN_PROGRAMS = ("bwrap", "nsenter", "prlimit", "bash", "sh", "rg", "git")

# Builds harnesses on the workdir (argv[1]) and runs commands through them, sandboxed, in the
# weaker root mode and unsandboxed, and has the read-only check look at a repository (git);
# argv[2], when given, is a command the first harness's sandbox runs first (planting
# programs); then prints the harness's program of each name.
_SCENARIO = """
import asyncio, sys, tempfile
from pathlib import Path
from harness_nb.harness import Harness
from harness_nb.permissions.shell.git_config import repository_program
from harness_nb.sandbox import Sandbox, harness_program
from harness_nb.tools.shell import run_command

async def main():
    workdir, plant = Path(sys.argv[1]), sys.argv[2]
    first = Harness("scripted/x.yaml", workdir=workdir, sandbox="auto", teams=False)
    if plant:
        print(await run_command(workdir, plant, timeout=60, sandbox=first.sandbox))
    for sandbox in ("auto", "off"):  # harnesses built later, as %config changes do
        harness = Harness("scripted/x.yaml", workdir=workdir, sandbox=sandbox, teams=False)
        print(await run_command(workdir, "echo ran", timeout=60, sandbox=harness.sandbox))
    print(await run_command(workdir, "echo ran", timeout=60, sandbox=Sandbox.create("auto", idmap=False)))
    elsewhere = Path(tempfile.mkdtemp())
    print("git looked:", repository_program(elsewhere, elsewhere))  # the read-only check runs git
    for name in sys.argv[3:]:
        print(name, harness_program(name))

asyncio.run(main())
"""


def _fakes(folder: Path, log: Path) -> str:
    """A shell command writing, into ``folder``, a program of each ``OWN_PROGRAMS`` name that
    notes its run in ``log`` (outside the workdir, out of the sandbox's reach) and then runs
    the real one."""
    lines = [f"mkdir -p {folder}"]
    for name in OWN_PROGRAMS:
        real = shutil.which(name)
        body = f'#!/bin/sh\\necho "{name} $*" >> {log}\\n' + (f'exec {real} "$@"\\n' if real else "exit 127\\n")
        lines.append(f"printf '{body}' > {folder}/{name} && chmod +x {folder}/{name}")
    return " && ".join(lines)


@pytest.mark.parametrize("how", ["shipped", "planted"])
def test_the_harness_never_runs_a_program_from_a_workdir_folder_on_path(tmp_path, how):
    """A hostile repository ships ``bin/bwrap`` and ``node_modules/.bin/git`` (or a sandboxed
    command plants them) and both folders are on ``PATH``: harnesses built on the workdir, and
    the commands they run sandboxed, in the weaker mode and unsandboxed, never start one."""
    workdir, log = tmp_path / "work", tmp_path / "ran.log"
    workdir.mkdir()
    plant = " && ".join(_fakes(workdir / folder, log) for folder in ("bin", "node_modules/.bin"))
    if how == "shipped":
        subprocess.run(["bash", "-c", plant], check=True)
    env = {**os.environ, "PATH": f"{workdir}/bin:node_modules/.bin:{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-c", _SCENARIO, str(workdir), plant if how == "planted" else "", *OWN_PROGRAMS],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ran\nexit code: 0") == 3 and "git looked: None" in done.stdout, done.stdout
    assert (workdir / "bin" / "bwrap").exists() and (workdir / "node_modules/.bin/git").exists()
    ran = sorted({line.split(" ", 1)[0] for line in log.read_text().splitlines()}) if log.exists() else []
    assert ran == [], f"programs planted in the workdir ran: {ran}"
    for line in done.stdout.splitlines()[-len(OWN_PROGRAMS) :]:
        found = line.split(" ", 1)[1]
        assert found == "None" or not Path(found).resolve().is_relative_to(workdir), line


async def test_a_bubblewrap_inside_the_workdir_is_refused_when_a_command_would_run(tmp_path):
    """A sandbox made before its workdir was known (the bare ``bash`` tool's default one, or
    one given an executable) that names a bubblewrap inside the workdir runs nothing there."""
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("needs bubblewrap")
    workdir = tmp_path / "work"
    (workdir / "bin").mkdir(parents=True)
    shutil.copy2(real, workdir / "bin" / "bwrap")
    sandbox = Sandbox.create("auto", executable=str(workdir / "bin" / "bwrap"))
    if not sandbox.active:
        pytest.skip(f"bubblewrap cannot sandbox here: {sandbox.reason}")
    with pytest.raises(ToolError, match=f"bubblewrap at {workdir}/bin/bwrap lies in the working directory {workdir}"):
        await run_command(workdir, "echo planted > ../out.txt", timeout=30, sandbox=sandbox)
    assert not (tmp_path / "out.txt").exists()


# ---------------------------------------------------------------- 4. read-only git that runs code
_REPOSITORY = "git init -q . && git config user.email a@b && git config user.name a && echo a > a.txt && git add a.txt && git commit -qm a"
_PARTIAL_CLONE = (  # log -p needs an object the repository lacks: git fetches it, by ssh
    "echo b >> a.txt && git commit -qam b && git config core.repositoryformatversion 1"
    " && git config extensions.partialClone origin && git config remote.origin.promisor true"
    " && git config remote.origin.url ssh://example.invalid/x && git config core.sshCommand 'touch {m}; false'"
    " && blob=$(git rev-parse HEAD:a.txt) && rm -f .git/objects/${{blob:0:2}}/${{blob:2}}"
)
_SUBMODULE = (  # a repository inside, with a filter of its own, recorded as a submodule
    "git init -q sub && cd sub && git config user.email a@b && git config user.name a && echo x > f.txt"
    " && echo '* filter=evil' > .gitattributes && git add . && git commit -qm s"
    " && git config filter.evil.clean 'touch {m}; cat' && cd .."
    " && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && git commit -qm sub"
    " && touch -d 2001-01-01 sub/f.txt"
)
# vector: (what the repository holds, the read-only command, the reason it asks with; None:
# it runs unasked and git runs nothing of the repository's)
GIT_VECTORS = {
    "core.fsmonitor": ("git config core.fsmonitor 'touch {m}; false'", "git status", None),
    "a pager": ("git config core.pager 'touch {m}; cat' && git config pager.log 'touch {m}; cat'", "git log", None),
    "diff.external": ("git config diff.external 'touch {m}; false' && echo b >> a.txt", "git diff", "diff.external"),
    "textconv": (
        (
            "git config diff.x.textconv 'touch {m}; cat' && echo '*.txt diff=x' > .gitattributes"
            " && echo c >> a.txt && git add -A && git commit -qm c"
        ),
        "git log -p",
        "diff.x.textconv",
    ),
    "a clean filter": (
        (
            "git config filter.y.clean 'touch {m}; cat' && echo '*.txt filter=y' > .git/info/attributes"
            " && touch -d 2001-01-01 a.txt"
        ),
        "git status",
        "filter.y.clean",
    ),
    "core.sshCommand": (_PARTIAL_CLONE, "git log -p", "core.sshcommand"),
    "an alias": ("git config alias.status '!touch {m}'", "git status", None),
    "a bare repository inside": (
        (
            "mkdir evil && cd evil && git init -q --bare . && git config core.fsmonitor 'touch {m}; false'"
            " && git config core.bare false && git config core.worktree .."
        ),
        "cd evil && git status",
        None,
    ),
    "a hook": (
        (
            "printf '#!/bin/sh\\ntouch {m}\\n' > .git/hooks/post-index-change"
            " && chmod +x .git/hooks/post-index-change && touch -d 2001-01-01 a.txt"
        ),
        "git status",
        None,
    ),
    "a submodule's filter": (_SUBMODULE, "git status", "submodules"),
}


async def _git_run(tmp_path: Path, vector: str, sandbox: Sandbox | str) -> tuple[list[str], str]:
    """The repository of ``vector`` in a fresh workdir, then a harness (approving nothing)
    whose model runs its read-only command: (the reasons it asked with, what the model was
    told); the marker file outside the workdir is made only if git ran the repository's program."""
    setup, command, _ = GIT_VECTORS[vector]
    workdir, marker = tmp_path / "work", tmp_path / "ran"
    workdir.mkdir()
    await asyncio.to_thread(
        subprocess.run, ["bash", "-c", f"{_REPOSITORY} && {setup.format(m=marker)}"], cwd=workdir, check=True
    )
    marker.unlink(missing_ok=True)
    asked: list[str] = []

    async def deny(call: ToolCall, reason: str, risk: str) -> Denied:
        asked.append(reason)
        return Denied.by_the_person("no")

    provider = ScriptedProvider([{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "ok"}])
    harness = Harness(provider, workdir=workdir, sandbox=sandbox, include_user_agents=False, approval=deny, teams=False)
    try:
        await harness.run("look at the repository")
    finally:
        await harness.aclose()
    told = next(str(m.content) for m in provider.requests[-1].messages if m.role == "tool")
    assert not marker.exists(), f"git ran the repository's program; asked: {asked}; told: {told}"
    return asked, told


@pytest.mark.parametrize("vector", list(GIT_VECTORS))
async def test_read_only_git_runs_no_program_the_repository_names_unsandboxed(tmp_path, vector):
    """Unsandboxed, each way a repository makes git run a program: the overrides every command
    gets stop what they can (fsmonitor, a bare repository found by walking up, a hook on an
    index rewrite), the read-only check asks before the rest (a diff or filter driver, ssh for
    a lazy fetch, submodules), and a pager or an alias never ran (no terminal; an alias never
    stands for a command git has)."""
    asked, told = await _git_run(tmp_path, vector, "off")
    reason = GIT_VECTORS[vector][2]
    if reason is None:
        assert asked == [], asked
        assert "denied" not in told, told
    else:
        assert len(asked) == 1 and reason in asked[0], asked


@pytest.mark.parametrize("vector", list(GIT_VECTORS))
async def test_in_the_sandbox_the_same_git_commands_run_unasked_and_stay_contained(tmp_path, vector):
    """In the sandbox nothing is asked: whatever git runs there cannot write outside the
    workdir (the marker beside it stays unmade)."""
    asked, _ = await _git_run(tmp_path, vector, bwrap_sandbox())
    assert asked == [], asked
