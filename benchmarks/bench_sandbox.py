"""What the sandbox costs per command, and what ordinary data work needs of its limits.

    python benchmarks/bench_sandbox.py              # about 60 s
    python benchmarks/bench_sandbox.py --runs 20

1. Per-command overhead: ``true`` run 50 times (median, interleaved) through

   - ``bash -c true`` alone, and the release before issue 18's sandbox: the same bubblewrap
     mounts, run by the kernel's user, with no user namespace, seccomp or limits (``old``);
   - the argv ``Sandbox.plan(...).launch()`` gives now (``new argv``: the process chain
     alone — as root ``nsenter`` + unprivileged bubblewrap + ``prlimit``);
   - ``run_command``, the whole path a ``bash`` call takes (the plan, with its ``.env``
     walk and, as root, the helper's answers; the pipe; the process group), per identity:
     as root ``idmapped`` and the weaker ``root`` mode, ``off`` for comparison.

   Also the first command of a root kernel, which starts the root helper.
2. Ordinary work against the default limits: each workload runs unsandboxed while its
   process tree is sampled every 5 ms for the most tasks (processes and threads: what the
   process limit counts) and the largest address space of one process (``VmPeak``).

Figures go to ``benchmarks/results/bench_sandbox.json``. Nothing is enforced.
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

from harness_nb.sandbox import PROTECTED_FOLDERS, Sandbox, SandboxLimits, stop_mount_helper  # noqa: E402
from harness_nb.sandbox.limits import size_text  # noqa: E402
from harness_nb.tools.shell import run_command  # noqa: E402

WORKLOADS = {
    "python: import numpy, pandas, matplotlib": [
        sys.executable, "-c", "import numpy, pandas, matplotlib.pyplot as plt; plt.plot([1, 2]); plt.savefig('p.png')",
    ],
    "pip --help": [sys.executable, "-m", "pip", "--help"],
    "git init + commit + status": [
        "bash", "-c", "git init -q r && cd r && echo a > a && git add a && "
        "git -c user.email=a@b -c user.name=a commit -qm x && git status --short",
    ],
    "cc -O2 hello.c": ["bash", "-c", "printf 'int main(void){return 0;}' > h.c && cc -O2 h.c -o h && ./h"],
    "multiprocessing.Pool(8) with numpy": [
        sys.executable, "-c", "import numpy, multiprocessing as mp\n"
        "with mp.Pool(8) as p: print(sum(p.map(abs, range(-1000, 0))))",
    ],
    "node -e (V8)": ["node", "-e", "console.log([...Array(1e6).keys()].length)"],
    "java -version": ["java", "-version"],
}  # fmt: skip


def old_argv(workdir: Path, command: str) -> list[str]:
    """The release before issue 18: bubblewrap run by the kernel's user (as root: with every
    capability), the same mounts, no user namespace, seccomp or limits."""
    w = str(workdir)
    argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--bind", w, w]
    for name in PROTECTED_FOLDERS:
        if (workdir / name).is_dir():
            argv += ["--ro-bind", str(workdir / name), str(workdir / name)]
    return [*argv, "--chdir", w, "bash", "-c", command]


def new_argv(sandbox: Sandbox, workdir: Path, command: str) -> tuple[list[str], Any]:
    plan = sandbox.plan(command, workdir, timeout=60)
    return plan.launch(), plan


def timed_exec(argv: list[str], fds: list[int]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


async def timed_call(sandbox: Sandbox, workdir: Path) -> float:
    start = time.perf_counter()
    out = await run_command(workdir, "true", timeout=60, sandbox=sandbox)
    assert out.endswith("exit code: 0"), out
    return time.perf_counter() - start


def overhead(runs: int) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-sandbox-", dir="/var/tmp"))
    (workdir / ".claude").mkdir()
    (workdir / ".env").write_text("KEY=x\n")
    sandboxes: dict[str, Sandbox] = {"off": Sandbox.create("off")}
    if os.geteuid() == 0:
        sandboxes["idmapped"] = Sandbox.create("bwrap")
        sandboxes["root"] = Sandbox.create("bwrap", idmap=False)
    else:
        sandboxes["user"] = Sandbox.create("bwrap")
    sandboxed = [s for s in sandboxes.values() if s.active][0]
    times: dict[str, list[float]] = {}
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(timed_call(sandboxed, workdir))  # warm: helper, probes, imports
        for _ in range(runs):
            times.setdefault("bash -c true", []).append(timed_exec(["bash", "-c", "true"], []))
            times.setdefault("old argv", []).append(timed_exec(old_argv(workdir, "true"), []))
            argv, plan = new_argv(sandboxed, workdir, "true")
            try:
                times.setdefault(f"new argv ({sandboxed.identity})", []).append(timed_exec(argv, plan.fds))
            finally:
                plan.release()
            for name, sandbox in sandboxes.items():
                took = loop.run_until_complete(timed_call(sandbox, workdir))
                times.setdefault(f"run_command ({name})", []).append(took)
        first = None
        if os.geteuid() == 0:
            stop_mount_helper()
            first = loop.run_until_complete(timed_call(sandboxes["idmapped"], workdir))
    finally:
        loop.close()
        shutil.rmtree(workdir, ignore_errors=True)
    medians = {name: statistics.median(t) * 1000 for name, t in times.items()}
    return {"median_ms": medians, "first_root_command_ms": None if first is None else first * 1000, "runs": runs}


def sample(argv: list[str], cwd: Path) -> dict[str, Any]:
    """Run ``argv``; the most tasks its process tree had at once and the largest VmPeak."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_tasks, peak_vm = 0, 0
    done = threading.Event()

    def tree() -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        found, stack = [], [proc.pid]
        while stack:
            pid = stack.pop()
            found.append(pid)
            stack += children.get(pid, [])
        return found

    def watch() -> None:
        nonlocal peak_tasks, peak_vm
        while not done.is_set():
            tasks = 0
            for pid in tree():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                tasks += int(fields.get("Threads", "1"))
                peak_vm = max(peak_vm, int(fields.get("VmPeak", "0 kB").split()[0]) * 1024)
            peak_tasks = max(peak_tasks, tasks)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    code = proc.wait()
    done.set()
    watcher.join()
    return {"exit": code, "peak_tasks": peak_tasks, "peak_address_space": peak_vm}


def workloads() -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-sandbox-work-"))
    try:
        return {name: sample(argv, folder) for name, argv in WORKLOADS.items() if shutil.which(argv[0])}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    figures: dict[str, Any] = {"overhead": overhead(args.runs), "workloads": workloads()}
    limits = SandboxLimits()
    figures["defaults"] = {"processes": limits.processes, "address_space": limits.address_space}
    print(f"per-command overhead, median of {args.runs} (ms):")
    for name, ms in figures["overhead"]["median_ms"].items():
        print(f"  {name:28} {ms:7.2f}")
    if figures["overhead"]["first_root_command_ms"] is not None:
        print(f"  {'first root command (helper)':28} {figures['overhead']['first_root_command_ms']:7.2f}")
    print(f"ordinary work vs the default limits ({limits.describe()}):")
    for name, seen in figures["workloads"].items():
        print(f"  {name:42} exit {seen['exit']}  {seen['peak_tasks']:4} tasks  {size_text(seen['peak_address_space'])}")
    common.RESULTS.mkdir(exist_ok=True)
    (common.RESULTS / "bench_sandbox.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
