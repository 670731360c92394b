"""Run the model trial's task notebooks against the relay, one task at a time.

    python benchmarks/model_trial/run_trial.py --out benchmarks/model_trial/runs/before
    python benchmarks/model_trial/run_trial.py --out runs/x --tasks 01,05 --answer-timeout 1800
    python benchmarks/model_trial/run_trial.py --out runs/x --tasks 11 --frontend

For each task (a folder of ``tasks/``, in name order), in a fresh temporary copy of the
folder (without ``expected.md``; ``prepare.py``, if any, is run there first to make the
data, then left out too):

1. a relay (``relay.py``) starts on a free loopback port, writing the task's requests to
   ``OUT/requests/<task>/``; ``OUT/requests/NOW`` names that folder;
2. ``task.ipynb`` runs in a kernel on this interpreter, in the copy, with
   ``OPENAI_BASE_URL`` pointing at the relay, a dummy ``OPENAI_API_KEY``, a fresh ``$HOME``
   and this environment's ``bin`` first on ``PATH``; cells run to the end even when one
   fails (some tasks fail a cell on purpose). It runs through nbclient (unattended: no
   one to ask, approvals by ``HarnessNB.unattended_approvals``, no notebook tools), or —
   with ``--frontend``, and always for a task with a ``person.yaml`` — from a page with
   harness_nb's extension played in Python, a person deciding its cards as
   ``person.yaml`` says (``frontend.py``, ``person.py``);
3. ``OUT/results/<task>/`` gets the executed notebook, its text (``outputs.txt``), the
   folder as the run left it (``workdir/``) and ``run.json`` (times, cell errors, and
   with a page what the person did); ``OUT/requests/<task>/FINISHED`` tells the answerer
   the task is over.

This script answers nothing: every request waits for the answerer's ``resp-NNNN.json``
(see README.md). Run it with the project's environment (``.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
from frontend import run_with_page
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from person import Person

from harness_nb.testing.run_notebook import _current_env_manager, render  # the same private kernelspec as run_notebook

HERE = Path(__file__).resolve().parent
TASKS = HERE / "tasks"
RELAY = HERE / "relay.py"
PERSON = "person.yaml"  # what the person at the page decides (person.py); the task needs the page
NOT_COPIED = ("expected.md", "prepare.py", PERSON, "__pycache__", ".ipynb_checkpoints")
# The relay wants no key. harness_nb masks any text holding 8 characters from either end of
# a key, so a readable one ("model-trial-key") would mask paths such as the workdir's.
DUMMY_KEY = "q7Rz2VxN0pW4mKtL"
MAX_KEPT_FILE = 5 * 1024 * 1024  # files of the workdir larger than this are not kept in the results
RELAY_START = 30.0  # seconds the relay may take to print its URL
# Settings a developer may have exported: every task starts from the documented defaults.
CLEARED = ("OPENAI_", "ANTHROPIC_", "OLLAMA_", "HARNESS_NB_", "JPY_")


def chosen_tasks(folder: Path, wanted: Sequence[str]) -> list[Path]:
    """The task folders of ``folder`` (those with a ``task.ipynb``), in name order; with
    ``wanted``, those whose name is or starts with one of them."""
    tasks = sorted(p for p in folder.iterdir() if (p / "task.ipynb").is_file())
    if not wanted:
        return tasks
    chosen = [t for t in tasks if any(t.name == w or t.name.startswith(w) for w in wanted)]
    unknown = [w for w in wanted if not any(t.name == w or t.name.startswith(w) for t in tasks)]
    if unknown:
        raise SystemExit(f"no task named {', '.join(unknown)} in {folder}; tasks: {', '.join(t.name for t in tasks)}")
    return chosen


def prepare(task: Path, work: Path) -> None:
    """Copy the task into ``work`` and make its data there."""
    shutil.copytree(task, work, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    script = task / "prepare.py"
    if script.is_file():
        done = subprocess.run([sys.executable, str(script)], cwd=work, capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise SystemExit(f"{script} failed ({done.returncode}):\n{done.stderr[-2000:]}")


@contextmanager
def relay(requests: Path, *, timeout: float, full_history: bool, log: Path) -> Iterator[str]:
    """A relay writing to ``requests`` on a free port; yields its ``/v1`` URL, stops it on exit."""
    command = [sys.executable, str(RELAY), str(requests), "--port", "0", "--timeout", str(timeout)]
    if full_history:
        command.append("--full-history")
    with open(log, "ab") as err, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True) as process:
        try:
            assert process.stdout is not None
            ready, _, _ = select.select([process.stdout], [], [], RELAY_START)
            url = process.stdout.readline().strip() if ready else ""
            if not url.startswith("http://127.0.0.1:"):
                raise SystemExit(f"the relay did not start (see {log})")
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def kernel_env(url: str, home: Path) -> dict[str, str]:
    """The kernel's environment: this one without provider or harness settings, plus the
    relay's address, a dummy key, a fresh home and this interpreter's ``bin`` on ``PATH``
    (so ``python`` in a task's ``.mcp.json`` is this environment's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    env.update(
        OPENAI_BASE_URL=url,
        OPENAI_API_KEY=DUMMY_KEY,
        HOME=str(home),
        IPYTHONDIR=str(home / ".ipython"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    return env


def execute(notebook: Path, work: Path, env: dict[str, str], specs: Path, *, cell_timeout: float) -> tuple[Any, str]:
    """Run ``notebook`` in ``work``; return it with its outputs, and how the run ended
    (``"completed"``, or why it stopped early)."""
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(
        nb,
        km=_current_env_manager(str(specs)),
        timeout=cell_timeout,
        allow_errors=True,
        resources={"metadata": {"path": str(work)}},
        record_timing=True,
    )
    try:
        client.execute(cleanup_kc=True, env=env)
    except CellTimeoutError as exc:
        return nb, f"a cell ran past --cell-timeout: {str(exc).splitlines()[0]}"
    except DeadKernelError as exc:
        return nb, f"the kernel died: {exc}"
    return nb, "completed"


def cell_errors(nb: Any) -> list[dict[str, Any]]:
    """Each code cell that ended in an error: its index, first source line and exception.
    A magic's ``UsageError`` (a failed agent run ends so) is printed to stderr, not raised."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", ()):
            if out.get("output_type") == "error":
                error = f"{out['ename']}: {out['evalue']}"
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and "UsageError:" in out["text"]:
                error = out["text"].strip()
            else:
                continue
            first = (cell.source.splitlines() or [""])[0]
            found.append({"cell": index, "source": first, "error": error[:500]})
    return found


def keep(work: Path, target: Path) -> None:
    """Copy the folder as the run left it, without files too large to keep."""

    def large(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if (p := Path(folder) / n).is_file() and not p.is_symlink() and p.stat().st_size > MAX_KEPT_FILE
        ]

    shutil.copytree(work, target, ignore=large, symlinks=True, dirs_exist_ok=True)


def run_task(task: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one task (see the module docstring); return its ``run.json`` record."""
    requests, results = out / "requests" / task.name, out / "results" / task.name
    if requests.exists() or results.exists():
        raise SystemExit(f"{task.name} already has a run in {out}: choose another --out")
    requests.mkdir(parents=True)
    results.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="trial-") as tmp:
        work, home, specs = Path(tmp) / "project", Path(tmp) / "home", Path(tmp) / "kernelspec"
        home.mkdir()
        specs.mkdir()
        with_page = args.frontend or (task / PERSON).is_file()
        person = Person.load(task / PERSON) if with_page else None  # checked before anything runs
        prepare(task, work)
        started = time.time()
        with relay(
            requests, timeout=args.answer_timeout, full_history=args.full_history, log=results / "relay.log"
        ) as url:
            (out / "requests" / "NOW").write_text(f"{task.name}\n", encoding="utf-8")
            print(f"[{task.name}] running{' from a page' if person else ''}; requests in {requests}", flush=True)
            env = kernel_env(url, home)
            if person is None:
                nb, ended = execute(work / "task.ipynb", work, env, specs, cell_timeout=args.cell_timeout)
            else:
                nb, ended = asyncio.run(
                    run_with_page(work / "task.ipynb", work, env, person, cell_timeout=args.cell_timeout)
                )
        seconds = time.time() - started
        nbformat.write(nb, results / "task.ipynb")
        (results / "outputs.txt").write_text(render(nb), encoding="utf-8")
        keep(work, results / "workdir")
    errors, count = cell_errors(nb), len(list(requests.glob("req-*.json")))
    record: dict[str, Any] = {
        "task": task.name,
        "ended": ended,
        "seconds": round(seconds, 1),
        "requests": count,
        "cell_errors": errors,
        "frontend": person is not None,
    }
    if person is not None:
        record["person"] = person.log
    (results / "run.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    (requests / "FINISHED").write_text(f"{ended} after {seconds:.0f} s\n", encoding="utf-8")
    print(f"[{task.name}] {ended} in {seconds:.0f} s: {count} requests, {len(errors)} cell errors", flush=True)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected tasks one after another."""
    parser = argparse.ArgumentParser(description="Run the model trial's task notebooks against the relay.")
    parser.add_argument(
        "--out", type=Path, required=True, help="the run's folder: requests/ for the answerer, results/ for checking"
    )
    parser.add_argument("--tasks", default="", help="comma-separated task names or prefixes (default: all)")
    parser.add_argument("--tasks-dir", type=Path, default=TASKS, help="where the task folders are (default: tasks/)")
    parser.add_argument(
        "--answer-timeout", type=float, default=3600, help="seconds a request waits for its answer (default 3600)"
    )
    parser.add_argument("--cell-timeout", type=float, default=6 * 3600, help="seconds one cell may run (default 6 h)")
    parser.add_argument(
        "--full-history", action="store_true", help="readable requests show every message, not only the new ones"
    )
    parser.add_argument(
        "--frontend",
        action="store_true",
        help="run every task from a page with harness_nb's extension, a person deciding as its person.yaml says "
        "(default: only the tasks that have a person.yaml)",
    )
    args = parser.parse_args(argv)
    tasks = chosen_tasks(args.tasks_dir, [w.strip() for w in args.tasks.split(",") if w.strip()])
    (args.out / "requests").mkdir(parents=True, exist_ok=True)
    print(f"{len(tasks)} task(s); the answerer reads {args.out / 'requests'} (NOW names the running task)", flush=True)
    records = [run_task(task, args.out, args) for task in tasks]
    (args.out / "requests" / "NOW").write_text("(all tasks finished)\n", encoding="utf-8")
    return 0 if all(r["ended"] == "completed" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
