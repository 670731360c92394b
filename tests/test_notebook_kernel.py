"""The notebook layer in a real ipykernel: approvals, background completions, ``%@name``
parsing and ``%task``, driven the way JupyterLab drives a kernel (cells over the shell
channel, button clicks as comm messages).

The tests share one kernel; each takes a fresh harness in it, in ``tmp_path`` with a
scripted model, so what the model was sent (tool results, prompts, steering) can be read
back exactly.
"""

from __future__ import annotations

import pytest

from harness_nb.notebook.widgets.approval import REASON_PLACEHOLDER
from notebook_support import (
    comm_ids_showing,
    error_name,
    fresh_harness,
    help_pages,
    last_user_text,
    model_requests,
    read_text,
    result_text,
    run_views,
    task_state,
    tool_results,
    wait_for_widget_text,
    widgets_opened_by,
)

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]

RM_BUILD = {"name": "bash", "arguments": {"command": "rm -rf build"}}


def _busy_until_file(name: str) -> str:
    """A cell that stays busy (awaiting, as a long notebook computation would) until the test
    creates ``name`` in the kernel's folder."""
    return (
        "import asyncio, os, time\n"
        "deadline = time.monotonic() + 120\n"
        f"while not os.path.exists({name!r}) and time.monotonic() < deadline:\n"
        "    await asyncio.sleep(0.05)\n"
        f"print('released' if os.path.exists({name!r}) else 'gave up')"
    )


async def test_foreground_approve_then_deny(kernel, tmp_path):
    """A risky call shows an approval card in the running cell. Approve runs it, Deny does
    not; the card then shows the decision, the model sees the outcome as the tool result —
    for Deny, the reason typed into the card's box, cleaned — and the final answer is the
    cell's value."""
    (tmp_path / "build").mkdir()
    (tmp_path / "dist").mkdir()
    script = {
        "agents": {
            "main": [
                {"match": "clean the build", "text": "I'll clean the build.", "tool_calls": [RM_BUILD]},
                {"match": "clean the build", "text": "Build folder removed."},
                {
                    "match": "remove dist",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf dist"}}],
                },
                {"match": "remove dist", "text": "Understood, I left dist alone."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    approve_cell = k.execute("%%agent\nclean the build")
    card = await wait_for_widget_text(k, "Approve bash?")
    assert "rm -rf build" in card and "recursive or forced delete" in card
    assert approve_cell.reply is None, "the cell stays busy while the card waits"
    k.click(await k.wait_for_button("Approve"))
    await k.finished(approve_cell)
    assert approve_cell.status == "ok", k.error(approve_cell)
    assert result_text(approve_cell) == "Build folder removed."
    assert read_text(k, "✓ Approved by you: rm -rf build"), "the decided card is one line"
    assert not (tmp_path / "build").exists()

    deny_cell = k.execute("%%agent\nnow remove dist")
    await wait_for_widget_text(k, "rm -rf dist")
    deny = await k.wait_for_button("Deny")
    reason_box = {"_model_name": "TextModel", "placeholder": REASON_PLACEHOLDER, "disabled": False}
    (box,) = await k.wait_for(lambda: k.find_models(**reason_box), what="the card's reason box")
    k.set_state(box, {"value": "dist holds the \x1b[1mrelease\x1b[0m build, keep it"})  # as JupyterLab sends it
    k.click(deny)
    await k.finished(deny_cell)
    assert deny_cell.status == "ok", k.error(deny_cell)
    assert result_text(deny_cell) == "Understood, I left dist alone."
    assert read_text(k, "✗ Denied by you: dist holds the release build, keep it · rm -rf dist")
    assert (tmp_path / "dist").is_dir()

    requests = await model_requests(k, "main")
    assert len(requests) == 4
    assert tool_results(requests[1]) == [
        "(no output)\nexit code: 0\n\n[effects: deleted build/ — the person can undo this]"
    ]
    assert tool_results(requests[3])[-1] == (
        'error: the person denied this call. Their reason: "dist holds the release build, keep it". '
        "Do not retry it unchanged: take their reason into account."
    )


async def test_approve_for_this_session_lets_the_same_call_run_without_a_card(kernel, tmp_path):
    """"Approve for this session" on a card shows and adds the exact rule; the same call then
    runs without a card, later in the same run and in the next cell, and others still ask.
    (A recursive delete asks in the sandbox too.)"""
    (tmp_path / "out" / "logs").mkdir(parents=True)
    (tmp_path / "out" / "other").mkdir()
    clean = {"name": "bash", "arguments": {"command": "rm -rf out/logs"}}
    other = {"name": "bash", "arguments": {"command": "rm -rf out/other"}}
    script = {
        "agents": {
            "main": [
                {"match": "clean the logs", "tool_calls": [clean]},
                {"match": "clean the logs", "tool_calls": [clean]},
                {"match": "clean the logs", "text": "Cleaned twice."},
                {"match": "once more", "tool_calls": [clean]},
                {"match": "once more", "tool_calls": [other]},
                {"match": "once more", "text": "The other one was not approved."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    first = k.execute("%%agent\nclean the logs")
    await wait_for_widget_text(k, "Approve bash?")
    assert await wait_for_widget_text(k, "Bash(rm -rf out/logs)")
    k.click(await k.wait_for_button("Approve for this session"))
    await k.finished(first)
    assert first.status == "ok", k.error(first)
    assert result_text(first) == "Cleaned twice."
    assert read_text(k, "✓ Approved for this session: rm -rf out/logs (Bash(rm -rf out/logs) runs without asking")
    assert not (tmp_path / "out" / "logs").exists()

    second = k.execute("%%agent\nonce more")
    await wait_for_widget_text(k, "rm -rf out/other")
    k.click(await k.wait_for_button("Deny"))
    await k.finished(second)
    assert result_text(second) == "The other one was not approved."
    cards = comm_ids_showing(k, "Approve bash?")
    assert len(cards) == 2, "one card for the first call, one for the other command; none for the repeats"
    assert (tmp_path / "out" / "other").is_dir()

    requests = await model_requests(k, "main")
    ran = "(no output)\nexit code: 0"
    deleted = f"{ran}\n\n[effects: deleted out/logs/ — the person can undo this]"
    assert [tool_results(requests[i])[-1] for i in (1, 2, 4)] == [deleted, ran, ran]


async def test_background_approval_and_completion_while_another_cell_runs(kernel, tmp_path):
    """With ``background_approvals = 'ask'`` a background run asks in the cell that launched
    it; the card can be answered while a later cell is busy, and the result lands in the
    launching cell (as that cell's output) before the busy cell ends. The main agent finds the
    completion in its next turn, and ``%task wait`` re-posts the result from its own cell."""
    (tmp_path / "build").mkdir()
    script = {
        "agents": {
            "general-purpose": [
                {"text": "Removing build/.", "tool_calls": [RM_BUILD]},
                {"text": "Removed build/ (it held nothing else)."},
            ],
            "main": [{"text": "The background clean-up finished: build/ is gone."}],
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.background_approvals = 'ask'")
    launch = await k.run("%%agent --bg\nclean the build folder")
    assert "agent run: general-purpose" in k.text(launch)

    card = await wait_for_widget_text(k, "Approve bash?")
    assert "[general-purpose] recursive or forced delete" in card
    # a cell started while the card waits shows it again (a reload may have lost it)
    busy = k.execute(_busy_until_file("release"))
    await k.wait_for(lambda: any(m["header"]["msg_type"] == "execute_input" for m in k.messages_for(busy)))
    k.click(await k.wait_for_button("Approve"))

    completion = await wait_for_widget_text(k, "**bg-1**", timeout=30)
    assert "completed" in completion and "Removed build/ (it held nothing else)." in completion
    assert busy.reply is None, "the completion arrived while the later cell was still busy"
    assert not (tmp_path / "build").exists()
    # it is the launching cell's output: its Output widget, updated under that cell's parent
    (box,) = comm_ids_showing(k, "**bg-1**")
    assert box in widgets_opened_by(k, launch)
    posts = [
        m
        for _, m in k.iopub
        if m["header"]["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == box
        and "outputs" in m["content"]["data"].get("state", {})
    ]
    assert posts and all(m["parent_header"]["msg_id"] == launch.msg_id for m in posts)

    (tmp_path / "release").touch()
    await k.finished(busy)
    assert k.text(busy) == (
        "1 approval waiting:\n"
        "approval: bash(command='rm -rf build') ([general-purpose] recursive or forced delete)\n"
        "released\n"
    )
    assert await task_state(k, "bg-1") == "completed"

    answer = await k.run("%%agent\nhow did the clean-up go?")
    assert result_text(answer) == "The background clean-up finished: build/ is gone."
    (main_request,) = await model_requests(k, "main")
    injected = last_user_text(main_request)
    assert '<background-task-completed id="bg-1" agent="general-purpose" status="completed">' in injected
    assert "Removed build/ (it held nothing else)." in injected

    waited = await k.run("%task wait bg-1")
    assert result_text(waited) == "Removed build/ (it held nothing else)."


async def test_a_background_task_bills_the_cell_that_launched_it(kernel, tmp_path):
    """The main agent of a cell starts a background task that is still waiting for its
    approval when the cell's run ends; when it finishes, the launching cell's header counts
    its tokens, and a later cell's run does not."""
    (tmp_path / "build").mkdir()
    spend = lambda n: {"input_tokens": n, "output_tokens": 0}  # noqa: E731
    script = {
        "agents": {
            "main": [
                {
                    "match": "clean up",
                    "tool_calls": [
                        {"name": "task", "arguments": {"subagent_type": "general-purpose", "prompt": "remove build", "background": True}}
                    ],
                    "usage": spend(10),
                },
                {"match": "clean up", "text": "Started the clean-up.", "usage": spend(20)},
                {"text": "Nothing else to do.", "usage": spend(3)},
            ],
            "general-purpose": [
                {"tool_calls": [RM_BUILD], "usage": spend(300)},
                {"text": "build/ removed.", "usage": spend(4000)},
            ],
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.background_approvals = 'ask'")
    launch = await k.run("%%agent\nclean up the build folder")
    assert result_text(launch) == "Started the clean-up."
    k.click(await k.wait_for_button("Approve"))
    await wait_for_widget_text(k, "**bg-1**", timeout=30)
    later = await k.run("%%agent\nanything else?")
    assert result_text(later) == "Nothing else to do."
    launching, later_view = run_views(k)
    await k.wait_for(lambda: " 4,330 tokens " in run_views(k)[0].header, what="the launching header with the task billed")
    assert " 3 tokens " in later_view.header


async def test_background_runs_from_one_cell_ask_and_report_in_their_own_views(kernel, tmp_path):
    """Two background runs launched by one cell each get their own run view: each one's
    approval card and its result appear in its own view, not both in the last one."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    script = {
        "agents": {
            "general-purpose": [
                {"match": "job one", "tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf a"}}]},
                {"match": "job two", "tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf b"}}]},
                {"match": "job one", "text": "one done"},
                {"match": "job two", "text": "two done"},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.background_approvals = 'ask'")
    await k.run("%agent --bg job one\n%agent --bg job two")
    await k.wait_for(lambda: sum(len(v.cards) for v in run_views(k)) == 2, what="both approval cards")
    for button in k.find_models(_model_name="ButtonModel", description="Approve"):
        k.click(button)
    await k.wait_for(lambda: all(v.completions for v in run_views(k)), what="both completions")

    by_task = {("bg-1" if "bg-1" in v.header else "bg-2"): v for v in run_views(k)}
    assert [card.count("rm -rf a") for card in by_task["bg-1"].cards] == [1]
    assert [card.count("rm -rf b") for card in by_task["bg-2"].cards] == [1]
    assert by_task["bg-1"].completions[0].endswith("one done")
    assert by_task["bg-2"].completions[0].endswith("two done")


async def test_direct_magic_sends_the_prompt_literally(kernel, tmp_path):
    """``%@name`` and ``%%@name`` hand the prompt to the subagent exactly as typed: a trailing
    ``?`` is not a help request, quotes and apostrophes survive, ``{x}`` and ``$x`` are not
    expanded. The subagent's answer is the cell's value; bare ``%@explore?`` is still help."""
    script = {
        "agents": {
            "explore": [
                {"match": "what is this?", "text": "A question, answered."},
                {"match": "it's", "text": "Quotes kept."},
                {"match": "multi-line", "text": "Cell form works."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("x = 'EXPANDED'")
    question = await k.run("%@explore what is this?")
    assert result_text(question) == "A question, answered."
    quoted = await k.run("""%@explore it's "double" and 'single' with {x} and $x""")
    assert result_text(quoted) == "Quotes kept."
    cell = await k.run("%%@explore\nmulti-line {x}\n  $x (indented) — really?")
    assert result_text(cell) == "Cell form works."

    prompts = [last_user_text(r) for r in await model_requests(k, "explore")]
    assert prompts == [
        "what is this?",
        """it's "double" and 'single' with {x} and $x""",
        "multi-line {x}\n  $x (indented) — really?",
    ]

    pages = help_pages(await k.run("%@explore?"))
    assert pages and "Run subagent 'explore' directly" in pages[0]
    assert len(await model_requests(k, "explore")) == 3, "help did not run the agent"


async def test_assigned_magic_keeps_a_trailing_question_mark(kernel, tmp_path):
    """``answer = %agent …?`` and ``found = %@explore …?`` assign the answer, with the ``?`` in
    the prompt, instead of turning the line into a help request for its last word."""
    script = {
        "agents": {
            "main": [{"match": "in the north?", "text": "36 units."}],
            "explore": [{"match": "what is this?", "text": "A file."}],
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("answer = %agent how many units in the north?\nfound = %@explore what is this?")
    assert result_text(await k.run("f'{answer}|{found}'")) == "'36 units.|A file.'"
    assert [last_user_text(r) for r in await model_requests(k)] == ["how many units in the north?", "what is this?"]


async def test_task_magic_list_show_send_stop_wait(kernel, tmp_path):
    """``%task`` lists background tasks; ``show`` gives the progress log; ``send`` steers a
    running subagent, which reads the message at its next turn; ``stop`` cancels one;
    ``wait`` returns the result; unknown ids are answered with the valid ones."""
    (tmp_path / "build").mkdir()
    script = {
        "agents": {
            "general-purpose": [
                {"match": "tidy the build", "text": "Tidying.", "tool_calls": [RM_BUILD]},
                {"match": "slow survey", "delay": 120, "text": "never sent"},
                {"match": "also check the tests", "text": "Build removed; tests checked as asked."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.background_approvals = 'ask'")
    await k.run("%%agent --bg\ntidy the build")
    await k.run("%%agent --bg\nslow survey of the repo")
    await wait_for_widget_text(k, "Approve bash?")  # bg-1 is parked on its approval

    cell = await k.run("%task")
    # the first cell run while a card waits shows that card again (this one, or the second
    # launch if bg-1 asked before it ran): the table comes after it
    listing = k.text(cell)
    listing = listing[listing.index("id ") :]
    lines = listing.splitlines()
    assert lines[0].split() == ["id", "agent", "description", "state", "elapsed", "tokens", "cost"]
    assert lines[-1].startswith("session: ")  # what the whole session has used
    assert lines[1].startswith("bg-1") and "general-purpose" in lines[1] and "tidy the build" in lines[1]
    assert lines[2].startswith("bg-2") and "running" in lines[2]

    shown = k.text(await k.run("%task show bg-1"))
    assert "bg-1" in shown and "waiting for approval: bash(command='rm -rf build')" in shown

    sent = k.text(await k.run("%task send bg-1 also check the tests"))
    assert "delivered to bg-1" in sent

    stopped = k.text(await k.run("%task stop bg-2"))
    # (an update of bg-2's view, now settled, may come with it: it is for the launching
    # cell's output, by its display id)
    assert stopped.endswith("bg-2 (general-purpose) cancelled\n"), stopped
    assert await task_state(k, "bg-2") == "cancelled"
    assert "general-purpose · cancelled" in await wait_for_widget_text(k, "**bg-2**")

    k.click(await k.wait_for_button("Approve"))
    waited = await k.run("%task wait bg-1 --timeout 60")
    assert result_text(waited) == "Build removed; tests checked as asked."
    second_turn = (await model_requests(k, "general-purpose"))[-1]
    assert last_user_text(second_turn) == "also check the tests"

    for command in ("show", "wait", "stop", "send"):
        bad = await k.run(f"%task {command} bg-9 hello", check=False)
        assert error_name(bad) == "UsageError", command
        assert "bg-9" in k.text(bad) and "bg-1, bg-2" in k.text(bad), command
