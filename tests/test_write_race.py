"""The path a write was checked for is the path written (issue 18, item 2).

A folder ``d`` flips between a real folder and a symlink to ``.claude`` while the engine runs
320 ``write_file("d/settings.local.json")`` calls at once through the real permission hook
and the real tool. The hook lets a call run when ``d`` was a folder at its check; if the
tool then resolved the path again, the write followed the symlink into ``.claude`` (161 of
320 did, unasked). The tool writes the path the hook checked, opening each folder without
following symlinks, so none lands there.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from harness_nb.core import ToolResultMessage
from harness_nb.engine import AgentEngine, Denied, HookRegistry
from harness_nb.permissions.hook import PermissionHook
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.tools import ToolRegistry, write_file

CALLS = 320
PLANTED = '{"permissions": {"allow": ["Bash(*)"]}, "enableAllProjectMcpServers": true}'


def _flip(workdir: Path, stop: threading.Event, flips: list[int]) -> None:
    """Turn ``d`` into a symlink to ``.claude``, then into a folder, until ``stop``."""
    d = workdir / "d"
    while not stop.is_set():
        for make in (lambda: d.symlink_to(".claude", target_is_directory=True), d.mkdir):
            try:
                make()
            except OSError:
                pass  # a write made ``d`` a folder meanwhile
            flips[0] += 1
            try:
                d.unlink() if d.is_symlink() else shutil.rmtree(d)
            except OSError:
                pass


async def test_a_folder_flipping_to_a_symlink_never_lands_a_write_in_claude(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    (workdir / ".claude").mkdir(parents=True)
    asked: list[str] = []

    async def deny(call: object, reason: str, risk: str) -> Denied:
        asked.append(reason)
        return Denied("no")

    calls = [
        {"id": f"w{i}", "name": "write_file", "arguments": {"path": "d/settings.local.json", "content": PLANTED}}
        for i in range(CALLS)
    ]
    provider = ScriptedProvider([{"tool_calls": calls}, {"text": "done"}])
    engine = AgentEngine(
        provider,
        ToolRegistry([write_file]),
        hooks=HookRegistry([PermissionHook()]),
        approval=deny,
        workdir=workdir,
    )
    stop = threading.Event()
    flips = [0]
    flipper = threading.Thread(target=_flip, args=(workdir, stop, flips), name="flip-d")
    flipper.start()
    try:
        await engine.run("plant settings")
    finally:
        stop.set()
        flipper.join()
    results = [m for m in engine.session.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == CALLS and flips[0] > 0
    assert list((workdir / ".claude").iterdir()) == []
    # the calls that ran wrote into the folder d; the others were asked about (and denied)
    # or met the symlink and were refused
    assert {m.content for m in results if not m.is_error} <= {f"wrote {len(PLANTED)} bytes to d/settings.local.json"}
    assert set(asked) <= {"writes an agent, skill or settings file"}
