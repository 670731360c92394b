"""bash's processes die with the kernel: a real ipykernel runs ``%%agent`` whose scripted
model starts a command that leaves ``sleep`` children running, then the kernel is shut
down, restarted or SIGKILLed, and the children's pids (found on the host by their exact
command line) must be gone.

Under bubblewrap every child dies, ``setsid`` ones included, even on SIGKILL
(``--die-with-parent`` and the sandbox's pid namespace). Unsandboxed, children in the
command's process group die when the kernel exits normally (shutdown, restart: the
interpreter's exit handler); a SIGKILLed kernel cannot take them along (see DESIGN §2.1).

The tests that end no kernel share the module's, each with a fresh harness in it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.provisioning import LocalProvisioner

from harness_nb.testing.kernel_driver import KernelDriver
from notebook_support import error_name, fresh_harness, kernel_json, notebook, write_script
from sandbox_support import bwrap_sandbox, helper_pids, identity_sandbox, kill_all, sleep_arg, wait_gone, wait_running

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]


def _script(command: str) -> dict[str, Any]:
    call = {"name": "bash", "arguments": {"command": command, "timeout": 3000}}
    return {"agents": {"main": [{"match": "start", "tool_calls": [call]}, {"text": "done"}]}}


async def _end_kernel(k: KernelDriver, how: str) -> None:
    if how == "shutdown":
        await k.km.shutdown_kernel(now=False)
    elif how == "restart":
        await k.km.restart_kernel(now=False)
    else:
        provisioner = k.km.provisioner
        assert isinstance(provisioner, LocalProvisioner) and provisioner.pid is not None
        os.kill(provisioner.pid, signal.SIGKILL)


async def _children_die_with_the_kernel(tmp_path: Path, sandbox: str, started: str, how: str) -> None:
    """``started`` (a command template with ``{d}`` for the sleep duration) runs from
    ``%%agent`` under ``HarnessNB.sandbox = sandbox``; the kernel ends ``how``."""
    duration = sleep_arg()
    try:
        async with notebook(tmp_path, _script(f"{started.format(d=duration)} echo started; wait")) as k:
            await k.run(f"%config HarnessNB.sandbox = {sandbox!r}")
            # about processes, not approvals: unsandboxed, this command would ask
            await k.run("%config HarnessNB.approval_policy = 'never'")
            k.execute("%%agent\nstart the job")
            await wait_running("sleep", duration, count=2)
            await _end_kernel(k, how)
            assert await wait_gone("sleep", duration)
    finally:
        kill_all("sleep", duration)


@pytest.mark.parametrize("how", ["shutdown", "restart", "sigkill"])
async def test_sandboxed_children_die_with_the_kernel(tmp_path, how):
    bwrap_sandbox()  # skips (or fails in CI) where bubblewrap cannot work
    await _children_die_with_the_kernel(tmp_path, "bwrap", "sleep {d} & setsid sleep {d} > /dev/null 2>&1 &", how)


@pytest.mark.parametrize("how", ["shutdown", "restart"])
async def test_unsandboxed_children_die_when_the_kernel_exits(tmp_path, how):
    await _children_die_with_the_kernel(tmp_path, "off", "sleep {d} & sleep {d} > /dev/null 2>&1 &", how)


async def test_unsandboxed_bash_is_named_in_agents(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path)
    await k.run("%config HarnessNB.sandbox = 'off'")
    assert "warning: bash is not sandboxed: the sandbox setting is 'off'" in k.text(await k.run("%agents"))


async def test_the_kernels_connection_file_is_hidden(kernel, tmp_path):
    """Its key lets a process drive the kernel (with the network allowed, over loopback)."""
    bwrap_sandbox()
    k = await fresh_harness(kernel, tmp_path)
    connection = k.km.connection_file
    key = json.loads(Path(connection).read_text())["key"]
    call = {"name": "bash", "arguments": {"command": f"cat {connection}"}}
    name = write_script(tmp_path, {"agents": {"main": [{"tool_calls": [call]}, {"text": "done"}]}})
    await k.run(f"%config HarnessNB.model = 'scripted/{name}'")
    await k.run("%config HarnessNB.sandbox_network = True")
    await k.run("%%agent\nread it")
    shown = await kernel_json(
        k,
        "{'hidden': [str(p) for p in h.sandbox.hidden], "
        "'results': [m.content for m in h.provider.requests[-1].messages if m.role == 'tool']}",
        setup="from harness_nb.notebook import current_harness; h = current_harness()",
    )
    assert shown["hidden"] == [connection]
    assert len(shown["results"]) == 1 and key not in shown["results"][0]


async def test_without_bubblewrap_the_notebook_says_so_once(tmp_path):
    """``auto`` where bubblewrap is missing (a PATH without it): the cell that loads the
    extension shows the notice, later cells do not repeat it, ``%agents`` keeps the warning,
    and asking for ``bwrap`` fails its cell naming the fix."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to("/bin/bash")
    (tmp_path / "home").mkdir()  # not the workdir: a home folder is not one
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path / "home"), "HARNESS_NB_SANDBOX": ""}
    async with KernelDriver(cwd=tmp_path, env=env) as k:
        loaded = k.text(await k.run("%load_ext harness_nb"))
        assert "bash is not sandboxed: bubblewrap is not installed" in loaded
        assert "apt-get install bubblewrap" in loaded
        assert k.text(await k.run("%config HarnessNB.max_turns = 5")) == ""
        assert "warning: bash is not sandboxed" in k.text(await k.run("%agents"))
        refused = await k.run("%config HarnessNB.sandbox = 'bwrap'", check=False)
        assert error_name(refused) == "UsageError"
        assert "apt-get install bubblewrap" in k.error(refused) and "HarnessNB.sandbox stays 'auto'" in k.error(refused)


@pytest.mark.parametrize("how", ["shutdown", "sigkill"])
async def test_the_root_helper_ends_with_the_kernel(tmp_path, how):
    """A root kernel's first sandboxed command starts the helper; it goes with the kernel,
    however the kernel ends."""
    identity_sandbox("idmapped")
    async with notebook(tmp_path, _script("true;")) as k:
        await k.run("%config HarnessNB.sandbox = 'bwrap'")
        provisioner = k.km.provisioner
        assert isinstance(provisioner, LocalProvisioner) and provisioner.pid is not None
        kernel = provisioner.pid
        assert helper_pids(kernel) == []  # nothing before a command needs it
        await k.run("%%agent\nstart")
        assert len(helper_pids(kernel)) == 1
        await _end_kernel(k, how)
        for _ in range(250):
            if not helper_pids(kernel):
                break
            await asyncio.sleep(0.02)
        assert helper_pids(kernel) == []


async def test_the_limits_are_a_setting(kernel, tmp_path):
    """``%config HarnessNB.sandbox_limits`` reaches the commands, and the model reads which
    limit stopped one; a misspelt limit is refused in its cell."""
    bwrap_sandbox()
    k = await fresh_harness(kernel, tmp_path, _script("yes > big;"))
    refused = await k.run("%config HarnessNB.sandbox_limits = {'filesize': '1M'}", check=False)
    assert error_name(refused) == "UsageError" and "did you mean 'file_size'" in k.error(refused)
    await k.run("%config HarnessNB.sandbox_limits = {'file_size': '1M'}")
    await k.run("%%agent\nstart")
    results = await kernel_json(
        k,
        "[m.content for m in h.provider.requests[-1].messages if m.role == 'tool']",
        setup="from harness_nb.notebook import current_harness; h = current_harness()",
    )
    assert (tmp_path / "big").stat().st_size == 1024 * 1024
    assert len(results) == 1 and "the sandbox's limit file_size = 1 MiB was reached" in results[0]
