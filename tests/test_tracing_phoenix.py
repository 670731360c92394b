"""Tracing end to end: a traced run in a fresh process sends its spans over OTLP/HTTP to a real
receiver, Arize Phoenix (started here from ``.venv-phoenix``, which ``.ci/setup`` installs),
and Phoenix shows them as one trace: the tree the run made, read back from its REST API,
the GenAI conventions understood (its own span kinds AGENT, LLM and TOOL, the conversation
as its session), and its trace page photographed in headless Chromium
(``test-artifacts/tracing/phoenix-trace.png``).

In the browser tier: it drives Chromium, and Phoenix takes tens of seconds to start."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_support import CHROME_ARGS, CHROMIUM, needs_chromium
from sandbox_support import cannot
from tracing_support import ROOT, run_in_fresh_process

pytestmark = [pytest.mark.browser, needs_chromium]

PHOENIX = ROOT / ".venv-phoenix" / "bin" / "python"
ARTIFACTS = ROOT / "test-artifacts" / "tracing"
START_TIMEOUT = 300  # seconds: its first start compiles what it imports, on a busy machine too

SCENARIO = """
import asyncio
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition

USAGE = {"input_tokens": 1200, "output_tokens": 80}
SCRIPT = {
    "main": [
        {"text": "Let me see the files.", "tool_calls": [{"name": "ls", "arguments": {"path": "."}}], "delay": 0.05},
        {"tool_calls": [{"name": "task", "arguments": {"subagent_type": "reader", "prompt": "Summarise sales.csv",
                                                      "description": "summarise sales"}}], "delay": 0.05},
        {"text": "sales.csv has 3 months; March sold best (30).", "delay": 0.05},
    ],
    "reader": [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "sales.csv"}}], "delay": 0.05},
        {"text": "3 rows: Jan 10, Feb 12, Mar 30.", "delay": 0.05},
    ],
}
for steps in SCRIPT.values():
    for step in steps:
        step["usage"] = USAGE

async def main():
    with open("sales.csv", "w") as f:
        f.write("month,sales\\nJan,10\\nFeb,12\\nMar,30\\n")
    model = ScriptedProvider(SCRIPT, model="gpt-4o-mini")
    prices = {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    async with Harness(model, workdir=".", include_user_agents=False, tracing="otel", tracing_content=True,
                       prices=prices) as h:
        h.registry.register(SubAgentDefinition(name="reader", description="Reads files.", system_prompt="You read.",
                                               tools=["read_file"]))
        cell = {"harness_nb.notebook.path": "sales.ipynb", "harness_nb.notebook.execution_count": 3}
        result = await h.run("What does sales.csv say?", trace_attributes=cell)
        print("SESSION", h.session.id, result.run_id)

asyncio.run(main())
"""

EXPECTED = [
    (
        "invoke_agent main",
        [
            ("chat gpt-4o-mini", []),
            ("execute_tool ls", []),
            ("chat gpt-4o-mini", []),
            (
                "execute_tool task",
                [("invoke_agent reader", [("chat gpt-4o-mini", []), ("execute_tool read_file", []), ("chat gpt-4o-mini", [])])],
            ),
            ("chat gpt-4o-mini", []),
        ],
    )
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server of this module's own on 127.0.0.1, with a fresh database, nothing
    fetched from outside; yields its base URL (its OTLP/HTTP endpoint too)."""
    if not PHOENIX.exists():
        cannot("Arize Phoenix is not installed: bash .ci/setup installs it into .venv-phoenix")
    work = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # its first start compiles for the next ones
    env.update(
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(_free_port()),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
    )
    log = (work / "phoenix.log").open("wb")
    process = subprocess.Popen(
        [str(PHOENIX), "-m", "phoenix.server.main", "serve"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"Phoenix exited ({process.returncode}):\n{(work / 'phoenix.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).close()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"Phoenix did not start in {START_TIMEOUT} s:\n{(work / 'phoenix.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def _spans(base: str, count: int, timeout: float = 60) -> list[dict[str, Any]]:
    """The default project's spans once ``count`` have arrived (Phoenix stores them a moment
    after it answers the export)."""
    deadline = time.monotonic() + timeout
    while True:
        found = _get(f"{base}/v1/projects/default/spans?limit=200")["data"]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def _tree(found: list[dict[str, Any]]) -> list[Any]:
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in found:
        children.setdefault(span.get("parent_id"), []).append(span)

    def level(parent: str | None) -> list[Any]:
        ordered = sorted(children.get(parent, []), key=lambda s: s["start_time"])
        return [(s["name"], level(s["context"]["span_id"])) for s in ordered]

    return level(None)


def test_a_traced_run_arrives_in_arize_phoenix_as_one_trace(tmp_path: Path, phoenix: str) -> None:
    done = run_in_fresh_process(tmp_path, SCENARIO, OTEL_EXPORTER_OTLP_ENDPOINT=phoenix, OTEL_SERVICE_NAME="sales-notebook")
    assert done.returncode == 0, done.stderr
    _, session, run_id = done.stdout.strip().splitlines()[-1].split()
    found = _spans(phoenix, 10)
    assert _tree(found) == EXPECTED
    assert len({s["context"]["trace_id"] for s in found}) == 1
    by_name = {s["name"]: s for s in found}
    root = by_name["invoke_agent main"]["attributes"]
    assert root["gen_ai.conversation.id"] == root["session.id"] == session  # Phoenix's sessions group conversations
    assert root["harness_nb.run.id"] == run_id
    assert root["harness_nb.notebook.path"] == "sales.ipynb"
    # Phoenix read the conventions: its own kinds and token counts come from the gen_ai.* attributes
    kinds = {s["name"].split()[0]: s["span_kind"] for s in found}
    assert kinds == {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL"}
    chat = by_name["chat gpt-4o-mini"]["attributes"]
    assert (chat["llm.token_count.prompt"], chat["llm.token_count.completion"]) == (1200, 80)
    assert chat["harness_nb.cost_usd"] == pytest.approx((1200 * 0.15 + 80 * 0.6) / 1e6)
    reader = by_name["execute_tool read_file"]["attributes"]
    assert "Mar,30" in reader["gen_ai.tool.call.result"]

    path = _photograph(phoenix, found[0]["context"]["trace_id"])
    assert path.stat().st_size > 20_000


def _photograph(base: str, trace_id: str) -> Path:
    """Phoenix's page of the trace, once its tree is drawn, saved under test-artifacts."""
    from playwright.sync_api import sync_playwright

    project = next(p["id"] for p in _get(f"{base}/v1/projects")["data"] if p["name"] == "default")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "phoenix-trace.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=CHROME_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{base}/projects/{project}/traces/{trace_id}")
            for name in ("invoke_agent main", "execute_tool task", "invoke_agent reader", "execute_tool read_file"):
                page.get_by_text(name, exact=True).first.wait_for(timeout=60_000)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(path))
        finally:
            browser.close()
    return path
