"""What checkpointing costs per tool call (sandbox/checkpoints/checkpoint.py), on a workdir of 5,000
source files in 250 folders plus 1 GB of data files (40 CSV files of 25 MB).

    python benchmarks/bench_checkpoint.py [--rounds 15] [--keep]

Each call is what the engine does around an effectful tool call: a snapshot before
(``Checkpoints.start``), the call's changes, a snapshot after (``finish``: the diff, and a
checkpoint — tree, commit, manifest — when anything changed). Measured, median of
``--rounds`` calls each:

- an unchanged tree (the target: at most 50 ms on this machine);
- one source file changed;
- 100 source files changed;
- one 25 MB data file changed (read and stored again);

and, once, the first snapshot, which reads and stores everything (a new workdir, or a
first call after the store was deleted). The floor each is compared with is a bare stat
walk of the same tree (``os.scandir`` and ``lstat`` of every entry, nothing else): the
ratio says what the checkpoint adds to the least any change detection must do. Figures go
to ``benchmarks/results/bench_checkpoint.json``. The tree is built under /var/tmp and
removed afterwards (``--keep`` keeps it).
"""

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness_nb.sandbox.checkpoints.checkpoint import Checkpoints  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SOURCE_FOLDERS, SOURCE_PER_FOLDER = 250, 20
DATA_FILES, DATA_MB = 40, 25
TARGETS = {"unchanged_ms": 50.0}


def build(workdir: Path) -> None:
    """5,000 source files of 1-6 KB in 250 folders, and 1 GB of CSV data."""
    rng = random.Random(7)
    line = "def f_{n}(x):\n    return x * {n} + {m}  # a line of ordinary source code\n"
    for folder in range(SOURCE_FOLDERS):
        package = workdir / "src" / f"pkg{folder // 25}" / f"mod{folder}"
        package.mkdir(parents=True)
        for n in range(SOURCE_PER_FOLDER):
            lines = rng.randint(12, 70)
            (package / f"file{n}.py").write_text("".join(line.format(n=i, m=rng.random()) for i in range(lines)))
    rows = "".join(f"{i},{rng.random():.6f},{rng.randint(0, 10**6)},sensor-{i % 97}\n" for i in range(200_000))
    block = rows.encode()
    data = workdir / "data"
    data.mkdir()
    size = DATA_MB * 1024 * 1024
    whole = block * (size // len(block) + 1)
    for n in range(DATA_FILES):
        head = f"# part {n}\n".encode()
        (data / f"part{n:02d}.csv").write_bytes(head + whole[: size - len(head)])


def stat_walk(folder: Path) -> int:
    """The floor: every entry listed and stat'ed, nothing else."""
    count = 0
    stack = [str(folder)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                entry.stat(follow_symlinks=False)
                count += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return count


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def one_call(cps: Checkpoints, change) -> float:  # type: ignore[no-untyped-def]
    """The checkpoint cost of one call making ``change`` (the change itself not counted)."""
    start = time.perf_counter()
    watch = cps.start("bench", "bash", "main")
    before = time.perf_counter()
    change()
    after = time.perf_counter()
    cps.finish(watch)
    return ((before - start) + (time.perf_counter() - after)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--keep", action="store_true", help="keep the tree and the store")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-checkpoint-", dir="/var/tmp"))
    workdir, home = base / "work", base / "home"
    workdir.mkdir()
    home.mkdir()
    try:
        print("building the tree (5,000 source files, 1 GB of data)…", flush=True)
        build(workdir)
        sources = sorted(workdir.glob("src/*/*/*.py"))
        entries = stat_walk(workdir)
        floor = statistics.median(timed(lambda: stat_walk(workdir)) for _ in range(args.rounds))
        cps = Checkpoints(workdir, home=home)
        first = timed(lambda: cps.finish(cps.start("first", "bash", "main")))
        time.sleep(1.2)  # past the racy window: files written just before a snapshot are read again once
        one_call(cps, lambda: None)
        counter = iter(range(10**9))

        def touch(paths: list[Path]) -> None:
            n = next(counter)
            for path in paths:
                with open(path, "a") as fh:
                    fh.write(f"# edit {n}\n")

        def touch_data() -> None:
            path = workdir / "data" / f"part{next(counter) % DATA_FILES:02d}.csv"
            with open(path, "r+b") as fh:
                fh.write(f"# edit {next(counter)}".encode())

        cases = {
            "unchanged_ms": lambda: None,
            "one_file_changed_ms": lambda: touch([random.choice(sources)]),
            "hundred_files_changed_ms": lambda: touch(random.sample(sources, 100)),
            "one_data_file_changed_ms": touch_data,
        }
        figures: dict[str, object] = {
            "entries": entries,
            "source_files": len(sources),
            "data_bytes": sum(p.stat().st_size for p in (workdir / "data").iterdir()),
            "stat_walk_ms": round(floor, 1),
            "first_snapshot_ms": round(first, 1),
        }
        for name, change in cases.items():
            one_call(cps, change)  # warm-up: the next start reads what the previous round changed
            cost = statistics.median(one_call(cps, change) for _ in range(args.rounds))
            figures[name] = round(cost, 1)
            figures[name.replace("_ms", "_vs_stat_walk")] = round(cost / floor, 2)
        store_bytes = sum(p.stat().st_size for p in cps.folder.rglob("*") if p.is_file())
        figures["store_mb"] = round(store_bytes / 1024 / 1024, 1)
        figures["checkpoints"] = len(cps.kept())
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\n{'figure':32} {'value':>10}  target")
    for name, value in figures.items():
        target = TARGETS.get(name)
        verdict = "" if target is None else f"≤ {target:g}  {'PASS' if float(value) <= target else 'FAIL'}"  # type: ignore[arg-type]
        print(f"{name:32} {value:>10}  {verdict}")
    RESULTS.mkdir(exist_ok=True)
    record = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "system": platform.platform()},
        "rounds": args.rounds,
        "figures": figures,
        "targets": TARGETS,
    }
    (RESULTS / "bench_checkpoint.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
