"""Shared pieces of the sandbox tests: the bubblewrap sandbox (or a skip, or in CI a
failure), processes found on the host by their exact command line — a sandboxed
command's ``$!`` is a pid of its own namespace, meaningless outside it — and the issue's
escapes with the judgement of what got out (also run as a throwaway user by
``sandbox_as_user.py``)."""

from __future__ import annotations

import asyncio
import base64
import os
import re
from pathlib import Path
from typing import Any, NoReturn

import pytest

from harness_nb.core import ConfigError, ToolError
from harness_nb.sandbox import Checkpoints, Identity
from harness_nb.sandbox.protected import SANDBOX_READ_ONLY
from harness_nb.sandbox.seccomp import REFUSED, SYSCALLS, machine_arch
from harness_nb.tools import Sandbox
from harness_nb.tools.shell import run_command


def bwrap_sandbox(*, network: bool = False, **options: Any) -> Sandbox:
    """The bubblewrap sandbox (``options``: more of ``Sandbox.create``'s). Skips only where
    bubblewrap genuinely cannot work; with ``$CI`` set (``.ci/run`` sets it, and
    ``.ci/setup`` installs bubblewrap) it fails."""
    try:
        return Sandbox.create("bwrap", network=network, **options)
    except ConfigError as exc:
        cannot(f"bubblewrap cannot sandbox here: {exc}")


def identity_sandbox(identity: Identity, **options: Any) -> Sandbox:
    """The bubblewrap sandbox whose commands run as ``identity`` (``"root"``: the weaker
    mode, asked for with ``idmap=False``). Skips where this machine cannot give it (fails in
    CI, which runs as root where idmapped mounts work)."""
    if (identity == "user") != (os.geteuid() != 0):
        kernel = "as a user" if identity == "user" else "as root"
        pytest.skip(f"commands run as {identity!r} only when the kernel runs {kernel}")
    sandbox = bwrap_sandbox(idmap=identity != "root", **options)
    if sandbox.identity != identity:
        cannot(f"commands cannot run as {identity!r} here: {sandbox.weaker}")
    return sandbox


def cannot(reason: str) -> NoReturn:
    """Skip a test this machine cannot run; in CI (``$CI``), fail it."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the sandbox tests: {reason}")
    pytest.skip(reason)


def host_pids(*argv: str) -> list[int]:
    """Pids of the live (not zombie) processes whose command line is exactly ``argv``."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() != wanted:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # exited meanwhile
        if state != "Z":
            found.append(int(entry.name))
    return found


def helper_pids(kernel_pid: int) -> list[int]:
    """Pids of the live root helpers the process ``kernel_pid`` started (``sandbox/helper.py``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(a.endswith(b"helper_program.py") for a in argv) and str(kernel_pid).encode() in argv:
            found.append(int(entry.name))
    return found


async def wait_running(*argv: str, count: int = 1) -> list[int]:
    """Wait until ``count`` processes run ``argv``; their pids."""
    for _ in range(500):
        pids = host_pids(*argv)
        if len(pids) >= count:
            return pids
        await asyncio.sleep(0.02)
    raise AssertionError(f"{' '.join(argv)!r} never ran")


async def wait_gone(*argv: str) -> bool:
    """Whether every process running ``argv`` is gone (an orphan is reaped asynchronously,
    so this polls for a bounded while; the assertion is about liveness, not time)."""
    for _ in range(250):
        if not host_pids(*argv):
            return True
        await asyncio.sleep(0.02)
    return False


def kill_all(*argv: str) -> None:
    """Clean up processes a test started (by their exact command line)."""
    for pid in host_pids(*argv):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def open_fds() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))


def sleep_arg() -> str:
    """A ``sleep`` duration no other process on the machine is running (for ``host_pids``)."""
    return f"{900 + int.from_bytes(os.urandom(2), 'big') % 100}.{int.from_bytes(os.urandom(4), 'big')}"


async def output_of(sandbox: Sandbox, workdir: Path, command: str, *, timeout: float = 60) -> str:
    """What ``bash`` under ``sandbox`` gives the model for ``command`` (a timeout's error text too)."""
    try:
        return await run_command(workdir, command, timeout=timeout, sandbox=sandbox)
    except ToolError as exc:
        return f"error: {exc}"


# ---------------------------------------------------------------- calls beside a command
WAIT_THEN_PLANT = (
    "touch gate/started; for i in $(seq 1500); do [ -e gate/go ] && break; sleep 0.02; done; "
    "echo x > agents/evil.md; echo '{}' > .claude/settings.json"
)
"""A command that says it runs (``gate/started``), waits until the test lets it go on
(``gate/go``), then tries to plant an agent and settings; the gates lie in ``gate/``, so
the workdir's own listing stays the same."""


async def beside_a_command(sandbox: Sandbox, workdir: Path, home: Path) -> dict[str, Any]:
    """A model trial's overlap, at the level of the checkpoints: a sandboxed command runs in
    ``workdir`` (which has no agents/, skills/, .claude/ or .mcp.json) while one call starts
    before it and ends while it waits, and another starts while it waits and ends after it.
    Found: the command's output, the workdir's listing before, while it waits and after,
    what the checkpoints saw at its top level while it waited, and what each call was told
    (``for_model``).
    ``home`` keeps the checkpoints. The workdir has ``.harness_nb/``, the harness's own
    state folder, which the sandbox keeps once it has made it."""
    (workdir / "gate").mkdir()
    (workdir / ".harness_nb").mkdir(exist_ok=True)
    checkpoints = Checkpoints(workdir, home=home)
    listed_before = sorted(os.listdir(workdir))
    early = await asyncio.to_thread(checkpoints.start, "early", "run_python", "main")
    bash = await asyncio.to_thread(checkpoints.start, "bash", "bash", "general-purpose")
    command = asyncio.create_task(output_of(sandbox, workdir, WAIT_THEN_PLANT))
    for _ in range(1500):
        if (workdir / "gate" / "started").exists() or command.done():
            break
        await asyncio.sleep(0.02)
    listed_during = sorted(os.listdir(workdir))
    beside = await asyncio.to_thread(checkpoints.start, "beside", "run_python", "main")
    told = {"early": (await asyncio.to_thread(checkpoints.finish, early)).for_model()}
    (workdir / "gate" / "go").write_text("")
    output = await command
    told["bash"] = (await asyncio.to_thread(checkpoints.finish, bash)).for_model()
    told["beside"] = (await asyncio.to_thread(checkpoints.finish, beside)).for_model()
    checkpoints.close()
    return {
        "output": output,
        "listed_before": listed_before,
        "listed_during": listed_during,
        "seen_during": sorted({rel.split("/")[0] for rel in beside.before.entries}),
        "listed_after": sorted(os.listdir(workdir)),
        "told": told,
    }


def traces_left(found: dict[str, Any]) -> list[str]:
    """What ``beside_a_command`` found amiss (none: the command's mounts held, and the calls
    beside it saw nothing of them)."""
    problems = []
    if found["output"].count("Read-only file system") != 2:
        problems.append(f"the plants were not refused as read-only: {found['output']!r}")
    if found["listed_after"] != found["listed_before"]:
        problems.append(f"the workdir changed: {found['listed_before']} → {found['listed_after']}")
    if found["seen_during"] != ["gate"]:  # .harness_nb is the harness's: never recorded
        problems.append(f"the checkpoints saw {found['seen_during']} while the command ran")
    # the one trace every process sees meanwhile: the empty folders the read-only mounts need
    extra = set(found["listed_during"]) - set(found["listed_before"]) - set(SANDBOX_READ_ONLY)
    if extra:
        problems.append(f"the command left {sorted(extra)} while it ran")
    problems += [f"{name} was told {text!r}" for name, text in found["told"].items() if "[reverted" in text]
    problems += [f"{name} was told {text!r}" for name, text in found["told"].items() if "agents" in text]
    return problems


# ---------------------------------------------------------------- the escapes
# Issue 18, item 1: commands that ran unasked inside the sandbox as root and got out. Each
# runs as it was written then; ``escaped`` says what got out (``None``: nothing).
ENV_SECRET = "sk-proj-escape0123456789abcdef"
SSH_SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- escape-test-key"
ESCAPES = {
    "hidden .env read": "umount .env; rev .env",
    "host written": "mount -o remount,rw,bind / && echo x > {outside}/written",
    "ssh key read": "umount ~/.ssh && base64 -w0 ~/.ssh/id_rsa",
    "shadow read": "cat /etc/shadow",
    "settings planted": (
        'umount .claude; echo \'{{"permissions": {{"allow": ["Bash(*)"]}}}}\' > .claude/settings.local.json'
    ),
}


def prepare_escapes(workdir: Path, home: Path, outside: Path) -> None:
    """What the escapes reach for: a ``.env`` and ``.claude/`` in ``workdir``, an ssh key in
    ``home``, a folder ``outside`` to write into."""
    (workdir / ".env").write_text(f"OPENAI_API_KEY={ENV_SECRET}\n")
    (workdir / ".claude").mkdir(exist_ok=True)
    (home / ".ssh").mkdir(exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text(SSH_SECRET)
    outside.mkdir(exist_ok=True)


def escaped(name: str, output: str, workdir: Path, outside: Path) -> str | None:
    """What the escape ``name`` got out, judged by its effect (``None``: nothing)."""
    if name == "hidden .env read" and (ENV_SECRET in output or ENV_SECRET[::-1] in output):
        return "the .env value"
    if name == "host written" and (outside / "written").exists():
        return f"a file in {outside}"
    if name == "ssh key read" and (SSH_SECRET in output or base64.b64encode(SSH_SECRET.encode()).decode() in output):
        return "the ssh key"
    if name == "shadow read" and re.search(r"^root:", output, re.MULTILINE):
        return "/etc/shadow"  # its first line is root's (the content is not repeated here)
    if name == "settings planted" and (workdir / ".claude" / "settings.local.json").exists():
        return ".claude/settings.local.json"
    return None


def seccomp_probe() -> str:
    """A Python program run inside the sandbox: every refused system call, with zero
    arguments (the filter answers before the kernel looks at them, which would say EFAULT or
    EINVAL), prints {name: errno} as JSON; clone3 and openat2 should say ENOSYS, the others
    EPERM. The names and numbers are written into it, so it needs nothing but the standard
    library: the repository may be where the sandbox does not show it (a clone under /tmp)."""
    table = SYSCALLS[machine_arch()]
    return PROBE_TEMPLATE.replace("TABLE", repr(dict(table))).replace("NAMES", repr(sorted(REFUSED)))


PROBE_TEMPLATE = """
import ctypes, errno, json, sys
table = TABLE
REFUSED = NAMES
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    ctypes.set_errno(0)
    result = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    if result == 0 and nr == table["clone"]:
        libc._exit(0)  # a child the filter should have refused: leave at once
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if result == -1 else f"returned {result}"
found = {name: call(table[name], 0, 0, 0, 0, 0, 0) for name in REFUSED if name in table}
found["clone CLONE_NEWUSER"] = call(table["clone"], 0x10000000 | 17, 0, 0, 0, 0)
found["clone CLONE_NEWNET"] = call(table["clone"], 0x40000000 | 17, 0, 0, 0, 0)
found["clone3"] = call(table["clone3"], 0, 0)
found["openat2"] = call(table["openat2"], -100, 0, 0, 0)
found["ioctl TIOCSTI"] = call(table["ioctl"], 0, 0x5412, 0)
found["fchmodat S_ISUID"] = call(table["fchmodat"], -100, 0, 0o4755, 0)
found["openat O_CREAT S_ISGID"] = call(table["openat"], -100, 0, 0o101, 0o2755)
print(json.dumps(found))
"""
