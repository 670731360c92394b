"""Holes an attacker found in bash's sandbox, each reproduced, for real.

The model plays a prompt-injected agent, the workdir is a hostile repository, and the kernel
often runs as root. Each test failed on the code before its fix:

1. A workdir that is the machine (``/``, ``/usr``, a home folder itself) was bound read-write
   into the sandbox: the "sandbox" wrote the host. Such a workdir is refused when the
   harness is built.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from notebook_support import error_name, notebook

from harness_nb.core import ConfigError
from harness_nb.harness import Harness
from harness_nb.sandbox.machine import machine_folder_problem

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
        project.rmdir()


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
