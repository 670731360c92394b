"""Run by ``test_sandbox_user.py`` as a throwaway unprivileged user: the issue's escapes,
the seccomp filter, the limits and calls checkpointed beside a command under that user's
own sandbox. Prints one JSON object:
``{"unavailable": why}`` where bubblewrap cannot sandbox this user, else what it found.

    python sandbox_as_user.py WORKDIR HOME OUTSIDE
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from harness_nb.core import ConfigError
from harness_nb.sandbox import Sandbox
from sandbox_support import ESCAPES, beside_a_command, escaped, output_of, prepare_escapes, seccomp_probe

SPAWN = """
import subprocess
started = []
try:
    for _ in range(2000):
        started.append(subprocess.Popen(["sleep", "60"]))
except BlockingIOError:
    pass
print(len(started))
"""


async def main(workdir: Path, home: Path, outside: Path) -> dict[str, Any]:
    try:
        sandbox = Sandbox.create("bwrap", limits={"file_size": "1M"})
    except ConfigError as exc:
        return {"unavailable": str(exc)}
    prepare_escapes(workdir, home, outside)
    found: dict[str, Any] = {"identity": sandbox.identity, "escapes": {}}
    for name, command in ESCAPES.items():
        output = await output_of(sandbox, workdir, command.format(outside=outside))
        found["escapes"][name] = {"got": escaped(name, output, workdir, outside), "output": output}
    (workdir / "probe.py").write_text(seccomp_probe())
    found["seccomp"] = json.loads((await output_of(sandbox, workdir, "python probe.py")).splitlines()[0])
    found["status"] = await output_of(sandbox, workdir, "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status")
    (workdir / "spawn.py").write_text(SPAWN)
    found["spawned"] = await output_of(sandbox, workdir, "python spawn.py")
    found["yes"] = await output_of(sandbox, workdir, "yes > f")
    found["file_size"] = (workdir / "f").stat().st_size
    (workdir / "beside").mkdir()
    found["beside"] = await beside_a_command(sandbox, workdir / "beside", home)
    return found


if __name__ == "__main__":
    folders = [Path(p) for p in sys.argv[1:4]]
    print(json.dumps(asyncio.run(main(*folders))))
