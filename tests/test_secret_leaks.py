"""No credential leaves the process (issue 9, findings 1–3): each kind of secret — a key
exported after the harness was built, an odd-named environment key, a value only in a
``.env`` file, a key pasted into the prompt, strings shaped like keys — is set, a real run
goes over HTTP to the fake LLM server while recording a cassette, a tool prints the secret
(once small, once large enough to be offloaded), and then every file the run wrote and
every request body the server received is searched for it.

The tools here are the test's own (they read ``os.environ`` or a file in Python), so what
is tested is the masking, whatever the bash sandbox does to a command's environment.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness_nb.core import Event
from harness_nb.harness import Harness
from harness_nb.testing import FakeLLMServer
from harness_nb.tools import ToolContext, tool

LATE_OPENAI = "sk-proj-LateKey9a8b7c6d5e4f3g2h1i0jKlMnOpQrStUv"
LATE_TOKEN = "late-service-token-7Gq2Lw9Zx4Rt8Yp1"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz91EXAMPLE"
AZURE_KEY = "b7e4c2a9f01d4e3c8a6b5d2f9e0c1a37"
DOTENV_PASSWORD = "correct horse battery staple 42"
DOTENV_RANDOM = "whsec_9Xk2Lm7Qp4Rs8Tv1Wy3Za6Bc"
PASTED = "sk-proj-Pasted0123456789abcdefGHIJKLmnopQRSTuvwx"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
AWS_ID = "AKIA" + "QWERTYUIOPASDFGH"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0ZXN0LXVzZXItMTIzIn0.c2lnbmF0dXJlLWJ5dGVzLTEyMzQ1"
SLACK = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOp"


@dataclass
class Leak:
    """One kind of secret: how it is set (``before`` the harness is built, ``after`` it),
    what the tools print, and the prompt."""

    name: str
    secrets: tuple[str, ...]
    printed: Callable[[Path], str]
    before: Callable[[pytest.MonkeyPatch, Path], None] = lambda mp, wd: None
    after: Callable[[pytest.MonkeyPatch, Path], None] = lambda mp, wd: None
    prompt: str = "show me what the tools see"


def _late(mp: pytest.MonkeyPatch, wd: Path) -> None:
    mp.setenv("OPENAI_API_KEY", LATE_OPENAI)  # the provider made next reads it
    mp.setenv("LATE_SERVICE_TOKEN", LATE_TOKEN)  # a credential no provider holds


def _odd_names(mp: pytest.MonkeyPatch, wd: Path) -> None:
    mp.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    mp.setenv("AZURE_OPENAI_KEY", AZURE_KEY)


def _dotenv(mp: pytest.MonkeyPatch, wd: Path) -> None:
    (wd / ".env").write_text(f'# local settings\nDEBUG=true\nexport DB_PASSWORD="{DOTENV_PASSWORD}"\n')
    (wd / "config").mkdir()
    (wd / "config" / ".env.local").write_text(f"WEBHOOK={DOTENV_RANDOM}  # from the dashboard\n")


def _files(wd: Path) -> str:
    return (wd / ".env").read_text() + (wd / "config" / ".env.local").read_text()


LEAKS = [
    Leak(
        "late environment key",
        (LATE_OPENAI, LATE_TOKEN),
        lambda wd: f"OPENAI_API_KEY={os.environ['OPENAI_API_KEY']} LATE_SERVICE_TOKEN={os.environ['LATE_SERVICE_TOKEN']}",
        after=_late,
    ),
    Leak(
        "odd-named environment key",
        (AWS_SECRET, AZURE_KEY),
        lambda wd: f"aws={os.environ['AWS_SECRET_ACCESS_KEY']}\nazure={os.environ['AZURE_OPENAI_KEY']}",
        before=_odd_names,
    ),
    Leak(".env value", (DOTENV_PASSWORD, DOTENV_RANDOM), _files, before=_dotenv),
    Leak("prompt-typed key", (PASTED,), lambda wd: "nothing secret here", prompt=f"use my key {PASTED} for the API"),
    Leak(
        "key-shaped tool output",
        (GITHUB, AWS_ID, JWT, SLACK),
        lambda wd: f"remote: https://{GITHUB}@github.com/x/y\nid {AWS_ID}\nAuthorization: Bearer {JWT}\nslack={SLACK}",
    ),
]


def _tools(printed: Callable[[], str], seen: list[str]) -> list:
    @tool(read_only=True)
    async def show(ctx: ToolContext) -> str:
        """Print what this tool can see."""
        seen.append(printed())
        return seen[-1]

    @tool(read_only=True)
    async def dump(ctx: ToolContext) -> str:
        """Print a lot."""
        filler = "x" * 3000
        seen.append(f"{printed()}\n{filler}\n{printed()}\n{filler}\n{printed()}")
        return seen[-1]

    return [show, dump]


STEPS = [
    {"text": "Looking.", "tool_calls": [{"name": "show", "arguments": {}}, {"name": "dump", "arguments": {}}]},
    {"text": "All done."},
]


def _files_written(workdir: Path) -> dict[str, str]:
    written = {}
    for path in sorted(workdir.rglob("*")):
        if path.is_file() and path.suffix in (".jsonl", ".txt", ".json"):
            written[str(path.relative_to(workdir))] = path.read_text(encoding="utf-8", errors="replace")
    return written


@pytest.mark.parametrize("leak", LEAKS, ids=lambda leak: leak.name)
async def test_no_secret_reaches_the_model_a_transcript_an_offload_file_a_cassette_or_a_log(
    leak: Leak, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="harness_nb")
    leak.before(monkeypatch, tmp_path)
    seen: list[str] = []
    events: list[Event] = []
    async with FakeLLMServer(STEPS) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        h = Harness(
            None,
            workdir=tmp_path,
            tools=_tools(lambda: leak.printed(tmp_path), seen),
            approval_policy="never",
            include_user_agents=False,
            record_to="cassettes/run.jsonl",
            offload_chars=2000,
        )
        leak.after(monkeypatch, tmp_path)
        h.configure(model="openai-compatible/test-model")  # as %config HarnessNB.model does
        async with h:
            result = await h.run(leak.prompt, on_event=events.append)

    assert result.final_text == "All done."
    assert len(srv.requests) == 2 and len(seen) == 2
    written = _files_written(tmp_path)
    assert any(name.startswith(".harness_nb/sessions/") for name in written), written.keys()
    assert any(name.startswith(".harness_nb/offload/") for name in written), written.keys()
    assert "cassettes/run.jsonl" in written
    bodies = [json.dumps(r.body, ensure_ascii=False) for r in srv.requests]
    shown = {
        **{f"file {name}": text for name, text in written.items() if not name.startswith(("config/", ".env"))},
        **{f"request {i}": body for i, body in enumerate(bodies)},
        "events": "\n".join(e.model_dump_json() for e in events),
        "log": caplog.text,
        "final text": result.final_text,
    }
    for secret in leak.secrets:
        assert any(secret in s for s in seen) or secret in leak.prompt  # the secret really was there
        leaked = [where for where, text in shown.items() if secret in text]
        assert not leaked, f"{secret!r} leaked into {leaked}"
    assert "[redacted]" in bodies[-1]  # the model saw the masked text, not nothing


def test_a_team_roster_on_disk_holds_no_pasted_key(tmp_path: Path) -> None:
    """A teammate's first prompt, kept in roster.json, may be a person's text."""
    from harness_nb.team.roster import RosterMember, RosterStore

    store = RosterStore(tmp_path)
    member = RosterMember(name="alice", team="t", agent="general-purpose", task_id="tm-1", prompt=f"use {PASTED}")
    path = store.save("t", [member])
    assert PASTED not in path.read_text() and "use [redacted]" in path.read_text()
    loaded = store.load("t")
    assert loaded is not None and loaded.members[0].prompt == "use [redacted]"


# -- views and text output: the last line of defence --------------------------------------------
#
# What reaches a view has passed the session or the redacting hook; these are the paths that
# do not: the model's streamed text (before it joins the session) and texts handed to a view.


def test_a_run_view_never_shows_a_credential_whatever_it_is_handed(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_nb.core import MessagesInjected, TextDelta, ToolCall, ToolCallFinished, ToolCallStarted
    from harness_nb.notebook.widgets.view import RunView
    from widget_support import ManualClock, WidgetWire

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    wire = WidgetWire()
    wire.install()
    try:
        clock = ManualClock()
        view = RunView("main", "m", scheduler=clock)
        call = ToolCall(id="c1", name="bash", arguments=json.dumps({"command": f"echo {GITHUB}"}))
        view(TextDelta(text=f"The token is {GITHUB}, the secret {AWS_SECRET}."))
        clock.advance(1)
        view(ToolCallStarted(call=call))  # the narration so far becomes a line of its own
        view(ToolCallFinished(call=call, result=f"{AWS_SECRET}\n{JWT}", is_error=False, duration=0.1))
        view(MessagesInjected(texts=(f"from a teammate: {SLACK}",)))
        view.post_completion(f"**bg-1** found {AWS_ID}")
        view.finish("done")
        sent = json.dumps([m.data for m in wire.messages], default=str)
    finally:
        wire.uninstall()
    assert "[redacted]" in sent
    for secret in (GITHUB, AWS_SECRET, JWT, SLACK, AWS_ID):
        assert secret not in sent


def test_the_text_view_never_prints_a_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from harness_nb.core import TextDelta, ToolCall, ToolCallFinished, ToolCallStarted
    from harness_nb.textview import TextView

    monkeypatch.setenv("AZURE_OPENAI_KEY", AZURE_KEY)
    out = io.StringIO()
    view = TextView(out)
    call = ToolCall(id="c1", name="bash", arguments=json.dumps({"command": f"echo {PASTED}"}))
    view(TextDelta(text=f"Using {AZURE_KEY}\n"))
    view(ToolCallStarted(call=call))
    view(ToolCallFinished(call=call, result=f"{PASTED}", is_error=False, duration=0.1))
    assert "[redacted]" in out.getvalue()
    assert AZURE_KEY not in out.getvalue() and PASTED not in out.getvalue()


# -- the notebook flow of finding 1, in a real kernel ------------------------------------------

NOTEBOOK_KEY = "sk-proj-NotebookKey0a1b2c3d4e5f6g7h8i9jKLMNOPqrstuv"
FIRST = [{"text": "Hello from the scripted model."}]
LATER = [
    {
        "text": "Looking at the key.",
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "key.txt"}},
            {"name": "inspect_variable", "arguments": {"name": "key"}},
        ],
    },
    {"text": "It holds an API key."},
]
# The key is read from a file in the kernel, not written in a cell, so that nothing the
# kernel sends (cell sources included) may hold it.
SET_KEY = (
    "import os\n"
    "key = open('key.txt').read().strip()\n"
    "os.environ['OPENAI_API_KEY'] = key\n"
    "os.environ['OPENAI_BASE_URL'] = {url!r}\n"
)


def _assert_nowhere(key: str, places: dict[str, str]) -> None:
    leaked = [where for where, text in places.items() if key in text]
    assert not leaked, f"the key leaked into {leaked}"


@pytest.mark.kernel
async def test_a_key_exported_in_a_notebook_after_the_first_run_is_masked_everywhere(tmp_path: Path) -> None:
    from notebook_support import notebook, result_text

    (tmp_path / "key.txt").write_text(NOTEBOOK_KEY + "\n")
    with FakeLLMServer(LATER).in_thread() as srv:
        async with notebook(tmp_path, FIRST) as k:
            first = await k.run("%%agent\nhi")
            assert result_text(first) == "Hello from the scripted model."
            await k.run(SET_KEY.format(url=srv.url + "/v1"))
            await k.run("%config HarnessNB.model = 'openai-compatible/test-model'")
            later = await k.run("%%agent\nwhat is in key.txt?")
            assert result_text(later) == "It holds an API key."
            iopub = [json.dumps(m, default=str) for _, m in k.iopub]
            widgets = json.dumps(k.models)
    assert len(srv.requests) == 2
    assert srv.requests[0].api_key == NOTEBOOK_KEY  # the key was used, in the header only
    bodies = [json.dumps(r.body, ensure_ascii=False) for r in srv.requests]
    assert "[redacted]" in bodies[1]
    transcripts = {str(p): p.read_text() for p in (tmp_path / ".harness_nb" / "sessions").glob("*.jsonl")}
    assert transcripts
    _assert_nowhere(
        NOTEBOOK_KEY,
        {
            **{f"request {i}": b for i, b in enumerate(bodies)},
            **transcripts,
            "widget state": widgets,
            **{f"iopub message {i}": m for i, m in enumerate(iopub)},
        },
    )


@pytest.mark.kernel
def test_a_saved_notebook_holds_no_key_exported_after_the_first_run(tmp_path: Path) -> None:
    """The same flow run headless by nbclient and saved with its widget state: the .ipynb
    file, as a person would commit it, holds no trace of the key."""
    import nbformat

    from harness_nb.testing.run_notebook import execute

    (tmp_path / "key.txt").write_text(NOTEBOOK_KEY + "\n")
    (tmp_path / "script.yaml").write_text(json.dumps(FIRST))
    with FakeLLMServer(LATER).in_thread() as srv:
        cells = [
            "%load_ext harness_nb",
            "%config HarnessNB.model = 'scripted/script.yaml'",
            "%%agent\nhi",
            SET_KEY.format(url=srv.url + "/v1"),
            "%config HarnessNB.model = 'openai-compatible/test-model'",
            "%%agent\nwhat is in key.txt?",
        ]
        path = tmp_path / "flow.ipynb"
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
        nb = execute(path, timeout=120)
        nbformat.write(nb, path)
    saved = path.read_text()
    assert "widget-state" in saved and "It holds an API key." in saved
    assert srv.requests[0].api_key == NOTEBOOK_KEY
    _assert_nowhere(NOTEBOOK_KEY, {"the saved notebook": saved, "request 1": json.dumps(srv.requests[1].body)})
