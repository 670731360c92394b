"""What keeping the secrets current costs (core/secret.py), in one process, in a few seconds.

    python benchmarks/bench_secrets.py

- ``refresh`` when nothing changed: what every ``scrub`` pays to notice a changed
  ``os.environ`` (one dict comparison), with this process's environment plus 100 variables;
- ``refresh(files=True)`` with this repository as the watched workdir: re-stating every
  folder walked and ``.env`` read (what the redacting hook pays before each tool result);
- ``scrub`` of a 200-character message (what each message joining a session pays) and of a
  20,000-character tool result (the offload limit), with ten secrets known;
- ``observe_call`` for that result of a call naming ``pyproject.toml``: what the redacting
  hook pays before each tool result (the files re-stated, the named file read for its
  credentials, the result searched for credential-named pairs), off the event loop;
- the rebuild after a new credential appears in the environment.

Targets (printed, never enforced): an unchanged refresh < 2 µs, a message < 10 µs, a 20 KB
result < 0.5 ms (a bench_engine call costs about 900 µs of CPU). Figures go to ``benchmarks/results/bench_secrets.json``.
"""

import json
import os
import platform
import secrets as random_tokens
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness_nb.core.secret import Secrets  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"refresh_unchanged_us": 2.0, "scrub_message_us": 10.0, "scrub_20kb_us": 500.0}


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    for i in range(100):
        os.environ[f"BENCH_FILLER_{i}"] = f"value-{i}"
    for i in range(10):
        os.environ[f"BENCH_SERVICE_{i}_TOKEN"] = random_tokens.token_urlsafe(30)
    secrets = Secrets(file_interval=3600)
    secrets.watch(ROOT)
    secrets.refresh(files=True)
    message = ("A short tool result with nothing secret in it: 42 lines, 3 files. " * 3)[:200]
    result = (ROOT / "harness_nb" / "engine" / "engine.py").read_text()[:20_000]
    arguments = json.dumps({"command": "head -50 pyproject.toml"})
    walked = sum(len(scan.folders) + len(scan.stamps) for scan in secrets._scans.values())

    def rebuild() -> None:
        os.environ["BENCH_LATE_API_KEY"] = random_tokens.token_urlsafe(30)
        secrets.refresh()

    figures = {
        "environment_variables": len(os.environ),
        "secrets_known": len(secrets.values()),
        "paths_stated": walked,
        "refresh_unchanged_us": per_call_us(secrets.refresh, 20_000),
        "refresh_files_us": per_call_us(lambda: secrets.refresh(files=True), 200),
        "scrub_message_us": per_call_us(lambda: secrets.scrub(message), 5_000),
        "scrub_20kb_us": per_call_us(lambda: secrets.scrub(result), 100),
        "observe_call_20kb_us": per_call_us(lambda: secrets.observe_call(arguments, result, ROOT), 100),
        "rebuild_after_new_key_us": per_call_us(rebuild, 200),
    }
    print(f"{figures['environment_variables']} environment variables, {figures['secrets_known']} secrets known, "
          f"{walked} paths stated per file check")  # fmt: skip
    for name, value in figures.items():
        if name.endswith("_us"):
            target = TARGETS.get(name)
            verdict = "" if target is None else ("  PASS" if value <= target else "  FAIL") + f" (target ≤ {target:g} µs)"
            print(f"{name:28} {value:9.2f} µs{verdict}")
    RESULTS.mkdir(exist_ok=True)
    out = {"environment": {"python": platform.python_version(), "platform": platform.platform()}, **figures}
    (RESULTS / "bench_secrets.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
