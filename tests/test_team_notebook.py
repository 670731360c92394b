"""Teams in a real kernel: the main agent spawns a teammate from a cell, a later cell
messages it, and its answer appears in the live team view; %team send / wait / shutdown and
the text box of the view."""

from __future__ import annotations

import pytest

from notebook_support import HARNESS, fresh_harness, kernel_json, result_text, wait_for_widget_text

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]

SCRIPT = {
    "agents": {
        "main": [
            {
                "text": "I'll put alice on it.",
                "tool_calls": [
                    {
                        "name": "task",
                        "arguments": {
                            "subagent_type": "explore",
                            "prompt": "Watch the data folder and report what is in it.",
                            "team_name": "analysis",
                            "name": "alice",
                        },
                    }
                ],
            },
            {"text": "Alice has joined the analysis team."},
        ],
        "alice": [
            {"text": "The data folder holds sales.csv."},
            {"match": "columns", "text": "sales.csv has the columns date, region and revenue."},
            {"match": "rows", "text": "It has 3 rows."},
        ],
    }
}


async def test_spawn_from_a_cell_message_later_and_see_the_answer_in_the_team_view(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path, SCRIPT)
    await k.run("%config HarnessNB.teams = True")
    spawn = await k.run("%%agent\nStart a teammate that watches the data folder.")
    assert result_text(spawn) == "Alice has joined the analysis team."

    first = await k.run("%team wait alice --timeout 20")
    assert result_text(first) == "The data folder holds sales.csv."

    view = await k.run("%team")
    text = k.text(view)
    assert text.startswith("team view\n")
    header = await wait_for_widget_text(k, "team view</b> · teams: analysis")
    assert header.endswith("· 1 teammate"), header
    assert "alice  analysis  explore  idle" in text
    assert "alice → team-lead [idle_notification]: The data folder holds sales.csv." in text

    sent = await k.run("%team send alice which columns does it have?")
    assert "delivered to alice" in k.text(sent)
    # the answer shows up live in the team view (its message log and alice's panel)
    await wait_for_widget_text(k, "sales.csv has the columns date, region and revenue.")
    answer = await k.run("%team wait alice --timeout 20")
    assert result_text(answer) == "sales.csv has the columns date, region and revenue."

    # the leader's inbox reached the main agent's next turn, once
    roster = await kernel_json(k, f"[(m.name, m.state, m.turns) for m in {HARNESS}.teams.roster()]")
    assert roster == [["alice", "idle", 2]]

    # the view's text box + Send button message the teammate too
    box = next(cid for cid, st in k.models.items() if st.get("placeholder") == "message alice…")
    k.set_state(box, {"value": "and how many rows?"})
    send = await k.wait_for_button("Send")
    k.click(send)
    await wait_for_widget_text(k, "It has 3 rows.")

    bye = await k.run("%team shutdown alice")
    assert "alice" in k.text(bye)
    state = await kernel_json(k, f"{HARNESS}.teams.member('alice').state")
    assert state == "exited"


async def test_team_magic_errors_are_clear(kernel, tmp_path):
    k = await fresh_harness(kernel, tmp_path, SCRIPT)
    off = await k.run("%team", check=False)
    assert "teams are off: turn them on with %config HarnessNB.teams = True" in k.error(off)
    await k.run("%config HarnessNB.teams = True")
    cell = await k.run("%team send bob hello", check=False)
    assert cell.status == "error"
    assert "bob" in k.error(cell) and "UsageError" in k.error(cell)
    cell = await k.run("%team frobnicate", check=False)
    assert "unknown %team command 'frobnicate'" in k.error(cell)
    cell = await k.run("%team")
    assert "no teammates yet" in k.text(cell)
