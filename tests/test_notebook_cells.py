"""What a notebook user meets around the runs, in a real ipykernel: ordinary code and other
magics keep working, unattended runs (nbclient, nbval) decide approvals at once, ``%agents``
and agent files, the two ways to set the model, and clear errors for mistakes. Plus a
terminal IPython, where the same run prints text instead of widgets."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from notebook_support import (
    CONTROLLER,
    HARNESS,
    error_name,
    fresh_harness,
    help_pages,
    kernel_json,
    model_requests,
    notebook,
    result_text,
    tool_results,
    wait_for_widget_text,
    write_script,
)

pytestmark = pytest.mark.kernel
# the tests taking the shared kernel run on its loop, the module's (the others are not async)
on_the_kernels_loop = pytest.mark.asyncio(loop_scope="module")


RM_BUILD = {"name": "bash", "arguments": {"command": "rm -rf build"}}


@on_the_kernels_loop
async def test_ordinary_code_and_other_magics_are_unaffected(kernel, tmp_path):
    """Loading harness_nb changes nothing for code that is not ours: ``%timeit``,
    ``%%capture``, ``x?`` help, the ``@`` operator, decorators, and a ``%@…`` line inside a
    string stays text (no model is called)."""
    k = await fresh_harness(kernel, tmp_path, {"steps": []})
    timed = await k.run("%timeit -n1 -r1 sum(range(10))")
    assert "per loop" in k.text(timed)

    captured = await k.run("%%capture cap\nprint('hidden')")
    assert k.text(captured) == ""
    assert result_text(await k.run("cap.stdout")) == "'hidden\\n'"

    pages = help_pages(await k.run("x = 1\nx?"))
    assert pages and "int" in pages[0]
    assert "Time execution" in help_pages(await k.run("%timeit?"))[0]

    matmul = await k.run("class M:\n    def __matmul__(self, other):\n        return 'matmul'\nM() @ M()")
    assert result_text(matmul) == "'matmul'"

    decorated = await k.run(
        "import functools\n@functools.lru_cache\ndef double(n):\n    return 2 * n\ndouble(21)"
    )
    assert result_text(decorated) == "42"

    quoted = await k.run('s = """\n%@explore do not run this?\n"""\ns.strip()')
    assert result_text(quoted) == "'%@explore do not run this?'"

    timed_cell = await k.run("%%time\ny = [n * n for n in range(100)]\nlen(y)")
    assert result_text(timed_cell) == "100" and "Wall time" in k.text(timed_cell)

    assert await model_requests(k) == []


@on_the_kernels_loop
async def test_unattended_runs_decide_approvals_at_once(kernel, tmp_path):
    """A cell executed with ``allow_stdin=False`` (how nbclient, nbval and papermill run) has
    nobody to click: approvals are decided at once by ``HarnessNB.unattended_approvals``
    (deny by default), no card waits, and the view notes the automatic decision."""
    (tmp_path / "build").mkdir()
    script = {
        "agents": {
            "main": [
                {"match": "first", "tool_calls": [RM_BUILD]},
                {"match": "first", "text": "I could not delete build/."},
                {"match": "second", "tool_calls": [RM_BUILD]},
                {"match": "second", "text": "Deleted build/."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    denied = await k.run("%%agent\nfirst attempt", allow_stdin=False, timeout=30)
    assert result_text(denied) == "I could not delete build/."
    assert (tmp_path / "build").is_dir()
    note = await wait_for_widget_text(k, "denied automatically (unattended run)")
    assert "rm -rf build" in note
    assert not k.find_models(_model_name="ButtonModel", description="Approve"), "no approval card was shown"
    assert tool_results((await model_requests(k, "main"))[1]) == [
        "error: the call was denied: no one can answer here (unattended run): denied. Do not retry it unchanged."
    ]

    await k.run("%config HarnessNB.unattended_approvals = 'approve'")
    approved = await k.run("%%agent\nsecond attempt", allow_stdin=False, timeout=30)
    assert result_text(approved) == "Deleted build/."
    assert not (tmp_path / "build").exists()
    assert await wait_for_widget_text(k, "approved automatically (unattended run)")


AGENT_FILE = """\
---
name: {name}
description: {description}
tools: read_file, grep
---
You summarise files.
"""


@on_the_kernels_loop
async def test_agents_listing_warnings_and_new_agent_files(kernel, tmp_path):
    """``%agents`` lists every agent with its source file, tools and model, and shows why a
    broken agent file was skipped. An agent file added later is a ``%@name`` magic from the
    next cell on."""
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "reviewer.md").write_text(AGENT_FILE.format(name="reviewer", description="Reviews code."))
    (agents / "broken.md").write_text("no frontmatter here, just text\n")
    script = {"agents": {"summariser": [{"match": "summarise", "text": "A short summary."}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    listing = k.text(await k.run("%agents"))
    assert "reviewer  [" in listing and "agents/reviewer.md]" in listing
    assert "    tools: read_file, grep" in listing
    assert "    model: inherit (scripted/script.yaml)" in listing
    assert "explore  [builtin" in listing or "explore  [" in listing
    assert "general-purpose  [" in listing and "tools: (all of the main agent's)" in listing
    warning = next(line for line in listing.splitlines() if line.startswith("warning:"))
    assert "agents/broken.md: skipped:" in warning

    missing = await k.run("%@summariser summarise notes.txt", check=False)
    assert error_name(missing) == "UsageError"

    (agents / "summariser.md").write_text(AGENT_FILE.format(name="summariser", description="Summarises."))
    ran = await k.run("%@summariser summarise notes.txt")
    assert result_text(ran) == "A short summary."
    assert "@summariser" in k.text(await k.run("%lsmagic"))


async def test_model_from_environment_then_config_and_per_run(tmp_path):
    """``$HARNESS_NB_MODEL`` is the default model; ``%config HarnessNB.model`` replaces it
    for later cells, keeping the conversation; ``%%agent --model`` applies to one run."""
    write_script(tmp_path, {"agents": {"main": [{"text": "from the environment's model"}]}}, "env.yaml")
    write_script(tmp_path, {"agents": {"main": [{"text": "from the configured model"}]}}, "configured.yaml")
    write_script(tmp_path, {"agents": {"main": [{"text": "from the one-run model"}]}}, "once.yaml")
    # its own kernel: the settings read $HARNESS_NB_MODEL when harness_nb is first imported
    async with notebook(tmp_path, env={"HARNESS_NB_MODEL": "scripted/env.yaml"}) as k:
        assert await kernel_json(k, f"{CONTROLLER}.config.model") == "scripted/env.yaml"
        assert result_text(await k.run("%%agent\nhello")) == "from the environment's model"

        await k.run("%config HarnessNB.model = 'scripted/configured.yaml'")
        assert result_text(await k.run("%%agent\nhello again")) == "from the configured model"
        assert result_text(await k.run("%%agent --model scripted/once.yaml\njust this once")) == (
            "from the one-run model"
        )
        messages = await kernel_json(k, f"[m.content for m in {HARNESS}.session.messages]")
        assert [m.strip() for m in messages] == [
            "hello",
            "from the environment's model",
            "hello again",
            "from the configured model",
            "just this once",
            "from the one-run model",
        ]


def _assert_usage_error(k, cell, *fragments: str) -> None:
    """A user mistake: ``UsageError`` with a message naming the problem, no traceback."""
    assert error_name(cell) == "UsageError", k.error(cell)
    text = k.text(cell)
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert "Traceback" not in text and "File " not in text, text


@on_the_kernels_loop
async def test_mistakes_get_one_clear_message(kernel, tmp_path):
    """Bad magic arguments raise ``UsageError`` (a message, no traceback), and a run with no
    model configured says how to configure one."""
    k = await fresh_harness(kernel, tmp_path)
    for run in ("%%agent\nhello", "%%agent --bg\nhello", "%@explore hello"):
        no_model = await k.run(run, check=False)
        _assert_usage_error(k, no_model, "no model configured", "%config HarnessNB.model", "HARNESS_NB_MODEL")
        assert "to Harness" not in k.text(no_model)  # the setting as a notebook sets it, not Python's keyword

    cases = {
        "%agent --max-turns lots hello": ["--max-turns", "lots"],
        "%agent --bogus hello": ["--bogus"],
        "%%agent stray words\nthe prompt": ["stray words", "cell body"],
        "%%agent\n   ": ["needs a prompt"],
        "%task frobnicate": ["frobnicate", "list, show, wait, stop or send"],
        "%task show": ["needs a task id"],
        "%task wait": ["needs a task id"],
        "%agents --nope": ["--nope"],
        "%@explore": ["%@explore needs a prompt"],
    }
    for code, fragments in cases.items():
        _assert_usage_error(k, await k.run(code, check=False), *fragments)

    await k.run(f"%config HarnessNB.model = 'scripted/{write_script(tmp_path, [{'text': 'ok'}])}'")
    bad_wait = await k.run("%task wait bg-1 --timeout soon", check=False)
    _assert_usage_error(k, bad_wait, "bg-1")
    unknown_agent = await k.run("%%agent --bg --agent nobody\nlook around", check=False)
    _assert_usage_error(k, unknown_agent, "nobody", "explore, general-purpose")
    assert result_text(await k.run("%%agent\nstill fine?")) == "ok"
    # a mistyped session id fails its cell naming the sessions; it never becomes a paid prompt
    unknown_session = await k.run("%agent --resume nonexistent-id", check=False)
    _assert_usage_error(k, unknown_session, "no session 'nonexistent-id'", "the newest are: session-")
    no_agent = await k.run("%@nosuchagent hi there", check=False)
    _assert_usage_error(k, no_agent, "%@nosuchagent", "no agent of that name", "%@explore", "%@general-purpose")
    no_agent_cell = await k.run("%%@nosuchagent\nlook around", check=False)
    _assert_usage_error(k, no_agent_cell, "%@nosuchagent", "%@explore")


TERMINAL_SESSION = """
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "harness_nb")
shell.run_cell("%config HarnessNB.model = 'scripted/script.yaml'")
result = shell.run_cell("%%agent\\nclean the build")
print("cell ok:", result.success)
shell.run_cell("%task")
"""


def test_terminal_ipython_prints_text_instead_of_widgets(tmp_path):
    """In a terminal IPython (no kernel, no widgets) the same run prints readable lines: the
    streamed answer, tool calls with their results, and the approval (denied: there is no
    terminal to ask in a subprocess)."""
    (tmp_path / "build").mkdir()
    write_script(
        tmp_path,
        {
            "agents": {
                "main": [
                    {"text": "Cleaning up.", "tool_calls": [RM_BUILD, {"name": "ls", "arguments": {}}]},
                    {"text": "I listed the folder; deleting needs your approval."},
                ]
            }
        },
    )
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TERMINAL_SESSION)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "IPYTHONDIR": str(home / ".ipython")},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "cell ok: True" in out, out + done.stderr
    assert "Cleaning up." in out
    assert "→ bash(command='rm -rf build')" in out
    assert "? approval needed for bash(command='rm -rf build') (recursive or forced delete, risk high)" in out
    assert "denied (no terminal to ask: denied (use --yes to approve))" in out
    # ls runs beside the bash call that waits for its approval: its lines may interleave
    assert out.index("→ ls()") < out.index("← ls: ")
    assert "I listed the folder; deleting needs your approval." in out
    assert "no tasks yet" in out
    assert "VBox" not in out and "Output(" not in out and "model_id" not in out
    assert (tmp_path / "build").is_dir()
    assert done.stderr == "", done.stderr
