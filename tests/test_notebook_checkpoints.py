"""Checkpoints in a real ipykernel: what a call did shows under its line with an undo
button (a click puts the data back; the static copy keeps the line, without the button),
``%agent --checkpoints`` lists them, and ``%agent --rewind`` shows the diff on a card and
changes nothing until Rewind is clicked — or, with no one to click, says how. A
``run_python`` write is undone like any other."""

from __future__ import annotations

import pytest

from harness_nb.testing.kernel_driver import visible_text
from notebook_support import (
    HARNESS,
    fresh_harness,
    kernel_json,
    model_requests,
    read_text,
    result_text,
    tool_results,
    wait_for_widget_text,
)

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KEEP = "id,value\n1,3.5\n2,7\n"


def plant(folder) -> None:  # type: ignore[no-untyped-def]
    (folder / "data" / "raw").mkdir(parents=True)
    (folder / "data" / "keep.csv").write_text(KEEP)
    (folder / "data" / "raw" / "a.txt").write_text("raw\n")


def updates_of(k, display_id: str) -> list[dict]:  # type: ignore[no-untyped-def]
    return [
        m["content"]
        for _, m in k.iopub
        if m["header"]["msg_type"] == "update_display_data" and m["content"]["transient"]["display_id"] == display_id
    ]


async def test_the_effects_line_and_its_undo_button_and_the_static_copy(kernel, tmp_path):
    plant(tmp_path)
    wipe = {"name": "bash", "arguments": {"command": "find data -delete"}}
    script = {
        "agents": {
            "main": [
                {"match": "clean", "tool_calls": [wipe]},
                {"match": "clean", "text": "Cleaned."},
                {"match": "hello", "text": "Hello."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.approval_policy = 'never'")
    cell = await k.run("%%agent\nclean the folder")
    assert result_text(cell) == "Cleaned."
    assert not (tmp_path / "data").exists()
    line = read_text(k, "⟲ deleted data/ (2 files)")
    assert line is not None
    requests = await model_requests(k, "main")
    assert tool_results(requests[1])[0].endswith("[effects: deleted data/ (2 files) — the person can undo this]")

    (shown,) = [o for o in cell.outputs if o["msg_type"] == "display_data"]
    display_id = shown["transient"]["display_id"]
    ended = updates_of(k, display_id)[-1]
    assert WIDGET_VIEW in ended["data"], "a view offering undo stays a widget once its run ended"
    assert "⟲ deleted data/ (2 files) · checkpoint #1" in visible_text(ended["data"]["text/html"])

    k.click(await k.wait_for_button("undo"))
    await wait_for_widget_text(k, "undid checkpoint #1")
    assert (tmp_path / "data" / "keep.csv").read_text() == KEEP
    assert (tmp_path / "data" / "raw" / "a.txt").read_text() == "raw\n"
    final = await k.wait_for(
        lambda: [u for u in updates_of(k, display_id) if WIDGET_VIEW not in u["data"]], what="the static copy"
    )
    assert set(final[-1]["data"]) == {"text/plain", "text/html"}, "settled: the static copy stands in"
    page = visible_text(final[-1]["data"]["text/html"])
    assert "⟲ deleted data/ (2 files) · undid checkpoint #1" in page and "can undo" not in page


async def test_the_undo_button_goes_when_the_next_run_starts(kernel, tmp_path):
    plant(tmp_path)
    script = {
        "agents": {
            "main": [
                {"match": "first", "tool_calls": [{"name": "bash", "arguments": {"command": "touch new.txt"}}]},
                {"match": "first", "text": "Made it."},
                {"match": "second", "text": "Nothing to do."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.approval_policy = 'never'")
    first = await k.run("%%agent\nfirst")
    await k.wait_for_button("undo")
    (shown,) = [o for o in first.outputs if o["msg_type"] == "display_data"]
    await k.run("%%agent\nsecond")
    final = await k.wait_for(
        lambda: [u for u in updates_of(k, shown["transient"]["display_id"]) if WIDGET_VIEW not in u["data"]],
        what="the first view's static copy",
    )
    assert "⟲ created new.txt · checkpoint #1" in visible_text(final[-1]["data"]["text/html"])
    undo = await k.run("%agent --undo 1")
    assert k.text(undo).startswith("undid checkpoint #1 (bash by main): removed new.txt")
    assert not (tmp_path / "new.txt").exists()


async def test_rewind_shows_the_diff_first_and_changes_nothing_until_clicked(kernel, tmp_path):
    plant(tmp_path)
    write = {"name": "write_file", "arguments": {"path": "data/keep.csv", "content": "id,value\n"}}
    script = {"agents": {"main": [{"tool_calls": [write]}, {"text": "Trimmed."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.approval_policy = 'never'")
    await k.run("%%agent\ntrim the data")
    assert (tmp_path / "data" / "keep.csv").read_text() == "id,value\n"
    listed = k.text(await k.run("%agent --checkpoints"))
    assert "#1" in listed and "write_file" in listed and "changed data/keep.csv" in listed

    nobody = await k.run("%agent --rewind", allow_stdin=False)
    said = k.text(nobody)
    assert "+1,3.5" in said and "nothing was changed (no one can click here)" in said
    assert "%agent --rewind 1 --yes" in said
    assert (tmp_path / "data" / "keep.csv").read_text() == "id,value\n"

    cancelled = k.execute("%agent --rewind 1")
    await wait_for_widget_text(k, "Rewind?")
    assert read_text(k, "+2,7"), "the card shows the diff"
    k.click(await k.wait_for_button("Cancel"))
    await k.finished(cancelled)
    assert read_text(k, "cancelled: checkpoint #1 was not restored, nothing was changed")
    assert (tmp_path / "data" / "keep.csv").read_text() == "id,value\n"

    rewound = k.execute("%agent --rewind")
    await wait_for_widget_text(k, "Rewind?")
    k.click(await k.wait_for_button("Rewind"))
    await k.finished(rewound)
    assert rewound.status == "ok", k.error(rewound)
    assert (tmp_path / "data" / "keep.csv").read_text() == KEEP
    assert read_text(k, "rewound the workdir to checkpoint #1 (before write_file by main): restored data/keep.csv")


async def test_a_run_python_write_is_rewound_byte_for_byte(kernel, tmp_path):
    plant(tmp_path)
    (tmp_path / "data" / "blob.bin").write_bytes(bytes(range(256)) * 8)
    code = "import shutil; shutil.rmtree('data/raw'); open('data/blob.bin', 'wb').write(b'')"
    script = {"agents": {"main": [{"tool_calls": [{"name": "run_python", "arguments": {"code": code}}]}, {"text": "ok"}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.approval_policy = 'never'")
    await k.run("%%agent\nreset the data")
    assert not (tmp_path / "data" / "raw").exists()
    requests = await model_requests(k, "main")
    assert "changed data/blob.bin; deleted data/raw/ (1 file)" in tool_results(requests[1])[0]
    done = await k.run("%agent --rewind --yes")
    assert k.text(done).startswith("rewound the workdir to checkpoint #1 (before run_python by main)")
    assert (tmp_path / "data" / "blob.bin").read_bytes() == bytes(range(256)) * 8
    assert (tmp_path / "data" / "raw" / "a.txt").read_text() == "raw\n"
    kept = await kernel_json(k, f"[c.tool for c in {HARNESS}.checkpoints()]")
    assert kept == ["run_python", "rewind"]
