"""The harness's own imports never run a file from the notebook's folder (issue 18, item 3).

ipykernel puts the notebook's folder first on ``sys.path``. An ``mcp.py`` or ``yaml.py``
written there after the extension loaded (by the agent, or by anything else) used to be
what the harness's first ``import mcp`` / ``import yaml`` ran, inside the kernel process.
Here such files leave a mark when they run; the harness starts an MCP server (its SDK is
imported then) and reads a YAML script (PyYAML is imported then), and no mark appears.
"""

from __future__ import annotations

import json

import pytest

from mcp_support import stdio_demo
from notebook_support import HARNESS, kernel_json, notebook, result_text, write_script

pytestmark = pytest.mark.kernel

HOSTILE = "open({mark!r}, 'w').write('ran')\nraise SystemExit('hostile {name} ran')\n"


async def test_a_hostile_mcp_py_or_yaml_py_in_the_notebook_folder_never_runs(tmp_path):
    marks = {name: tmp_path / f"{name}-ran" for name in ("mcp", "yaml", "anyio", "httpx2")}
    async with notebook(tmp_path) as k:
        path = await kernel_json(k, "__import__('sys').path")
        site = next(i for i, entry in enumerate(path) if entry.endswith("site-packages"))
        assert "" in path[:site], path  # the folder is searched before the installed packages
        # Nothing of these is loaded yet (PyYAML is: forget it, so the harness imports it again).
        forget_yaml = "import sys\nfor m in [m for m in sys.modules if m.split('.')[0] == 'yaml']: del sys.modules[m]"
        loaded = await kernel_json(k, "[m for m in ('mcp', 'anyio', 'httpx2') if m in sys.modules]", setup=forget_yaml)
        assert loaded == []
        for name, mark in marks.items():
            (tmp_path / f"{name}.py").write_text(HOSTILE.format(mark=str(mark), name=name))
        (tmp_path / "servers.json").write_text(json.dumps({"demo": stdio_demo()}))
        await k.run(f"%config HarnessNB.mcp_servers = __import__('json').load(open({'servers.json'!r}))")
        echo = {"name": "mcp__demo__echo", "arguments": {"text": "hi"}}
        script = write_script(tmp_path, [{"tool_calls": [echo]}, {"text": "done"}])
        await k.run(f"%config HarnessNB.model = 'scripted/{script}'")
        cell = await k.run("%%agent\nsay hi through the demo server")
        assert result_text(cell) == "done", k.text(cell)
        last = f"{HARNESS}.provider.requests[-1].messages"
        assert await kernel_json(k, f"[m.content for m in {last} if m.role == 'tool']") == ["echo: hi"]
        where = await kernel_json(k, "{m: sys.modules[m].__file__ for m in ('mcp', 'yaml', 'anyio')}")
    assert all(str(tmp_path) not in path for path in where.values()), where
    assert [name for name, mark in marks.items() if mark.exists()] == []
