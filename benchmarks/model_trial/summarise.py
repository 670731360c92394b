"""Summarise a model trial's requests, per task and overall, as a Markdown table.

    python benchmarks/model_trial/summarise.py RUN            # RUN: run_trial.py's --out
    python benchmarks/model_trial/summarise.py RUN --json     # the same figures as JSON
    python benchmarks/model_trial/summarise.py RUN --requests # and a line per request
    python benchmarks/model_trial/summarise.py --compare BEFORE AFTER

RUN is a trial's folder (its ``requests/<task>/`` folders, and ``results/<task>/verdict.md``
where someone has judged the task) or one relay folder. Per task:

- requests (model calls), how many ended unanswered (timeout, stopped, client gone), and
  answers the relay refused as malformed;
- conversations, and turns (answered requests) of main agents and of subagents;
- tool calls by tool (from the answers), and tool errors: results that start with
  ``error:``, each call counted once however often later requests repeat it;
- request bytes: the first request (the main agent's first, when there is one), the
  largest, the total; the ``tools`` and the system prompt of that first request, and their
  largest;
- per request (``--requests``, and always in ``--json``): its conversation and role, its
  bytes, the bytes and number of its ``tools`` and the bytes of its system prompt — where
  the schemas re-sent on every call weigh, request by request;
- the verdict: the first line of ``results/<task>/verdict.md`` (``right``, ``partly``,
  ``wrong``), if written.

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conversation import Conversations, first_line
from exchange import Sizes, call_names, messages_of, system_text, text_of, tools_of

_REQUEST = re.compile(r"req-(\d+)\.json")


@dataclass
class TaskSummary:
    """The figures of one task's requests."""

    task: str
    verdict: str = ""
    requests: int = 0
    unanswered: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    conversations: int = 0
    main_turns: int = 0
    sub_turns: int = 0
    tool_calls: dict[str, int] = field(default_factory=dict)
    tool_errors: dict[str, int] = field(default_factory=dict)
    first_bytes: int = 0
    max_bytes: int = 0
    total_bytes: int = 0
    first_tools_bytes: int = 0
    max_tools_bytes: int = 0
    first_system_bytes: int = 0
    max_system_bytes: int = 0
    per_request: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(self.tool_calls.values())

    @property
    def errors(self) -> int:
        return sum(self.tool_errors.values())


def _index(folder: Path, numbers: list[int]) -> dict[int, dict[str, Any]]:
    """The relay's ``requests.jsonl`` by request number; for a folder without one, the
    same worked out again from the request files (conversations as the relay tells them,
    less the knowledge of which requests waited at the same time)."""
    index_file = folder / "requests.jsonl"
    if index_file.is_file():
        lines = index_file.read_text(encoding="utf-8").splitlines()
        return {row["n"]: row for row in (json.loads(line) for line in lines if line.strip())}
    conversations, rows = Conversations(), {}
    for n in numbers:
        raw = (folder / f"req-{n:04d}.json").read_bytes()
        body = json.loads(raw)
        placed = conversations.place(n, body)
        placed.conversation.waiting = False
        sizes = Sizes.of(body, raw)
        c = placed.conversation
        rows[n] = {
            "n": n,
            "conversation": c.id,
            "role": c.role,
            "agent": first_line(system_text(messages_of(body))),
            "bytes": sizes.request,
            "tools_bytes": sizes.tools,
            "system_bytes": sizes.system,
            "tools": len(tools_of(body) or []),
        }
    return rows


def _outcomes(folder: Path) -> tuple[dict[int, str], int]:
    """How each request ended (from ``timing.log``), and the answers refused."""
    ended, refused = {}, 0
    log = folder / "timing.log"
    for line in log.read_text(encoding="utf-8").splitlines() if log.is_file() else []:
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0].startswith("req-"):
            ended[int(fields[0][4:])] = fields[2]
            refused += (
                int(fields[4].removeprefix("refused=")) if len(fields) >= 5 and fields[4].startswith("refused=") else 0
            )
    return ended, refused


def summarise_task(folder: Path, name: str, verdict: str = "") -> TaskSummary:
    """The figures of one relay folder."""
    numbers = sorted(int(m.group(1)) for p in folder.glob("req-*.json") if (m := _REQUEST.fullmatch(p.name)))
    s = TaskSummary(name, verdict=verdict, requests=len(numbers))
    if not numbers:
        return s
    index = _index(folder, numbers)
    ended, s.refused = _outcomes(folder)
    s.unanswered = dict(Counter(o for n, o in ended.items() if o != "answered"))
    s.conversations = len({row["conversation"] for row in index.values()})
    for n in numbers:
        if ended.get(n, "answered") == "answered" and (folder / f"resp-{n:04d}.json").is_file():
            if index[n].get("role") == "main agent":
                s.main_turns += 1
            else:
                s.sub_turns += 1
    s.tool_calls = dict(Counter(_called(folder, numbers, ended)).most_common())
    s.tool_errors = dict(Counter(_errors(folder, numbers)).most_common())
    sizes = [(index[n]["bytes"], index[n]["tools_bytes"], index[n]["system_bytes"]) for n in numbers]
    first = next((n for n in numbers if index[n].get("role") == "main agent"), numbers[0])
    s.first_bytes, s.first_tools_bytes, s.first_system_bytes = sizes[numbers.index(first)]
    s.max_bytes = max(b for b, _, _ in sizes)
    s.total_bytes = sum(b for b, _, _ in sizes)
    s.max_tools_bytes = max(t for _, t, _ in sizes)
    s.max_system_bytes = max(y for _, _, y in sizes)
    keys = ("n", "conversation", "role", "bytes", "tools_bytes", "tools", "system_bytes")
    s.per_request = [{key: index[n].get(key) for key in keys} for n in numbers]
    return s


def _called(folder: Path, numbers: Iterable[int], ended: dict[int, str]) -> Iterable[str]:
    """The tool name of every call the answers made."""
    for n in numbers:
        answer = folder / f"resp-{n:04d}.json"
        if ended.get(n, "answered") != "answered" or not answer.is_file():
            continue
        try:
            calls = json.loads(answer.read_text(encoding="utf-8")).get("tool_calls") or []
        except (ValueError, AttributeError):
            continue
        yield from (str(c.get("name")) for c in calls if isinstance(c, dict))


def _errors(folder: Path, numbers: Iterable[int]) -> Iterable[str]:
    """The tool name of every tool result that starts with ``error:``, once per call."""
    seen: set[str] = set()
    for n in numbers:
        messages = messages_of(json.loads((folder / f"req-{n:04d}.json").read_bytes()))
        names = call_names(messages)
        for m in messages:
            if not (isinstance(m, dict) and m.get("role") == "tool"):
                continue
            call_id = str(m.get("tool_call_id"))
            if call_id in seen:
                continue
            seen.add(call_id)
            if text_of(m.get("content")).lstrip().startswith("error:"):
                yield names.get(call_id, "?")


def summarise_run(run: Path) -> list[TaskSummary]:
    """Every task of a trial folder (or the one relay folder ``run`` is)."""
    if any(run.glob("req-*.json")):
        return [summarise_task(run, run.name)]
    summaries = []
    for folder in sorted(p for p in (run / "requests").glob("*") if p.is_dir()):
        verdict_file = run / "results" / folder.name / "verdict.md"
        verdict = verdict_file.read_text(encoding="utf-8").strip().splitlines()[0] if verdict_file.is_file() else ""
        summaries.append(summarise_task(folder, folder.name, verdict.strip()))
    return summaries


def overall(summaries: Sequence[TaskSummary]) -> TaskSummary:
    """All tasks together: counts and totals added, largest sizes the largest, first sizes
    the largest first request of any task."""
    total = TaskSummary("**all**")  # no per-request lines: each task has its own
    for s in summaries:
        total.requests += s.requests
        total.refused += s.refused
        total.conversations += s.conversations
        total.main_turns += s.main_turns
        total.sub_turns += s.sub_turns
        total.total_bytes += s.total_bytes
        for mine, theirs in (
            (total.unanswered, s.unanswered),
            (total.tool_calls, s.tool_calls),
            (total.tool_errors, s.tool_errors),
        ):
            for key, value in theirs.items():
                mine[key] = mine.get(key, 0) + value
        for name in (
            "first_bytes",
            "max_bytes",
            "first_tools_bytes",
            "max_tools_bytes",
            "first_system_bytes",
            "max_system_bytes",
        ):
            setattr(total, name, max(getattr(total, name), getattr(s, name)))
    total.tool_calls = dict(sorted(total.tool_calls.items(), key=lambda kv: -kv[1]))
    return total


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "–"


COLUMNS = (
    "task",
    "verdict",
    "requests",
    "unanswered",
    "refused",
    "conv.",
    "turns main/sub",
    "tool calls",
    "tool errors",
    "first req B",
    "max req B",
    "total KB",
    "tools B",
    "system B",
)


def row(s: TaskSummary) -> list[str]:
    """A task's cells, in ``COLUMNS`` order."""
    return [
        s.task,
        s.verdict or "–",
        str(s.requests),
        str(sum(s.unanswered.values())),
        str(s.refused),
        str(s.conversations),
        f"{s.main_turns}/{s.sub_turns}",
        str(s.calls),
        str(s.errors),
        f"{s.first_bytes:,}",
        f"{s.max_bytes:,}",
        f"{s.total_bytes / 1000:,.1f}",
        f"{s.first_tools_bytes:,}"
        + (f" (max {s.max_tools_bytes:,})" if s.max_tools_bytes != s.first_tools_bytes else ""),
        f"{s.first_system_bytes:,}"
        + (f" (max {s.max_system_bytes:,})" if s.max_system_bytes != s.first_system_bytes else ""),
    ]


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def report(summaries: Sequence[TaskSummary]) -> str:
    """The Markdown report of one run."""
    rows = [row(s) for s in [*summaries, overall(summaries)]]
    text = [table(COLUMNS, rows), "", "Tool calls by tool (errors in brackets):", ""]
    for s in [*summaries, overall(summaries)]:
        calls = ", ".join(
            f"{k} {v}" + (f" ({s.tool_errors[k]})" if k in s.tool_errors else "") for k, v in s.tool_calls.items()
        )
        unanswered = f"; unanswered: {_counts(s.unanswered)}" if s.unanswered else ""
        text.append(f"- {s.task}: {calls or '–'}{unanswered}")
    return "\n".join(text) + "\n"


REQUEST_COLUMNS = ("task", "request", "conversation", "role", "bytes", "tools B", "tools", "system B")


def requests_table(summaries: Sequence[TaskSummary]) -> str:
    """A line per request of every task: its sizes, the ``tools`` first."""
    rows = [
        [
            s.task,
            f"req-{r['n']:04d}",
            str(r.get("conversation") or "–"),
            str(r.get("role") or "–"),
            f"{r.get('bytes') or 0:,}",
            f"{r.get('tools_bytes') or 0:,}",
            str(r.get("tools") if r.get("tools") is not None else "–"),
            f"{r.get('system_bytes') or 0:,}",
        ]
        for s in summaries
        for r in s.per_request
    ]
    return table(REQUEST_COLUMNS, rows) + "\n"


def compare(before: Sequence[TaskSummary], after: Sequence[TaskSummary]) -> str:
    """The two runs side by side, ``before → after`` in each cell."""
    old = {s.task: s for s in [*before, overall(before)]}
    new = {s.task: s for s in [*after, overall(after)]}
    names = [s.task for s in before] + [s.task for s in after if s.task not in old] + ["**all**"]
    empty = TaskSummary("")
    rows = []
    for name in names:
        a, b = row(old.get(name, empty)), row(new.get(name, empty))
        rows.append([name] + [x if x == y else f"{x or '–'} → {y or '–'}" for x, y in zip(a[1:], b[1:], strict=True)])
    return table(COLUMNS, rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report, the JSON, or the comparison."""
    parser = argparse.ArgumentParser(description="Summarise a model trial's requests.")
    parser.add_argument("run", type=Path, nargs="?", help="a trial's --out folder, or one relay folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--requests", action="store_true", help="add a line per request (bytes, tools, system)")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="two runs side by side")
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (summarise_run(p) for p in args.compare)
        sys.stdout.write(compare(before, after))
        return 0
    if args.run is None:
        parser.error("give a run folder, or --compare BEFORE AFTER")
    summaries = summarise_run(args.run)
    if args.json:
        data = [asdict(s) for s in [*summaries, overall(summaries)]]
        print(json.dumps(data, indent=1))
    else:
        sys.stdout.write(report(summaries))
        if args.requests:
            sys.stdout.write("\nPer request:\n\n" + requests_table(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
