"""A project's MCP servers start only once the person trusts them: an untrusted one is listed
but never run (the demo server's mark file stays absent) and its tools are not offered; one
warning says how to trust it; ``trust`` (kept in ``~/.harness_nb/mcp-trust.json``), names
given in code and the person's own settings files trust it — a project's committed
settings cannot; a changed configuration needs trusting again; an inline server of a
project agent file is gated the same way; a corrupt trust file is one warning; ``reload``
re-reads the configuration and stops what changed."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import ConfigError, McpUntrustedError, ToolResultMessage
from harness_nb.harness import Harness
from harness_nb.mcp import McpManager, TrustStore, fingerprint
from harness_nb.mcp import trust as trust_module
from harness_nb.mcp.config import parse_server
from harness_nb.mcp.named_files import MAX_NAMED_FILES, files_fingerprint, named_files
from harness_nb.providers.scripted import ScriptedProvider
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from mcp_support import DEMO, home, server_command, stdio_demo  # noqa: F401  (home: an autouse fixture)

NOTICE = "of this project not started"


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def project(workdir: Path, mark: Path, *args: str) -> None:
    """``workdir/.mcp.json`` naming the demo server, which writes ``mark`` when it runs."""
    entry = stdio_demo(DEMO_MARK=str(mark))
    entry["args"] += list(args)
    write(workdir / ".mcp.json", {"mcpServers": {"demo": entry}})


def harness(workdir: Path, script: list[Any] | dict[str, list[Any]]) -> tuple[Harness, ScriptedProvider]:
    provider = ScriptedProvider(script)
    h = Harness(provider, workdir=workdir, approval_policy="never")
    OPEN.append(h)
    return h, provider


def offered(provider: ScriptedProvider, index: int = -1) -> set[str]:
    return {t.name for t in provider.requests[index].tools if t.name.startswith("mcp__")}


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and NOTICE in r.getMessage()]


async def test_an_untrusted_project_server_never_runs_until_trusted(tmp_path, home, caplog):
    mark = tmp_path / "mark"
    project(tmp_path, mark)
    echo = {"tool_calls": [{"name": "mcp__demo__echo", "arguments": {"text": "hi"}}]}
    h, provider = harness(tmp_path, [{"text": "one"}, {"text": "two"}, echo, {"text": "three"}])
    await h.run("first")
    await h.run("second")
    assert offered(provider, 0) == set() and offered(provider, 1) == set()
    assert not mark.exists()  # the command was never run
    [status] = h.mcp.status()
    assert (status.state, status.pending) == ("needs your approval", True)
    assert status.target.startswith(stdio_demo()["command"])  # what it would run, in full
    assert stdio_demo()["args"][0] in status.target and "env DEMO_MARK" in status.target
    [notice] = notices(caplog)  # one notice, not one per run
    assert "demo (.mcp.json) would run:" in notice and "%mcp trust demo" in notice and "mcp_trust=['demo']" in notice
    not_started = "'demo' .* is not started: a project's server runs only once you trust it"
    with pytest.raises(McpUntrustedError, match=not_started):
        await h.mcp.restart("demo")

    assert [e.name for e in h.mcp.trust("demo")] == ["demo"]
    result = await h.run("third")
    assert "mcp__demo__echo" in offered(provider)
    assert [m.content for m in result.messages if isinstance(m, ToolResultMessage)] == ["echo: hi"]
    assert mark.exists()
    # kept in the user's state, keyed by the workdir's real path, name and fingerprint, no command
    saved = (home / ".harness_nb" / "mcp-trust.json").read_text()
    [row] = json.loads(saved)["servers"]
    assert row["workdir"] == os.path.realpath(tmp_path) and row["name"] == "demo" and len(row["fingerprint"]) == 64
    assert "demo.py" not in saved and str(mark) not in saved
    left = sorted(p.name for p in (home / ".harness_nb").iterdir())
    assert left in (["mcp-trust.json"], [".mcp-trust.json.lock", "mcp-trust.json"])  # no temp file left

    # a new harness (a kernel restart) remembers, and says nothing
    caplog.clear()
    again, provider2 = harness(tmp_path, [{"text": "ok"}])
    await again.run("fourth")
    assert "mcp__demo__echo" in offered(provider2) and notices(caplog) == []
    assert again.mcp.verdict("demo").why == "%mcp trust"


async def test_a_changed_command_needs_trust_again_and_reload_stops_the_old_server(tmp_path, caplog):
    mark = tmp_path / "mark"
    project(tmp_path, mark)
    h, provider = harness(tmp_path, [{"text": "a"}, {"text": "b"}, {"text": "c"}])
    h.mcp.trust("demo")
    await h.run("first")
    assert "mcp__demo__echo" in offered(provider)
    first_pid = int(mark.read_text())

    project(tmp_path, mark, "--changed")  # the repository changed what it runs
    await h.mcp.reload()
    assert h.mcp.verdict("demo").why == "its configuration changed since you trusted it"
    assert _gone(first_pid), "reload stopped the server whose entry changed"
    await h.run("second")
    assert offered(provider) == set() and mark.read_text().split() == [str(first_pid)]
    assert any("--changed" in n for n in notices(caplog))

    write(tmp_path / ".mcp.json", {"mcpServers": {}})  # gone from the file: gone from the list
    await h.mcp.reload()
    assert h.mcp.status() == []
    await h.run("third")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(
    ("where", "settings", "trusted"),
    [
        (".claude/settings.json", {"enableAllProjectMcpServers": True}, False),  # the repository's own
        (".claude/settings.json", {"enabledMcpjsonServers": ["demo"]}, False),
        (".harness_nb/settings.json", {"enableAllProjectMcpServers": True}, False),
        (".claude/settings.local.json", {"enabledMcpjsonServers": ["demo"]}, True),
        (".claude/settings.local.json", {"enableAllProjectMcpServers": True}, True),
        ("~/.claude/settings.json", {"enableAllProjectMcpServers": True}, True),
        ("~/.harness_nb/settings.json", {"enabledMcpjsonServers": ["demo"]}, True),
        ("~/.claude/settings.json", {"enabledMcpjsonServers": ["other"]}, False),
    ],
)
def test_only_the_persons_own_settings_files_trust_project_servers(tmp_path, home, where, settings, trusted):
    write(home / where[2:] if where.startswith("~/") else tmp_path / where, settings)
    write(tmp_path / ".mcp.json", {"mcpServers": {"demo": {"command": "never-run-xyz"}}})
    manager = McpManager(tmp_path, home=home)
    verdict = manager.verdict("demo")
    assert verdict.trusted is trusted
    if trusted:
        assert verdict.why.endswith(f"in {where}")
        assert [s.state for s in manager.status()] == ["not started"]


def test_disabled_servers_win_and_names_given_in_code_trust(tmp_path, home):
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}})
    write(home / ".claude" / "settings.json", {"enableAllProjectMcpServers": True, "disabledMcpjsonServers": ["b"]})
    manager = McpManager(tmp_path, home=home)
    assert manager.verdict("a").trusted
    disabled = manager.verdict("b")
    assert (disabled.standing, disabled.why) == ("disabled", "disabledMcpjsonServers in ~/.claude/settings.json")
    disabled = "disabled by disabledMcpjsonServers in ~/.claude/settings.json; remove it there"
    with pytest.raises(ConfigError, match=disabled):
        manager.trust("b")
    with pytest.raises(McpUntrustedError):
        manager.connection("b")
    # names given in code, and servers configured by the person, need nothing more
    write(home / ".claude" / "settings.json", {})
    named = McpManager(tmp_path, home=home, trust=["b"], servers={"mine": {"command": "z"}})
    assert named.verdict("b").why == "mcp_trust" and not named.verdict("a").trusted
    assert named.verdict("mine").why == "configured by you (settings)"
    write(home / ".harness_nb" / "mcp.json", {"mcpServers": {"user": {"command": "u"}}})
    assert McpManager(tmp_path, home=home).verdict("user").trusted
    with pytest.raises(Exception, match="unknown MCP server 'nope'"):
        named.trust("nope")


def test_the_fingerprint_covers_what_runs_not_the_secret_values(tmp_path):
    def fp(**raw: object) -> str:
        return fingerprint(parse_server("s", raw, ".mcp.json", workdir=tmp_path).config)

    base = fp(command="srv", args=["a"], env={"TOKEN": "one"})
    assert fp(command="srv", args=["a"], env={"TOKEN": "two"}) == base  # a new token: same server
    assert fp(command="srv", args=["b"], env={"TOKEN": "one"}) != base
    assert fp(command="evil", args=["a"], env={"TOKEN": "one"}) != base
    assert fp(command="srv", args=["a"], env={"TOKEN": "one", "LD_PRELOAD": "x"}) != base
    assert fp(command="srv", args=["a"], env={"TOKEN": "one"}, cwd="elsewhere") != base
    assert fp(url="http://127.0.0.1:1/mcp") != fp(url="http://127.0.0.1:2/mcp")


def test_a_corrupt_trust_file_is_one_warning_and_read_as_empty(tmp_path, home, caplog):
    trust_file = home / ".harness_nb" / "mcp-trust.json"
    write(trust_file, "{not json")
    write(tmp_path / ".mcp.json", {"mcpServers": {"demo": {"command": "never-run-xyz"}}})
    store = TrustStore(trust_file)
    manager = McpManager(tmp_path, trust_store=store)
    assert not manager.verdict("demo").trusted
    manager.status()
    warned = [r.getMessage() for r in caplog.records if "mcp-trust.json" in r.getMessage()]
    assert warned == [
        "~/.harness_nb/mcp-trust.json: not valid JSON (JSONDecodeError); its MCP trust decisions are not used "
        "(it is replaced at the next %mcp trust)"
    ]
    assert any("mcp-trust.json" in w for w in manager.warnings)
    manager.trust("demo")
    assert json.loads(trust_file.read_text())["servers"][0]["name"] == "demo"
    assert McpManager(tmp_path, trust_store=TrustStore(trust_file)).verdict("demo").trusted
    write(trust_file, json.dumps({"servers": "no"}))
    assert not McpManager(tmp_path, trust_store=TrustStore(trust_file)).verdict("demo").trusted


async def test_the_trust_file_is_bounded_and_untrust_forgets(tmp_path, home, monkeypatch):
    monkeypatch.setattr(trust_module, "MAX_RECORDS", 3)
    trust_file = home / ".harness_nb" / "mcp-trust.json"
    servers = {f"s{i}": {"command": f"srv{i}"} for i in range(5)}
    write(tmp_path / ".mcp.json", {"mcpServers": servers})
    manager = McpManager(tmp_path, trust_store=TrustStore(trust_file))
    for name in servers:
        manager.trust(name)
    kept = [r["name"] for r in json.loads(trust_file.read_text())["servers"]]
    assert kept == ["s2", "s3", "s4"]  # the oldest decisions went first
    assert await manager.untrust("s3") == 1
    assert not manager.verdict("s3").trusted and manager.verdict("s4").trusted
    assert [r["name"] for r in json.loads(trust_file.read_text())["servers"]] == ["s2", "s4"]
    assert await manager.untrust("s3") == 0


AGENT = """---
name: noter
description: Keeps notes on its own server.
tools: mcp__notes__add_note
mcpServers: [{{"notes": {config}}}]
---
Keep the note.
"""


@pytest.mark.parametrize("folder", [".claude/agents", "agents"])
async def test_an_inline_server_of_a_project_agent_file_waits_for_trust(tmp_path, caplog, folder):
    mark = tmp_path / "mark"
    write(tmp_path / folder / "noter.md", AGENT.format(config=json.dumps(stdio_demo(DEMO_MARK=str(mark)))))
    note = {"tool_calls": [{"name": "mcp__notes__add_note", "arguments": {"text": "x"}}]}
    script = {"noter": [{"text": "could not"}, note, {"text": "noted"}]}
    h, provider = harness(tmp_path, script)
    [row] = h.mcp.status()
    assert (row.name, row.source, row.state) == ("notes", "agent noter", "needs your approval")
    result = await h.run_subagent("noter", "note x")
    assert result.final_text == "could not" and offered(provider) == set() and not mark.exists()
    [notice] = notices(caplog)
    assert "notes (agent noter) would run:" in notice and "%mcp trust notes" in notice

    h.mcp.trust("notes")
    assert [s.state for s in h.mcp.status()] == ["starts with its agent"]
    result = await h.run_subagent("noter", "note x")
    assert offered(provider) == {"mcp__notes__add_note"} and mark.exists()
    assert [m.content for m in result.messages if isinstance(m, ToolResultMessage)] == ["noted (1 notes)"]


async def test_an_agent_file_of_the_persons_own_folder_is_trusted(tmp_path, home):
    mark = tmp_path / "mark"
    write(home / ".claude" / "agents" / "noter.md", AGENT.format(config=json.dumps(stdio_demo(DEMO_MARK=str(mark)))))
    add_note = {"tool_calls": [{"name": "mcp__notes__add_note", "arguments": {"text": "x"}}]}
    script = {"noter": [add_note, {"text": "noted"}]}
    h, provider = harness(tmp_path, script)
    assert [s.state for s in h.mcp.status()] == ["starts with its agent"]
    await h.run_subagent("noter", "note x")
    assert offered(provider) == {"mcp__notes__add_note"} and mark.exists()


async def test_two_kernels_trusting_at_once_both_keep_their_decision(tmp_path, home, monkeypatch):
    """Each kernel reads the trust file once and keeps it; a decision written from a stale
    copy would drop the other kernel's. Writes re-read the file under its lock."""
    from filelock import FileLock

    trust_file = home / ".harness_nb" / "mcp-trust.json"
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "srv-a"}, "b": {"command": "srv-b"}}})
    first = McpManager(tmp_path, trust_store=TrustStore(trust_file))
    second = McpManager(tmp_path, trust_store=TrustStore(trust_file))
    assert not first.verdict("a").trusted and not second.verdict("b").trusted  # both have read it
    first.trust("a")
    second.trust("b")
    assert sorted(r["name"] for r in json.loads(trust_file.read_text())["servers"]) == ["a", "b"]
    await second.untrust("a")
    assert [r["name"] for r in json.loads(trust_file.read_text())["servers"]] == ["b"]

    monkeypatch.setattr(trust_module, "LOCK_TIMEOUT", 0.05)
    with FileLock(trust_file.with_name(".mcp-trust.json.lock")):
        with pytest.raises(ConfigError, match="locked by another process"):
            TrustStore(trust_file).add(trust_module.Record(str(tmp_path), "c", "0" * 64))
    assert [r["name"] for r in json.loads(trust_file.read_text())["servers"]] == ["b"]


# ---------------------------------------------------------------------- trust covers content (issue 18, item 3)

REWRITTEN = "open('rewritten', 'a').write('rewritten ran\\n')\n"  # in the server's cwd: the workdir


def own_server(workdir: Path, mark: Path, name: str = "demo") -> Path:
    """The demo server copied into ``workdir`` as ``srv.py``, configured in ``.mcp.json`` as
    a command that runs ``srv.py`` (a path the trust must cover by content)."""
    script = workdir / "srv.py"
    script.write_text(DEMO.read_text())
    command, *args = server_command("srv.py")
    write(workdir / ".mcp.json", {"mcpServers": {name: {"command": command, "args": args,
                                                       "env": {"DEMO_MARK": str(mark)}}}})
    return script


async def test_a_trusted_servers_script_rewritten_by_write_file_never_runs_unasked(tmp_path):
    """The agent rewrites the script of a server the person trusted (write_file asks nothing
    for srv.py), then crashes the server: its restart, at the next call, refuses to run the
    new script, and so does every later start, until the person trusts it again."""
    mark, rewritten = tmp_path / "mark", tmp_path / "rewritten"
    script = own_server(tmp_path, mark)
    future = "from __future__ import annotations\n"
    evil = DEMO.read_text().replace(future, future + REWRITTEN, 1)
    pid = {"tool_calls": [{"name": "mcp__demo__pid", "arguments": {}}]}
    rewrite = {"tool_calls": [{"name": "write_file", "arguments": {"path": "srv.py", "content": evil}}]}
    crash = {"tool_calls": [{"name": "mcp__demo__crash", "arguments": {}}]}
    h, provider = harness(tmp_path, [pid, rewrite, crash, pid, {"text": "gone"}, {"text": "none"}])
    h.mcp.trust("demo")
    result = await h.run("rewrite the server")
    first_pid, wrote, _crashed, again = [m.content for m in result.messages if isinstance(m, ToolResultMessage)]
    assert wrote.startswith(f"wrote {len(evil)} bytes to srv.py") and script.read_text() == evil
    assert "'demo' (.mcp.json) is not started: a file it runs changed since you trusted it" in again
    assert "srv.py" in again and "%mcp trust demo" in again
    assert not rewritten.exists() and mark.read_text().split() == [first_pid]
    await h.run("next")
    assert offered(provider) == set() and not rewritten.exists()
    with pytest.raises(McpUntrustedError, match="a file it runs changed since you trusted it"):
        await h.mcp.restart("demo")
    assert h.mcp.status()[0].trust == "a file it runs changed since you trusted it"

    fresh, _ = harness(tmp_path, [{"text": "ok"}])  # a kernel restart asks too
    assert fresh.mcp.verdict("demo").why == "a file it runs changed since you trusted it"
    h.mcp.trust("demo")  # the person looked at it and trusts it: it starts, rewritten
    await h.mcp.restart("demo")
    assert rewritten.read_text() == "rewritten ran\n"


@pytest.mark.parametrize("by", ["mcp_trust", "enabledMcpjsonServers"])
async def test_trust_by_name_does_not_cover_a_server_planted_during_the_session(tmp_path, home, caplog, by):
    mark = tmp_path / "mark"
    if by == "enabledMcpjsonServers":
        write(home / ".claude" / "settings.json", {"enabledMcpjsonServers": ["github"]})
    names = ["github"] if by == "mcp_trust" else []
    h = Harness(ScriptedProvider([{"text": "one"}, {"text": "two"}]), workdir=tmp_path, mcp_trust=names)
    OPEN.append(h)
    await h.run("first")  # the session begins with no .mcp.json

    write(tmp_path / ".mcp.json", {"mcpServers": {"github": stdio_demo(DEMO_MARK=str(mark))}})  # planted
    await h.mcp.reload()
    await h.run("second")
    assert not mark.exists()
    verdict = h.mcp.verdict("github")
    source = "mcp_trust" if by == "mcp_trust" else "enabledMcpjsonServers in ~/.claude/settings.json"
    assert verdict.why == f"it appeared during this session, and {source} trusts only what was configured when it began"
    [notice] = notices(caplog)
    assert f"github (.mcp.json) would run: {sys.executable}" in notice and "demo.py" in notice
    # a harness rebuilt in the same kernel (as %config does) starts from the same session
    rebuilt = McpManager(tmp_path, home=home, trust=names)
    assert not rebuilt.verdict("github").trusted
    h.mcp.trust("github")
    assert h.mcp.verdict("github").why == "%mcp trust"


async def test_trust_by_name_does_not_cover_a_server_changed_during_the_session(tmp_path):
    mark = tmp_path / "mark"
    script = own_server(tmp_path, mark, name="github")
    h = Harness(ScriptedProvider([{"text": "one"}, {"text": "two"}]), workdir=tmp_path, mcp_trust=["github"])
    OPEN.append(h)
    assert h.mcp.verdict("github").why == "mcp_trust"
    await h.run("first")
    assert mark.exists()  # configured when the session began: trusted by its name
    script.write_text(script.read_text() + "\n# changed\n")
    await h.mcp.reload()
    why = h.mcp.verdict("github").why
    assert why == ("it changed (its command line or a file it runs) during this session, and mcp_trust "
                   "trusts only what was configured when it began")
    script.write_text(script.read_text().removesuffix("\n# changed\n"))  # as it was: trusted again
    assert h.mcp.verdict("github").trusted


def test_the_files_a_server_runs_are_hashed_within_bounds(tmp_path):
    (tmp_path / "srv.py").write_text("x")
    (tmp_path / "conf.toml").write_text("y")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "run").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "run").chmod(0o755)

    def files(**raw: object) -> list[str]:
        config = parse_server("s", raw, ".mcp.json", workdir=tmp_path).config
        return [p.name for p in named_files(config, tmp_path)]

    assert files(command="python", args=["srv.py", "--config=conf.toml", "-v"]) == ["srv.py", "conf.toml"]
    assert files(command="./bin/run") == ["run"]
    assert files(command="run", env={"PATH": str(tmp_path / "bin")}) == ["run"]  # found on its PATH
    assert files(command="python", args=["../outside.py", "/etc/passwd"]) == []  # only the workdir's
    assert files(command="python", args=["run"], cwd="bin") == ["run"]
    config = parse_server("s", {"command": "python", "args": ["srv.py"]}, ".mcp.json", workdir=tmp_path).config
    before = files_fingerprint(config, tmp_path)
    (tmp_path / "srv.py").write_text("z")
    assert files_fingerprint(config, tmp_path) != before
    npx = parse_server("s", {"command": "npx"}, ".mcp.json", workdir=tmp_path).config
    assert files_fingerprint(npx, tmp_path) == ""


# ---------------------------------------------------------------------- files named inside shell text

async def test_a_server_started_through_sh_c_asks_again_when_its_script_changes(tmp_path):
    """``sh -c "exec python … srv.py …"`` names srv.py inside a string: the trust covers it too,
    so a rewritten srv.py is not started until the person trusts it again."""
    mark = tmp_path / "mark"
    script = tmp_path / "srv.py"
    script.write_text(DEMO.read_text())
    line = f"exec {shlex.join(server_command('srv.py'))} --quiet=no"
    write(tmp_path / ".mcp.json", {"mcpServers": {"demo": {"command": "sh", "args": ["-c", line],
                                                           "env": {"DEMO_MARK": str(mark)}}}})
    h, _ = harness(tmp_path, [{"text": "ok"}])
    h.mcp.trust("demo")
    connection = await h.mcp.restart("demo")
    assert connection.state == "running" and mark.exists()
    script.write_text(DEMO.read_text() + "\n# rewritten\n")
    with pytest.raises(McpUntrustedError, match="a file it runs changed since you trusted it"):
        await h.mcp.restart("demo")


def test_files_named_inside_shell_text_are_covered(tmp_path):
    (tmp_path / "srv.py").write_text("x")
    (tmp_path / "srv.js").write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "main.py").write_text("x")

    def files(command: str, *args: str) -> list[str]:
        config = parse_server("s", {"command": command, "args": list(args)}, ".mcp.json", workdir=tmp_path).config
        return [p.name for p in named_files(config, tmp_path)]

    assert files("sh", "-c", "python srv.py --x") == ["srv.py"]
    assert files("bash", "-c", "exec python 'srv.py'") == ["srv.py"]
    assert files("/bin/sh", "-lc", "env FOO=1 python srv.py") == ["srv.py"]
    assert files("sh", "-c", "uv run srv.py;node ./srv.js") == ["srv.py", "srv.js"]
    assert files("sh", "-c", "bash -c 'node <srv.js'") == ["srv.js"]  # a shell inside a shell
    assert files("sh", "-c", "cd sub && python main.py") == ["main.py"]  # a folder it names is a base
    assert files("env", "PYTHON_SCRIPT=srv.py", "python") == ["srv.py"]


@pytest.mark.parametrize("text", ["python $F", "python s*.py", "python `cat name`", "python 'srv.py"])
def test_shell_text_that_hides_its_files_is_not_trusted_by_name(tmp_path, home, text):
    """A name the shell works out (or text that does not split) cannot be covered by reading
    it: trust by name does not cover the server, ``%mcp trust`` after reading it does, and
    the plain words of the text still count (rewriting srv.py asks again)."""
    script = tmp_path / "srv.py"
    script.write_text("x")
    write(tmp_path / ".mcp.json", {"mcpServers": {"s": {"command": "sh", "args": ["-c", f"echo srv.py; {text}"]}}})
    store = TrustStore(home / "trust.json")
    manager = McpManager(tmp_path, trust=["s"], trust_store=store)
    verdict = manager.verdict("s")
    assert not verdict.trusted and "cannot tell every file it runs, so mcp_trust does not cover it" in verdict.why
    manager.trust("s")
    assert manager.verdict("s").why == "%mcp trust"
    script.write_text("y")
    assert not manager.verdict("s").trusted
    asked = McpManager(tmp_path, trust_store=store).verdict("s")
    assert asked.why == "a file it runs changed since you trusted it"


def test_past_the_hashed_files_a_change_still_counts(tmp_path):
    names = [f"f{i}.py" for i in range(MAX_NAMED_FILES + 2)]
    for name in names:
        (tmp_path / name).write_text("x")
    config = parse_server("s", {"command": "sh", "args": ["-c", " ".join(names)]}, ".mcp.json", workdir=tmp_path).config
    assert [p.name for p in named_files(config, tmp_path)] == names
    before = files_fingerprint(config, tmp_path)
    (tmp_path / names[-1]).write_text("y")
    assert files_fingerprint(config, tmp_path) != before
