"""A user's commands are held too: the issue's escapes, the seccomp filter and the limits,
run by a throwaway unprivileged user (``useradd``) through that user's own sandbox
(``sandbox_as_user.py``), where the machine allows one; skipped with the reason where not.

The test runs as root (it makes the user). This machine's Python may live under root's
home (``/root/.pyenv``), which another user cannot enter; so the user's process starts in
a root helper's mount namespace where root's home is covered with those folders bound
back (``sandbox/helper.py``, here only to make the interpreter reachable). The user's
sandbox itself is the ordinary unprivileged bubblewrap.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness_nb.sandbox.helper import HelperError, MountHelper
from harness_nb.sandbox.identity import needed_paths
from harness_nb.sandbox.seccomp import REFUSED, SYSCALLS, machine_arch
from sandbox_support import ESCAPES, traces_left

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def found() -> Iterator[dict[str, Any]]:
    """What ``sandbox_as_user.py`` found, run as a throwaway user."""
    if os.geteuid() != 0:
        pytest.skip("making a throwaway user needs root")
    if shutil.which("useradd") is None or shutil.which("nsenter") is None:
        pytest.skip("useradd or nsenter is not installed")
    name = f"hnb{os.getpid() % 100000}"
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"this machine does not allow a throwaway user: {made.stderr.strip()}")
    base = Path(tempfile.mkdtemp(prefix="harness-sandbox-user-", dir="/var/tmp"))
    helper: MountHelper | None = None
    try:
        user = pwd.getpwnam(name)
        folders = [base / "work", base / "home", base / "outside"]
        for folder in (base, *folders):
            folder.mkdir(exist_ok=True)
            os.chown(folder, user.pw_uid, user.pw_gid)
        try:
            helper = MountHelper(user.pw_uid)
            reach = [str(p) for p in needed_paths(os.environ, extra=[ROOT])]
            namespace = helper.prepare(cover=[os.path.expanduser("~root")], reach=reach, workdir=None).namespace
        except HelperError as exc:
            pytest.skip(f"the interpreter cannot be made reachable for another user here: {exc}")
        env = {
            "HOME": str(base / "home"),
            "PATH": os.environ["PATH"],
            "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}",
            "LANG": "C.UTF-8",
        }
        argv = ["nsenter", f"--mount={namespace}", f"--setuid={user.pw_uid}", f"--setgid={user.pw_gid}", "--"]
        argv += [sys.executable, str(ROOT / "tests" / "sandbox_as_user.py"), *map(str, folders)]
        done = subprocess.run(argv, env=env, cwd=base, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout.splitlines()[-1])
        if "unavailable" in result:
            pytest.skip(f"bubblewrap cannot sandbox an unprivileged user here: {result['unavailable']}")
        yield result
    finally:
        if helper is not None:
            helper.stop()
        subprocess.run(["userdel", name], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_the_user_is_the_identity(found):
    assert found["identity"] == "user"


@pytest.mark.parametrize("name", list(ESCAPES))
def test_the_issues_escapes_get_nothing_out(found, name):
    got = found["escapes"][name]
    assert got["got"] is None, f"{name}: {got['got']} got out"


def test_no_capabilities_under_the_filter(found):
    assert "CapEff:\t0000000000000000" in found["status"]
    assert "NoNewPrivs:\t1" in found["status"] and "Seccomp:\t2" in found["status"]


def test_the_filter_refuses_what_it_names(found):
    table = SYSCALLS[machine_arch()]
    assert {n for n in REFUSED if n in table} <= found["seccomp"].keys()
    expected = {n: "ENOSYS" if n in ("clone3", "openat2") else "EPERM" for n in found["seccomp"]}
    wrong = {n: got for n, got in found["seccomp"].items() if got != expected[n]}
    assert not wrong, wrong


def test_the_limits_hold(found):
    started = int(found["spawned"].splitlines()[0])
    assert started < 1024, found["spawned"]
    assert found["file_size"] == 1024 * 1024 and "File size limit exceeded" in found["yes"]


def test_calls_beside_a_command_see_no_trace_of_its_mount_points(found):
    """As ``test_sandbox_containment``'s test of the name: a model trial's overlap."""
    assert not traces_left(found["beside"]), traces_left(found["beside"])
