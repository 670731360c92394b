"""The bash tool: output, exit codes, timeouts, interrupts, output cap, leftover processes.

What does not depend on the sandbox runs both unsandboxed and under bubblewrap; the
process-group tests run unsandboxed, where pids are the host's (``test_sandbox.py`` proves
the same under bubblewrap)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import ToolCall
from harness_nb.tools import BashTool, Sandbox, ToolContext, ToolOutcome, invoke
from harness_nb.tools import shell as shell_module
from sandbox_support import bwrap_sandbox

UNSANDBOXED = BashTool(Sandbox.create("off"))


@pytest.fixture(params=["off", "bwrap"])
def tool(request: pytest.FixtureRequest) -> BashTool:
    return UNSANDBOXED if request.param == "off" else BashTool(bwrap_sandbox())


async def run(workdir: Path, tool: BashTool = UNSANDBOXED, **args: Any) -> ToolOutcome:
    call = ToolCall(id="call-1", name="bash", arguments=json.dumps(args))
    return await invoke(tool, call, ToolContext(workdir=workdir, call=call))


def is_gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def wait_gone(pid: int) -> bool:
    for _ in range(100):  # an adopted orphan is reaped asynchronously
        if is_gone(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def read_pid(path: Path) -> int:
    for _ in range(250):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was never written")


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


async def test_output_and_exit_code(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path, tool, command="echo hello")
    assert not outcome.is_error
    assert outcome.content == "hello\nexit code: 0"


async def test_nonzero_exit_code_is_reported_not_raised(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path, tool, command="echo failing; exit 3")
    assert not outcome.is_error
    assert outcome.content == "failing\nexit code: 3"


async def test_stderr_is_merged_in_order(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path, tool, command="echo one; echo two >&2; echo three; ls /nonexistent")
    lines = outcome.content.splitlines()
    assert lines[:3] == ["one", "two", "three"]
    assert "No such file or directory" in lines[3]
    assert lines[-1] == "exit code: 2"


async def test_runs_in_the_workdir_with_empty_stdin(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path, tool, command="pwd; cat; echo done")
    assert outcome.content == f"{tmp_path.resolve()}\ndone\nexit code: 0"


async def test_no_output_and_signal_exit(tmp_path: Path) -> None:
    assert (await run(tmp_path, command="true")).content == "(no output)\nexit code: 0"
    killed = await run(tmp_path, command="kill -9 $$")
    assert killed.content == "(no output)\nexit code: -9 (killed by SIGKILL)"
    killed_child = await run(tmp_path, command="sleep 30 & kill -9 $!; wait $!")
    assert killed_child.content.endswith("Killed                  sleep 30\nexit code: 137 (killed by SIGKILL)")


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; echo started; wait"
    outcome = await run(tmp_path, command=command, timeout=0.5)
    assert outcome.is_error
    assert outcome.content.startswith("error: timed out after 0.5 s; the command and its child")
    assert outcome.content.endswith("Output so far:\nstarted")
    assert await wait_gone(await read_pid(tmp_path / "child.pid"))


async def test_cancellation_kills_the_process_group_and_reraises(tmp_path: Path) -> None:
    command = "echo $$ > bash.pid; sleep 30 & echo $! > child.pid; wait"
    task = asyncio.create_task(run(tmp_path, command=command), name="bash-under-test")
    bash_pid = await read_pid(tmp_path / "bash.pid")
    child_pid = await read_pid(tmp_path / "child.pid")
    assert not is_gone(child_pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(bash_pid)
    assert await wait_gone(child_pid)


async def test_output_is_capped_keeping_head_and_tail(tmp_path: Path, tool: BashTool) -> None:
    limit = shell_module.BASH_MAX_OUTPUT_CHARS
    command = "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"
    outcome = await run(tmp_path, tool, command=command)
    assert outcome.content.startswith("START\nxxx")
    assert outcome.content.endswith("xxx\nEND\nexit code: 0")
    total = len("START\n") + 100000 + len("\nEND\n")
    assert f"\n[… {total - limit} chars omitted …]\n" in outcome.content
    assert len(outcome.content) < limit + 100


async def test_multibyte_output_split_across_reads_survives(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path, tool, command="printf 'é%.0s' $(seq 40000) | wc -m; echo ünï")
    assert outcome.content == "40000\nünï\nexit code: 0"


async def test_background_child_holding_the_output_is_stopped(tmp_path: Path) -> None:
    outcome = await run(tmp_path, command="sleep 30 & echo $! > child.pid; echo launched")
    assert outcome.content.startswith("launched\n[background processes the command left running were stopped")
    assert outcome.content.endswith("exit code: 0")
    assert await wait_gone(await read_pid(tmp_path / "child.pid"))


async def test_background_child_with_redirected_output_is_stopped_too(tmp_path: Path) -> None:
    command = "nohup sleep 30 > /dev/null 2>&1 & echo $! > child.pid; echo launched"
    outcome = await run(tmp_path, command=command)
    assert outcome.content.startswith("launched\n[background processes the command left running were stopped")
    assert await wait_gone(await read_pid(tmp_path / "child.pid"))


async def test_a_setsid_child_still_running_is_not_reported_stopped(tmp_path: Path) -> None:
    """Unsandboxed, a process that leaves the group cannot be stopped: the result says so."""
    outcome = await run(tmp_path, command="setsid sleep 30 & echo $! > child.pid; echo launched")
    child = await read_pid(tmp_path / "child.pid")
    try:
        assert not is_gone(child)
        assert "could not be stopped: it may still be running" in outcome.content
        assert "were stopped" not in outcome.content
    finally:
        os.kill(child, signal.SIGKILL)


async def test_bad_timeout_is_an_error_outcome(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path, tool, command="true", timeout=0)
    assert outcome.is_error
    assert "timeout: Input should be greater than 0" in outcome.content


async def test_missing_workdir_is_a_clear_error(tmp_path: Path, tool: BashTool) -> None:
    outcome = await run(tmp_path / "gone", tool, command="true")
    assert outcome.is_error
    assert outcome.content.startswith(f"error: cannot start bash in {tmp_path / 'gone'}")
