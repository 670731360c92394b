"""The model trial's machinery (benchmarks/model_trial/), answered by a script.

The real trial has a capable model answer the relay's files; these tests prove that what it
relies on works: the relay's round trip, streamed and not, through harness_nb's own
provider; its refusal of a malformed answer until a corrected one comes; its HTTP 504 for a
request nobody answers; and run_trial.py running a task notebook in a real kernel, with
summarise.py counting what the requests hold.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest

from harness_nb.core import ProviderError, ToolSpec
from harness_nb.core.message import UserMessage
from harness_nb.providers.base import ModelRequest
from harness_nb.providers.openai import OpenAICompatibleProvider
from harness_nb.providers.options import ProviderOptions

TRIAL = Path(__file__).resolve().parent.parent / "benchmarks" / "model_trial"
WITHIN = 120.0  # seconds: a bound on waiting for files and processes, not a measurement
ECHO = ToolSpec(
    name="echo",
    description="Return the text.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


class Stopped(Exception):
    """The test is over: a helper thread stops waiting."""


def wait_for(path: Path, stop: threading.Event | None = None) -> Path:
    """``path`` once it exists; ``Stopped`` once ``stop`` is set, ``AssertionError`` after
    ``WITHIN`` seconds."""
    deadline = time.monotonic() + WITHIN
    while not path.exists():
        if stop is not None and stop.is_set():
            raise Stopped
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path


def wait_for_text(path: Path, text: str, stop: threading.Event) -> str:
    """The text of ``path`` once it holds ``text`` (as ``wait_for``)."""
    deadline = time.monotonic() + WITHIN
    while text not in (found := path.read_text() if path.exists() else ""):
        if stop.is_set():
            raise Stopped
        assert time.monotonic() < deadline, f"{path} never said {text!r}"
        time.sleep(0.05)
    return found


def write_answer(folder: Path, n: int, answer: Any) -> None:
    """Write the answer to request ``n`` as an answerer should: to a temporary name, then renamed."""
    tmp = folder / f"resp-{n:04d}.json.tmp"
    tmp.write_text(answer if isinstance(answer, str) else json.dumps(answer), encoding="utf-8")
    tmp.replace(folder / f"resp-{n:04d}.json")


@contextmanager
def in_thread(work: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run ``work(stop)`` in a thread while the block runs; then set ``stop``, wait for the
    thread, and raise what it raised (so nothing outlives the test)."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work(stop)
        except Stopped:
            pass
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, name="model-trial-answerer")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    if failures:
        raise failures[0]


def answering(folder: Path, answers: Sequence[Any]) -> AbstractContextManager[None]:
    """Answer requests 1, 2, … in ``folder`` from a fixed list while the block runs."""

    def answer(stop: threading.Event) -> None:
        for n, given in enumerate(answers, 1):
            wait_for(folder / f"req-{n:04d}.json", stop)
            write_answer(folder, n, given)

    return in_thread(answer)


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A relay on a free port writing to ``tmp_path/relay``, with a 2-second answer timeout;
    yields its ``/v1`` URL and folder."""
    with relay_running(tmp_path, timeout=2) as started:
        yield started


@pytest.fixture
def impatient_relay(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A relay whose answer timeout is half a second (for a test that waits it out)."""
    with relay_running(tmp_path, timeout=0.5) as started:
        yield started


@contextmanager
def relay_running(tmp_path: Path, *, timeout: float) -> Iterator[tuple[str, Path]]:
    """The relay (as ``relay``), with ``timeout`` seconds to wait for an answer."""
    folder = tmp_path / "relay"
    command = [sys.executable, str(TRIAL / "relay.py"), str(folder), "--port", "0", "--timeout", f"{timeout:g}"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None and process.stderr is not None
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), process.stderr.read()
            yield url, folder
        finally:
            process.terminate()
            process.wait(WITHIN)


def request(text: str, *, tools: Sequence[ToolSpec] = (ECHO,)) -> ModelRequest:
    """A request from the test's agent, with the ``echo`` tool."""
    return ModelRequest(
        system="You are the trial's test agent.\nSay little.", messages=[UserMessage(content=text)], tools=tools
    )


async def test_the_relay_answers_streamed_and_plain_requests_from_files(relay: tuple[str, Path]) -> None:
    url, folder = relay
    answers = [
        {"content": "plain answer", "tool_calls": [{"name": "echo", "arguments": {"text": "one"}}]},
        {"content": "streamed answer that is longer than one chunk of forty characters", "tool_calls": []},
    ]
    plain = OpenAICompatibleProvider("relay", base_url=url, options=ProviderOptions(streaming=False))
    streamed = OpenAICompatibleProvider("relay", base_url=url, options=ProviderOptions(streaming=True))
    try:
        with answering(folder, answers):
            assert await plain.discover_window() == 128_000
            first = await plain.complete(request("hello"))
            second = [item async for item in streamed.stream(request("hello"))][-1]
    finally:
        await plain.aclose()
        await streamed.aclose()

    assert first.message.content == "plain answer"
    assert [(c.name, json.loads(c.arguments)) for c in first.message.tool_calls] == [("echo", {"text": "one"})]
    assert second.message.content == "streamed answer that is longer than one chunk of forty characters"
    assert second.message.tool_calls == ()
    assert json.loads((folder / "req-0001.json").read_bytes()).get("stream") is None
    assert json.loads((folder / "req-0002.json").read_bytes())["stream"] is True
    readable = (folder / "req-0001.txt").read_text()
    assert readable.startswith("# req-0001 · C1, its request 1 · subagent: You are the trial's test agent.")
    assert "You are the trial's test agent.\nSay little." in readable and "### echo" in readable
    again = (folder / "req-0002.txt").read_text()  # the same conversation sent again
    assert "System prompt: unchanged since req-0001" in again and "Tools: unchanged since req-0001: echo" in again
    assert "The same messages as req-0001: sent again (a retry). The last one:\n--- [1] user\nhello" in again
    assert [line.split("\t")[2] for line in (folder / "timing.log").read_text().splitlines()] == ["answered"] * 2


async def test_a_malformed_answer_is_refused_until_a_corrected_one_comes(relay: tuple[str, Path]) -> None:
    url, folder = relay
    explained: list[str] = []

    def answer(stop: threading.Event) -> None:
        wait_for(folder / "req-0001.json", stop)
        write_answer(folder, 1, {"content": "x", "tool_calls": [{"name": "bash", "arguments": '{"command": "ls"}'}]})
        explained.append(wait_for(folder / "resp-0001.error", stop).read_text())
        write_answer(folder, 1, "{not json")
        explained.append(wait_for_text(folder / "resp-0001.error", "not valid JSON", stop))
        write_answer(folder, 1, {"content": "corrected", "tool_calls": [{"name": "echo", "arguments": {"text": "ok"}}]})

    provider = OpenAICompatibleProvider(
        "relay", base_url=url, options=ProviderOptions(streaming=True, max_retries=0, timeout=WITHIN)
    )
    try:
        with in_thread(answer):
            response = [item async for item in provider.stream(request("hello"))][-1]
    finally:
        await provider.aclose()

    assert "'bash' is not a tool of this request; its tools: echo" in explained[0]
    assert "'arguments' must be a JSON object, not a string holding JSON" in explained[0]
    assert "Write a corrected resp-0001.json; req-0001 is still waiting." in explained[0]
    assert response.message.content == "corrected"
    assert [c.name for c in response.message.tool_calls] == ["echo"]
    assert not (folder / "resp-0001.error").exists()
    fields = (folder / "timing.log").read_text().rstrip("\n").split("\t")
    assert (fields[2], fields[4]) == ("answered", "refused=2")


async def test_a_request_nobody_answers_gets_http_504_and_is_closed(impatient_relay: tuple[str, Path]) -> None:
    url, folder = impatient_relay
    provider = OpenAICompatibleProvider(
        "relay", base_url=url, options=ProviderOptions(streaming=True, max_retries=0, timeout=WITHIN)
    )
    try:
        with pytest.raises(ProviderError) as caught:
            [item async for item in provider.stream(request("anyone there?"))]
    finally:
        await provider.aclose()

    assert caught.value.status == 504
    assert "no answer to req-0001 within 0.5 s" in str(caught.value)
    assert (folder / "req-0001.closed").read_text() == "no answer within 0.5 s: the client got HTTP 504\n"
    assert (folder / "timing.log").read_text().split("\t")[2] == "timeout"
    assert (folder / "pending.txt").read_text() == ""


def test_answer_py_lists_the_waiting_requests_and_sends_only_a_good_answer(tmp_path: Path) -> None:
    folder = tmp_path / "requests" / "01-a"
    folder.mkdir(parents=True)
    body = {
        "model": "relay",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "echo"}}],
    }
    (folder / "req-0001.json").write_text(json.dumps(body))
    (folder / "req-0001.txt").write_text("# req-0001\n")
    answer = [sys.executable, str(TRIAL / "answer.py")]

    def run(*args: str, given: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([*answer, *args], input=given, capture_output=True, text=True, timeout=WITHIN)

    assert run("next", str(tmp_path / "requests"), "--wait", "0").stdout == f"{folder / 'req-0001.txt'}\n"
    refused = run("send", str(folder / "req-0001"), given='{"tool_calls": [{"name": "bash", "arguments": {}}]}')
    assert refused.returncode == 1 and not (folder / "resp-0001.json").exists()
    assert refused.stderr == "not sent: tool call 1: 'bash' is not a tool of this request; its tools: echo\n"
    assert run("send", str(folder / "req-0001.txt"), given='{"content": "hello"}').returncode == 0
    assert json.loads((folder / "resp-0001.json").read_text()) == {"content": "hello"}
    nothing = run("next", str(tmp_path / "requests"), "--wait", "0")
    assert nothing.returncode == 1 and nothing.stdout == ""


def tiny_task(tasks: Path) -> Path:
    """A task folder as the trial's are: the same first cell, one ask, a file to read, data
    made by prepare.py, and an expected.md that must not reach the model's folder."""
    task = tasks / "01-tiny"
    task.mkdir(parents=True)
    setup = nbformat.read(TRIAL / "tasks" / "01-sales-chart" / "task.ipynb", as_version=4).cells[0].source
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(setup),
        nbformat.v4.new_code_cell("%%agent\nWhat do notes.txt and made.txt say?"),
    ]
    nbformat.write(nb, task / "task.ipynb")
    (task / "notes.txt").write_text("the meeting moved to Tuesday\n")
    (task / "prepare.py").write_text("from pathlib import Path\nPath('made.txt').write_text('made by prepare.py')\n")
    (task / "expected.md").write_text("the answer names Tuesday\n")
    return task


@pytest.mark.kernel
def test_run_trial_runs_a_task_notebook_and_summarise_counts_its_requests(tmp_path: Path) -> None:
    tiny_task(tmp_path / "tasks")
    out = tmp_path / "run"
    requests = out / "requests" / "01-tiny"
    answers = [
        {
            "content": "Reading both.",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "notes.txt"}},
                {"name": "read_file", "arguments": {"path": "missing.txt"}},
                {"name": "read_file", "arguments": {"path": "made.txt"}},
            ],
        },
        {"content": "The meeting moved to **Tuesday**; made.txt was made by prepare.py."},
    ]
    command = [
        sys.executable, str(TRIAL / "run_trial.py"), "--out", str(out), "--tasks-dir", str(tmp_path / "tasks"),
        "--answer-timeout", "60", "--cell-timeout", "300",
    ]  # fmt: skip
    with answering(requests, answers):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

    results = out / "results" / "01-tiny"
    assert "The meeting moved to **Tuesday**" in (results / "outputs.txt").read_text()
    assert json.loads((results / "run.json").read_text())["ended"] == "completed"
    kept = results / "workdir"
    assert (kept / "made.txt").exists() and not (kept / "expected.md").exists() and not (kept / "prepare.py").exists()
    assert sorted(p.name for p in requests.glob("req-*.json")) == ["req-0001.json", "req-0002.json"]
    assert (requests / "FINISHED").read_text().startswith("completed")
    readable = (requests / "req-0002.txt").read_text()
    assert (
        readable.startswith("# req-0002 · C1, its request 2 · main agent: ")
        and "Continues C1 after req-0001." in readable
    )
    assert "## Messages [1]–[1]: as in req-0001\n## New messages\n--- [2] assistant\nReading both." in readable
    assert readable.count(" (read_file)\n") == 3
    second = json.loads((requests / "req-0002.json").read_bytes())
    results_read = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert "the meeting moved to Tuesday" in results_read[0] and results_read[1].startswith("error:")

    summary = subprocess.run(
        [sys.executable, str(TRIAL / "summarise.py"), str(out), "--json"], capture_output=True, text=True, check=True
    )
    task, total = json.loads(summary.stdout)
    sizes = [len((requests / f"req-000{n}.json").read_bytes()) for n in (1, 2)]
    first = json.loads((requests / "req-0001.json").read_bytes())
    tools_bytes = len(json.dumps(first["tools"], ensure_ascii=False, separators=(",", ":")).encode())
    system_bytes = len(first["messages"][0]["content"].encode())
    per_request = [
        {
            "n": n,
            "conversation": "C1",
            "role": "main agent",
            "bytes": sizes[n - 1],
            "tools_bytes": tools_bytes,
            "tools": len(first["tools"]),
            "system_bytes": system_bytes,
        }
        for n in (1, 2)
    ]
    assert task == {
        "task": "01-tiny",
        "verdict": "",
        "requests": 2,
        "unanswered": {},
        "refused": 0,
        "conversations": 1,
        "main_turns": 2,
        "sub_turns": 0,
        "tool_calls": {"read_file": 3},
        "tool_errors": {"read_file": 1},
        "first_bytes": sizes[0],
        "max_bytes": max(sizes),
        "total_bytes": sum(sizes),
        "first_tools_bytes": tools_bytes,
        "max_tools_bytes": tools_bytes,
        "first_system_bytes": system_bytes,
        "max_system_bytes": system_bytes,
        "per_request": per_request,
    }
    assert total["task"] == "**all**" and total["requests"] == 2 and total["tool_errors"] == {"read_file": 1}
    table = subprocess.run(
        [sys.executable, str(TRIAL / "summarise.py"), str(out)], capture_output=True, text=True, check=True
    )
    assert f"| 01-tiny | – | 2 | 0 | 0 | 1 | 2/0 | 3 | 1 | {sizes[0]:,} |" in table.stdout
    command = [sys.executable, str(TRIAL / "summarise.py"), str(out), "--requests"]
    listed = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = f"| req-0002 | C1 | main agent | {sizes[1]:,} | {tools_bytes:,} | {len(first['tools'])} | {system_bytes:,} |"
    assert f"| 01-tiny {line}" in listed


def load_person_module() -> Any:
    """benchmarks/model_trial/person.py, imported from its file (the trial is no package)."""
    spec = importlib.util.spec_from_file_location("trial_person", TRIAL / "person.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_person_yaml_says_what_the_person_clicks_in_turn_and_a_mistake_names_the_entry(tmp_path: Path) -> None:
    person = load_person_module()
    for task in sorted((TRIAL / "tasks").glob("*/person.yaml")):
        person.Person.load(task)  # the trial's own tasks load
    given = tmp_path / "person.yaml"
    given.write_text(
        'approvals: {"*": approve, bash: "deny: no shell"}\n'
        'edits: ["reject: keep my names", accept_and_run]\n'
        'questions: [{choose: Sales, else: sales_eur}, {option: 2}, {option: 3}, {option: 3, else: "the last"}, typed]\n'
        "not_run: [cell-4]\n"
    )
    p = person.Person.load(given)
    assert p.approval("bash", "Approve bash?") == ("deny", "no shell")
    assert p.approval("run_python", "Approve run_python?") == ("approve", "")
    assert p.edit({"index": 2}) == ("rejected", "keep my names")
    assert [p.edit({"index": 2}) for _ in range(2)] == [("accepted_and_run", "")] * 2  # the last repeats
    clicks = [p.answer("Which?", ["visitors", "sales_eur"]) for _ in range(4)]
    assert [(c.label, c.text) for c in clicks] == [("sales_eur", ""), ("sales_eur", ""), ("", ""), ("", "the last")]
    assert "offers 2: left waiting" in clicks[2].why
    assert p.answer("Which?", ["a"]).text == "typed" and p.not_run == {"cell-4"}
    assert p.log[0] == {
        "card": "approval",
        "tool": "bash",
        "shown": "Approve bash?",
        "decision": "deny",
        "reason": "no shell",
    }
    assert person.Person.load(tmp_path / "none.yaml").edit({}) == ("accepted", "")  # the default person

    for text, said in [
        ("edits: [maybe]\n", "edits[0]: 'maybe'; write one of accept, accept_and_run, reject"),
        ("questions: [{option: 0}]\n", "questions[0]: option must be a number from 1"),
        ("approvals: {bash: allow}\n", "approvals[bash]: 'allow'; write one of approve, deny"),
        ("clicks: []\n", "its keys are approvals, edits, questions and not_run"),
        ("not_run: [3]\n", "not_run lists cell ids"),
    ]:
        given.write_text(text)
        with pytest.raises(person.PersonFileError) as refused:
            person.Person.load(given)
        assert said in str(refused.value)


def page_task(tasks: Path) -> Path:
    """A task for a page: a cell that fails, %fix, a cell the person leaves unrun, an ask,
    and a person.yaml that must not reach the model's folder."""
    task = tasks / "01-page"
    task.mkdir(parents=True)
    setup = nbformat.read(TRIAL / "tasks" / "11-edit-failing-cell" / "task.ipynb", as_version=4).cells[0].source
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(setup),
        nbformat.v4.new_code_cell("prices = {'tea': 3}\nprices['coffee']"),
        nbformat.v4.new_code_cell("%fix"),
        nbformat.v4.new_markdown_cell("## Next: the report"),
        nbformat.v4.new_code_cell("raise SystemExit('the person never runs this cell')"),
        nbformat.v4.new_code_cell("%%agent\nask me things"),
    ]
    for n, cell in enumerate(nb.cells):
        cell.id = f"cell-{n}"
    nbformat.write(nb, task / "task.ipynb")
    (task / "person.yaml").write_text(
        'approvals: {"*": approve, run_python: "deny: not in my kernel"}\n'
        'edits: ["reject: tea is the only key", accept_and_run]\n'
        'questions: [{choose: two}, "a typed answer"]\n'
        "not_run: [cell-4]\n"
    )
    return task


@pytest.mark.kernel
def test_run_trial_plays_a_page_with_the_extension_and_its_person_clicks_the_cards(tmp_path: Path) -> None:
    """A task with a person.yaml runs from a page: the model is offered the notebook tools
    and ask_person; the person rejects an edit with a reason, accepts and runs the next,
    clicks an option, types an answer and denies a call with a reason, and the model reads
    each; the saved notebook is the page's, the skipped cell unrun."""
    page_task(tmp_path / "tasks")
    out = tmp_path / "run"
    requests = out / "requests" / "01-page"
    answers = [
        {"content": "Looking.", "tool_calls": [{"name": "notebook_read", "arguments": {}}]},
        {"tool_calls": [{"name": "notebook_edit", "arguments": {"cell": 1, "new_source": "prices = {'tea': 3}\nprices['coffee'] = 4", "explanation": "add it"}}]},
        {"tool_calls": [{"name": "notebook_edit", "arguments": {"cell": 1, "new_source": "prices = {'tea': 3}\nprices['tea']", "explanation": "the key is tea"}}]},
        {"content": "Fixed: the key is tea."},
        {"tool_calls": [{"name": "ask_person", "arguments": {"question": "Which one?", "options": ["one", "two"]}}]},
        {"tool_calls": [{"name": "ask_person", "arguments": {"question": "And your name?"}}]},
        {"tool_calls": [{"name": "run_python", "arguments": {"code": "6 * 7"}}]},
        {"content": "Done."},
    ]  # fmt: skip
    command = [
        sys.executable, str(TRIAL / "run_trial.py"), "--out", str(out), "--tasks-dir", str(tmp_path / "tasks"),
        "--answer-timeout", "60", "--cell-timeout", "300",
    ]  # fmt: skip
    with answering(requests, answers):
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

    first = json.loads((requests / "req-0001.json").read_bytes())
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"notebook_read", "notebook_edit", "notebook_insert", "notebook_run", "ask_person"} <= offered
    assert "propose_cell" not in offered
    last = json.loads((requests / f"req-{len(answers):04d}.json").read_bytes())
    said = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert "tea is the only key" in said[1] and "the person accepted and ran cell 1" in said[2] and "3" in said[2]
    assert said[3:5] == ['The person answered: "two"', 'The person answered: "a typed answer"']
    assert "not in my kernel" in said[5]

    results = out / "results" / "01-page"
    record = json.loads((results / "run.json").read_text())
    assert record["ended"] == "completed" and record["frontend"] is True
    assert [(e["card"], e.get("decision") or e.get("clicked") or e.get("typed")) for e in record["person"]] == [
        ("edit", "rejected"),
        ("edit", "accepted_and_run"),
        ("question", "two"),
        ("question", "a typed answer"),
        ("approval", "deny"),
    ]
    saved = nbformat.read(results / "task.ipynb", as_version=4)
    assert saved.cells[1].source == "prices = {'tea': 3}\nprices['tea']"
    assert saved.cells[1].outputs[-1]["data"]["text/plain"] == "3"  # the person's accept and run
    assert saved.cells[4].execution_count is None and not saved.cells[4].outputs  # left unrun
    assert "Done." in (results / "outputs.txt").read_text()
    assert not (results / "workdir" / "person.yaml").exists()
