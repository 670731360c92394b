"""Interrupting a run (the stop button) in a real ipykernel: the foreground run and its
subagents are cancelled, the cell fails with one line "Interrupted", the view says
"interrupted", the kernel and the conversation stay usable, and background tasks are not
touched."""

from __future__ import annotations

import pytest

from harness_nb.engine.engine import INTERRUPTED_RESULT
from harness_nb.testing.kernel_driver import Cell, KernelDriver
from notebook_support import (
    error_name,
    model_requests,
    notebook,
    read_text,
    result_text,
    task_state,
    tool_results,
    wait_for_widget_text,
)

pytestmark = pytest.mark.kernel

RM_BUILD = {"name": "bash", "arguments": {"command": "rm -rf build"}}
INTERRUPTED_BY_KERNEL = ("CancelledError", "KeyboardInterrupt")


async def _interrupt(k: KernelDriver, cell: Cell) -> None:
    """Press stop and wait for the cell to end (SIGINT, as JupyterLab's default does)."""
    await k.interrupt()
    await k.finished(cell, timeout=30)
    assert cell.status == "error"
    assert error_name(cell) in INTERRUPTED_BY_KERNEL, k.error(cell)
    (shown,) = [out for out in cell.outputs if out["msg_type"] == "error"]
    assert shown["traceback"] == ["Interrupted"], "one line, not a traceback through asyncio and harness code"


async def test_interrupt_during_a_model_call_leaves_background_work_running(tmp_path):
    """Stop pressed while the model is answering: the cell fails with the interrupt, the view
    shows "interrupted", the next cell runs, a background task started earlier keeps going
    (here: still waiting for its approval, which is then answered), and the conversation
    continues with a valid history."""
    (tmp_path / "build").mkdir()
    script = {
        "agents": {
            "general-purpose": [{"tool_calls": [RM_BUILD]}, {"text": "Background clean-up done."}],
            "main": [
                {"match": "survey", "text": "Listing first.", "tool_calls": [{"name": "ls", "arguments": {}}]},
                {"match": "survey", "delay": 120, "text": "never sent"},
                {"match": "still there", "text": "Yes, still here."},
            ],
        }
    }
    async with notebook(tmp_path, script) as k:
        await k.run("%config HarnessNB.background_approvals = 'ask'")
        await k.run("%%agent --bg\nclean the build folder")
        await wait_for_widget_text(k, "Approve bash?")

        run = k.execute("%%agent\nsurvey the repo")
        await k.wait_for(lambda: any("→ ls()" in t and "✓" in t for t in k.widget_texts()), what="the ls call to finish")
        await _interrupt(k, run)
        header = read_text(k, "■ main")
        assert header and "· interrupted ·" in header
        assert len(await model_requests(k, "main")) == 2, "the interrupt hit the second model call"

        assert result_text(await k.run("1 + 1")) == "2"
        assert await task_state(k, "bg-1") == "running"
        k.click(await k.wait_for_button("Approve"))
        assert result_text(await k.run("%task wait bg-1 --timeout 60")) == "Background clean-up done."
        assert not (tmp_path / "build").exists()

        again = await k.run("%%agent\nare you still there?")
        assert result_text(again) == "Yes, still here."
        last = (await model_requests(k, "main"))[-1]
        assert [m["role"] for m in last["messages"]][:3] == ["user", "assistant", "tool"]


async def test_interrupt_during_an_approval_wait_and_during_a_subagent(tmp_path):
    """Stop pressed while an approval card waits: the card says "interrupted" and can no
    longer be clicked, nothing runs, and the model later sees that the call was cut short.
    Stop pressed while a delegated subagent is thinking cancels that subagent too."""
    (tmp_path / "build").mkdir()
    script = {
        "agents": {
            "main": [
                {"match": "clean the build", "tool_calls": [RM_BUILD]},
                {"match": "try again", "text": "Fine, nothing was deleted."},
                {
                    "match": "delegate",
                    "tool_calls": [
                        {
                            "name": "task",
                            "arguments": {"subagent_type": "explore", "prompt": "look around", "description": "look"},
                        }
                    ],
                },
            ],
            "explore": [{"tool_calls": [{"name": "ls", "arguments": {}}]}, {"delay": 120, "text": "never sent"}],
        }
    }
    async with notebook(tmp_path, script) as k:
        run = k.execute("%%agent\nclean the build")
        await wait_for_widget_text(k, "Approve bash?")
        await _interrupt(k, run)
        assert read_text(k, "■ Interrupted: before you decided · rm -rf build"), "the card shows it was interrupted"
        assert "· interrupted ·" in (read_text(k, "■ main") or "")
        with pytest.raises(TimeoutError):
            await k.wait_for_button("Approve", timeout=0.5)  # disabled: no stale click possible
        assert (tmp_path / "build").is_dir()

        assert result_text(await k.run("'still alive'")) == "'still alive'"
        retry = await k.run("%%agent\ntry again later")
        assert result_text(retry) == "Fine, nothing was deleted."
        assert tool_results((await model_requests(k, "main"))[-1]) == [INTERRUPTED_RESULT]

        delegated = k.execute("%%agent\ndelegate a look")
        await k.wait_for(lambda: read_text(k, "ls() · 1 tool"), what="the subagent's progress line")
        await _interrupt(k, delegated)
        assert await task_state(k, "fg-1") == "cancelled"
        assert await k.wait_for(lambda: read_text(k, "■ explore"), what="the subagent line marked interrupted")
