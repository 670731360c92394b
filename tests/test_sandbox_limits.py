"""Limits on what one sandboxed command may use (issue 18, item 6), proved by outcome: a
command starting 2,000 background processes is refused past the limit, ``yes > f`` stops at
the file-size limit, a fork bomb stays within the process limit and is gone after, a CPU
spinner is killed at its CPU limit, a huge allocation fails; each result tells the model
which limit and how the person raises it. The process limit is per command. As root they
are checked in both modes (``"idmapped"``; ``"root"``, where a pids cgroup holds the count).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from harness_nb.core import ConfigError
from harness_nb.harness import Harness
from harness_nb.sandbox import LIMIT_NAMES, Identity, Sandbox, SandboxLimits
from harness_nb.sandbox.limits import PidsCgroup
from sandbox_support import cannot, host_pids, identity_sandbox, kill_all, output_of, sleep_arg, wait_gone

IDENTITIES: list[Identity] = ["idmapped", "root"] if os.geteuid() == 0 else ["user"]

RAISE_IT = "%config HarnessNB.sandbox_limits = {"


def limited(identity: Identity, **limits: object) -> Sandbox:
    sandbox = identity_sandbox(identity, limits=limits)
    if identity == "root" and sandbox.limits.processes and not PidsCgroup.available():
        cannot("as root without an idmapped workdir the process limit needs a pids cgroup, and none can be made here")
    return sandbox


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_two_thousand_background_processes_are_refused(identity, tmp_path):
    """With the default limits (1024 processes)."""
    sandbox = limited(identity)
    duration = sleep_arg()
    program = (
        "import subprocess\n"
        "started = []\n"
        "try:\n"
        "    for _ in range(2000):\n"
        f"        started.append(subprocess.Popen(['sleep', '{duration}']))\n"
        "finally:\n"
        "    print(len(started), flush=True)\n"
    )
    (tmp_path / "spawn.py").write_text(program)
    try:
        output = await output_of(sandbox, tmp_path, "python spawn.py")
    finally:
        kill_all("sleep", duration)
    assert "BlockingIOError: [Errno 11] Resource temporarily unavailable" in output
    started = int(output.splitlines()[0])
    assert 900 < started < 1024, output  # the limit counts the command's own processes too
    assert "the sandbox's limit processes = 1024 was reached" in output and RAISE_IT in output
    assert await wait_gone("sleep", duration)


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_yes_stops_at_the_file_size_limit(identity, tmp_path):
    sandbox = limited(identity, file_size="1M")
    output = await output_of(sandbox, tmp_path, "yes > f; echo after")
    assert (tmp_path / "f").stat().st_size == 1024 * 1024
    assert "File size limit exceeded" in output and "after" in output
    assert "the sandbox's limit file_size = 1 MiB was reached" in output and RAISE_IT + "'file_size': '1G'}" in output


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_a_fork_bomb_stays_within_the_process_limit_and_ends(identity, tmp_path):
    """The bomb runs while the command does (1 s: it reaches the limit within milliseconds);
    sampled all along, its processes never outnumber the limit, the command ends by itself,
    and none is left."""
    sandbox = limited(identity, processes=64)
    bomb = "f(){ f & f & }; f; sleep 1"
    task = asyncio.create_task(output_of(sandbox, tmp_path, bomb, timeout=600))
    peak = 0
    while not task.done():
        peak = max(peak, len(host_pids("bash", "-c", bomb)))
        await asyncio.sleep(0.02)
    output = task.result()
    assert 10 < peak <= 64, peak
    assert "Resource temporarily unavailable" in output and "limit processes = 64 was reached" in output
    assert not output.startswith("error: timed out")
    assert await wait_gone("bash", "-c", bomb)


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_a_cpu_spinner_is_killed_at_its_cpu_limit(identity, tmp_path):
    sandbox = limited(identity, cpu_seconds=1)
    output = await output_of(sandbox, tmp_path, "python -c 'while True: pass'", timeout=600)
    assert "exit code: 152 (killed by SIGXCPU)" in output
    assert "the sandbox's limit cpu_seconds = 1 was reached" in output


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_a_huge_allocation_fails_at_the_address_space_limit(identity, tmp_path):
    sandbox = limited(identity, address_space="2G")
    output = await output_of(sandbox, tmp_path, "python -c 'b = bytearray(8 * 2**30)'")
    assert "MemoryError" in output and "limit address_space = 2 GiB was reached" in output


@pytest.mark.parametrize("identity", IDENTITIES)
async def test_the_process_limit_is_per_command(identity, tmp_path):
    """Three commands at once, 40 processes each, under a limit of 50: each gets its own."""
    sandbox = limited(identity, processes=50)
    duration = sleep_arg()
    command = f"for i in $(seq 40); do sleep {duration} & done; echo started; wait"
    tasks = [asyncio.create_task(output_of(sandbox, tmp_path, command, timeout=600)) for _ in range(3)]
    try:
        for _ in range(500):
            if len(host_pids("sleep", duration)) >= 120:
                break
            await asyncio.sleep(0.02)
        assert len(host_pids("sleep", duration)) == 120
    finally:
        kill_all("sleep", duration)
    for task in tasks:
        assert (await task).startswith("started\n")


async def test_without_the_sandbox_the_limits_but_the_process_count_apply(tmp_path):
    sandbox = Sandbox.create("off", limits={"file_size": "1M", "processes": 1})
    output = await output_of(sandbox, tmp_path, "yes > f; sleep 0 & wait; echo after")
    assert (tmp_path / "f").stat().st_size == 1024 * 1024
    assert "after\n" in output and "limit file_size = 1 MiB was reached" in output


def test_limits_are_checked_when_made():
    assert SandboxLimits.of({"file_size": "64G", "processes": None}).file_size == 64 * 1024**3
    assert SandboxLimits.of(None) == SandboxLimits()
    assert SandboxLimits(address_space="512 MiB").address_space == 512 * 1024**2
    with pytest.raises(ConfigError, match=r"no limit 'procs' \(did you mean 'processes'\?\)"):
        SandboxLimits.of({"procs": 10})
    with pytest.raises(ConfigError, match="file_size must be a size above 0"):
        SandboxLimits(file_size="lots")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="processes must be a whole number above 0"):
        SandboxLimits(processes=0)
    assert set(LIMIT_NAMES) == {"processes", "address_space", "file_size", "cpu_seconds"}


def test_the_cpu_limit_follows_the_timeout_by_default():
    assert SandboxLimits().cpu_limit(10) == 10 * (os.cpu_count() or 1)
    assert SandboxLimits(cpu_seconds=5).cpu_limit(10) == 5


def test_the_harness_takes_limits(tmp_path):
    h = Harness("scripted/x.yaml", workdir=tmp_path, sandbox="off", sandbox_limits={"processes": 99}, teams=False)
    assert h.sandbox.limits.processes == 99
    with pytest.raises(ConfigError, match="did you mean 'file_size'"):
        Harness("scripted/x.yaml", workdir=tmp_path, sandbox="off", sandbox_limits={"filesize": 1}, teams=False)
