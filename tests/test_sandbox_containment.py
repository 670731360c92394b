"""The sandbox holds whoever starts it (issue 18, item 1), for real.

Run as root (as CI runs), each of the issue's escapes — commands that ran unasked inside the
sandbox and got out: unmounting a hidden ``.env`` or ``~/.ssh``, remounting ``/`` writable,
reading ``/etc/shadow``, unmounting ``.claude`` to plant settings — fails, both where
commands run as the unused uid with an idmapped workdir (``"idmapped"``) and in the weaker
mode as root without capabilities (``"root"``). A user's commands are checked by
``test_sandbox_user.py``. Then: the seccomp filter refuses what it names (and ordinary work
still runs), the command has no capabilities and cannot make a namespace, it owns the
workdir as the kernel does, and the machine's mount table does not change.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness_nb.sandbox import SANDBOX_UID, Identity, Sandbox, stop_mount_helper
from harness_nb.sandbox.seccomp import REFUSED, SYSCALLS, machine_arch
from harness_nb.tools import kill_running_commands
from sandbox_support import (
    ESCAPES,
    beside_a_command,
    escaped,
    helper_pids,
    identity_sandbox,
    kill_all,
    output_of,
    prepare_escapes,
    seccomp_probe,
    sleep_arg,
    traces_left,
    wait_running,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs Linux /proc")

IDENTITIES: list[Identity] = ["idmapped", "root"]


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (which the sandbox replaces) and outside the workdir."""
    folder = Path(tempfile.mkdtemp(prefix="harness-sandbox-outside-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home(outside: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = outside / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("identity", IDENTITIES)
@pytest.mark.parametrize("name", list(ESCAPES))
async def test_the_issues_escapes_get_nothing_out(name, identity, workdir, home, outside):
    sandbox = identity_sandbox(identity)
    prepare_escapes(workdir, home, outside / "target")
    output = await output_of(sandbox, workdir, ESCAPES[name].format(outside=outside / "target"))
    got = escaped(name, output, workdir, outside / "target")
    assert got is None, f"{name}: {got} got out"
    if "umount" in ESCAPES[name] or "mount " in ESCAPES[name]:
        assert "must be superuser" in output or "permission denied" in output, output


async def test_root_only_files_are_out_of_reach_as_the_sandbox_uid(workdir):
    """Not hidden one by one, as the weaker mode must: the uid is not allowed to read them
    (in a helper's view no earlier command shaped: one whose workdir was /etc hides them)."""
    stop_mount_helper()
    sandbox = identity_sandbox("idmapped")
    output = await output_of(sandbox, workdir, "cat /etc/shadow /etc/gshadow; ls /root/.ssh")
    assert output.count("Permission denied") == 2, output
    assert "/root/.ssh': No such file or directory" in output  # root's home is covered


async def test_root_only_secrets_inside_the_workdir_stay_hidden(workdir):
    """A workdir holding what only root may read (here /etc) is the command's own through
    the idmapped mount: the known secrets there are hidden as in the weaker mode — and stay
    hidden from the commands that run in another workdir after it (the helper's view keeps
    /etc mapped; they read /etc/shadow when only the current workdir's secrets were hidden)."""
    sandbox = identity_sandbox("idmapped")
    kept = Path("/etc/.harness_nb")  # the sandbox keeps this mount point it makes
    existed = kept.exists()
    try:
        output = await output_of(sandbox, Path("/etc"), "cat shadow gshadow | grep -c . ; head -1 passwd")
        later = await output_of(sandbox, workdir, ESCAPES["shadow read"])
    finally:
        if not existed and kept.is_dir():
            kept.rmdir()
    assert output.startswith("0\nroot:x:0:0:") and output.endswith("exit code: 0"), output
    assert escaped("shadow read", later, workdir, workdir) is None, later


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_no_capabilities_no_new_privileges_no_namespaces(identity, workdir):
    sandbox = identity_sandbox(identity)
    command = (
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; "
        "unshare -U true || echo no-userns; unshare -m true || echo no-mountns; "
        "mount -t tmpfs tmpfs /mnt || echo no-mount"
    )
    output = await output_of(sandbox, workdir, command)
    for line in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert f"{line}:\t0000000000000000" in output
    assert "NoNewPrivs:\t1" in output and "Seccomp:\t2" in output
    assert "no-userns" in output and "no-mountns" in output and "no-mount" in output


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_the_filter_refuses_what_it_names(identity, workdir):
    sandbox = identity_sandbox(identity)
    (workdir / "probe.py").write_text(seccomp_probe())
    output = await output_of(sandbox, workdir, "python3 -I probe.py 2>&1 || python probe.py")
    found = json.loads(output.splitlines()[0])
    table = SYSCALLS[machine_arch()]
    assert {name for name in REFUSED if name in table} <= found.keys()
    expected = {name: "ENOSYS" if name in ("clone3", "openat2") else "EPERM" for name in found}
    wrong = {name: got for name, got in found.items() if got != expected[name]}
    assert not wrong, wrong


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_no_set_user_id_file_can_be_made(identity, workdir):
    """As root the command owns the workdir: a set-user-ID file it made would be a
    set-user-ID root program on the machine."""
    sandbox = identity_sandbox(identity)
    command = (
        "cp /bin/true t && chmod 4755 t; chmod g+s t; chmod 755 t && echo plain; "
        "python3 -c 'import os; os.open(\"c\", os.O_CREAT | os.O_WRONLY, 0o4755)'"
    )
    output = await output_of(sandbox, workdir, command)
    assert output.count("Operation not permitted") == 3 and "plain" in output, output
    assert not (workdir / "c").exists()
    assert (workdir / "t").stat().st_mode & 0o7777 == 0o755


async def test_a_foreign_abi_is_killed(workdir):
    if machine_arch() != "x86_64":
        pytest.skip("the x32 ABI exists on x86_64 only")
    sandbox = identity_sandbox("idmapped" if os.geteuid() == 0 else "user")
    # getpid (39) through the x32 ABI: the filter kills the process (SIGSYS, 31)
    x32_getpid = "python3 -c 'import ctypes; ctypes.CDLL(None).syscall(0x40000000 | 39)'; echo $?"
    output = await output_of(sandbox, workdir, x32_getpid)
    assert "Bad system call" in output and "\n159\n" in output, output


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_ordinary_work_still_runs(identity, workdir):
    """Python with the data stack, pip, git, a compiler, background jobs, a process pool:
    what an agent runs all day works under the filter and the default limits."""
    sandbox = identity_sandbox(identity)
    (workdir / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("compiled"); return 0; }\n')
    commands = {
        "python -c 'import numpy, pandas, matplotlib; print(\"imported\")'": "imported",
        "pip --help | head -2 | tail -1": "Usage:",
        "git init -q repo && cd repo && echo a > a && git add a && "
        "git -c user.email=a@b -c user.name=a commit -qm first && git status --short && git log --oneline | wc -l": "1",
        "cc -O2 hello.c -o hello && ./hello": "compiled",
        "sleep 0.1 & sleep 0.1 & wait; echo waited": "waited",
        "python -c 'import multiprocessing as mp; print(sum(mp.Pool(4).map(abs, range(-10, 0))))'": "55",
        "python -c 'import threading; t = threading.Thread(target=print, args=(\"threaded\",)); t.start()'": "threaded",
    }
    for command, expected in commands.items():
        output = await output_of(sandbox, workdir, command, timeout=120)
        assert expected in output and output.endswith("exit code: 0"), (command, output)


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_calls_beside_a_command_see_no_trace_of_its_mount_points(identity, workdir, outside):
    """A model trial: run_python ran beside a subagent's sandboxed command, in a workdir with
    no agents/, and was told "[reverted: this call (or bash …) deleted agents/ …]", and an
    empty agents/ stayed behind. The sandbox makes a missing read-only folder as an empty
    mount point while a command runs; a call that began then saw it, and "restored" it
    after; a call that ended meanwhile "reverted" it — took the folder away under the
    command's read-only mount, which then let the command plant .claude/settings.json.
    Now the checkpoints never record such an empty folder: no call beside the command is
    told of it, the command's mounts hold to its end, and the workdir is as it was."""
    found = await beside_a_command(identity_sandbox(identity), workdir, outside / "store")
    assert not traces_left(found), traces_left(found)


async def test_the_command_owns_the_workdir_as_the_kernel_does(workdir):
    """Through the idmapped mount: a root-owned 0600 file is read and changed, a new file
    lands on disk owned by root, and the command's processes are the sandbox uid's."""
    sandbox = identity_sandbox("idmapped")
    (workdir / "private.txt").write_text("mine\n")
    (workdir / "private.txt").chmod(0o600)
    output = await output_of(sandbox, workdir, "cat private.txt; echo more >> private.txt; echo new > made.txt; id -u")
    assert output == "mine\n0\nexit code: 0"  # it sees itself as root, in its own namespace
    assert (workdir / "private.txt").read_text() == "mine\nmore\n"
    assert (workdir / "made.txt").stat().st_uid == 0 and (workdir / "made.txt").stat().st_gid == 0


async def test_a_workdir_owned_by_another_user_is_theirs_inside(workdir):
    """The idmapped mount maps the workdir's owner: what a command creates in a folder owned
    by uid 4242 lands on disk as 4242's, and 4242's files can be changed."""
    sandbox = identity_sandbox("idmapped")
    other = workdir / "theirs"
    other.mkdir()
    (other / "data.csv").write_text("a\n")
    for path in (other, other / "data.csv"):
        os.chown(path, 4242, 4242)
    # the workdir around it, owned by root, is mapped first: the inner one is mapped on its own
    assert (await output_of(sandbox, workdir, "echo root > mine.txt && echo ok")) == "ok\nexit code: 0"
    output = await output_of(sandbox, other, "echo b >> data.csv && echo x > new.txt && echo ok")
    assert output == "ok\nexit code: 0"
    assert (workdir / "mine.txt").stat().st_uid == 0
    assert (other / "data.csv").read_text() == "a\nb\n"
    assert (other / "new.txt").stat().st_uid == 4242


async def test_a_replaced_workdir_and_a_home_above_one_are_seen_anew(tmp_path, monkeypatch):
    """The root helper's view follows the machine: a workdir removed and made again is the
    new folder, and a home folder set above a workdir used before hides it no more."""
    sandbox = identity_sandbox("idmapped")
    project = Path(tempfile.mkdtemp(prefix="harness-sandbox-project-", dir="/var/tmp"))
    try:
        work = project / "work"
        work.mkdir()
        assert (await output_of(sandbox, work, "echo one > a.txt; cat a.txt")) == "one\nexit code: 0"
        shutil.rmtree(work)
        work.mkdir()
        (work / "b.txt").write_text("two\n")
        assert (await output_of(sandbox, work, "cat b.txt; echo three >> b.txt")) == "two\nexit code: 0"
        assert (work / "b.txt").read_text() == "two\nthree\n"
        monkeypatch.setenv("HOME", str(project))
        assert (await output_of(sandbox, work, "cat b.txt; echo four > c.txt")) == "two\nthree\nexit code: 0"
        assert (work / "c.txt").read_text() == "four\n"
    finally:
        shutil.rmtree(project, ignore_errors=True)


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_a_workdir_inside_roots_home_is_all_that_shows_of_it(identity, outside, monkeypatch):
    sandbox = identity_sandbox(identity)
    monkeypatch.setenv("HOME", str(outside))
    (outside / "notes.txt").write_text("private\n")
    (outside / "project").mkdir()
    output = await output_of(sandbox, outside / "project", "echo made > made.txt; ls -A ~; cat ~/notes.txt")
    assert output.startswith("project\ncat: "), output
    assert (outside / "project" / "made.txt").read_text() == "made\n"


async def test_the_sandbox_uid_runs_the_command_and_the_mount_table_stays(workdir):
    """Inside the command is uid 0 of its own namespace; the machine sees SANDBOX_UID, and
    its mount table is as it was."""
    sandbox = identity_sandbox("idmapped")
    before = Path("/proc/self/mountinfo").read_text()
    duration = sleep_arg()
    task = asyncio.create_task(output_of(sandbox, workdir, f"grep -E '^Uid' /proc/self/status; sleep {duration}"))
    try:
        (pid,) = await wait_running("sleep", duration)
        uids = [line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Uid:")]
        assert uids == [f"Uid:\t{SANDBOX_UID}\t{SANDBOX_UID}\t{SANDBOX_UID}\t{SANDBOX_UID}"]
        assert Path("/proc/self/mountinfo").read_text() == before
    finally:
        kill_all("sleep", duration)
    assert (await task).startswith("Uid:\t0\t0\t0\t0")


async def test_the_root_helper_is_started_lazily_stopped_and_out_of_reach(workdir):
    sandbox = identity_sandbox("idmapped")
    stop_mount_helper()
    assert helper_pids(os.getpid()) == []
    output = await output_of(sandbox, workdir, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
    assert len(helper_pids(os.getpid())) == 1
    assert "helper_program" not in output  # its own pid namespace: the helper is not there
    kill_running_commands()
    assert helper_pids(os.getpid()) == []
    assert "exit code: 0" in await output_of(sandbox, workdir, "true")  # started again on demand
    assert len(helper_pids(os.getpid())) == 1


def test_the_weaker_mode_says_so():
    identity_sandbox("root")
    sandbox = Sandbox.create("bwrap", idmap=False, limits={"processes": 77})
    assert sandbox.identity == "root" and "idmap=False" in sandbox.weaker
    described = sandbox.describe()
    assert "as root without capabilities" in described and "files only root may read are readable" in described
    assert "77 processes" in described
    assert Sandbox.create("bwrap").describe().count(f"unprivileged uid ({SANDBOX_UID})") == 1
