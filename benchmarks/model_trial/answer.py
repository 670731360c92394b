"""The answerer's two commands: find the requests waiting, and send an answer checked first.

    python answer.py next DIR [--wait SECONDS]
        The readable files (req-NNNN.txt) of the requests waiting for an answer in DIR or
        in its task folders (DIR/*/), oldest first; waits up to --wait seconds (default
        600) for one to appear. Exit status 1 when none came (it then prints what
        DIR/NOW says: the task running, or that all have finished).

    python answer.py send DIR/req-NNNN [ANSWER.json]
        Check an answer (from the file, or standard input) against that request's tools, as
        the relay will, and write it as DIR/resp-NNNN.json atomically. A bad answer is not
        written: what is wrong goes to standard error, exit status 1.

The answer's form: {"content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from exchange import check_answer, tool_names, tools_of

POLL = 0.5


def waiting(root: Path) -> list[Path]:
    """The readable files of the requests under ``root`` (itself and its subfolders) that
    still wait: no answer sent (none, or one refused since), not closed, and their task not
    ``FINISHED`` (a request cut off as its task ended may not have been closed)."""
    found = []
    for txt in sorted(root.glob("req-*.txt")) + sorted(root.glob("*/req-*.txt")):
        if not re.fullmatch(r"req-\d+\.txt", txt.name) or txt.with_name("FINISHED").exists():
            continue
        stem = txt.name[: -len(".txt")]
        number = stem[len("req-") :]
        answer, error = txt.with_name(f"resp-{number}.json"), txt.with_name(f"resp-{number}.error")
        if txt.with_name(f"{stem}.closed").exists():
            continue
        if answer.exists() and not (error.exists() and error.stat().st_mtime_ns >= answer.stat().st_mtime_ns):
            continue
        found.append(txt)
    return sorted(found, key=lambda p: p.stat().st_mtime_ns)


def send(request: Path, text: str) -> list[str]:
    """Check ``text`` as the answer to ``request`` (``DIR/req-NNNN`` with or without a
    suffix) and write it as its ``resp-NNNN.json``; return the problems (nothing written)."""
    match = re.fullmatch(r"req-(\d+)(\.\w+)?", request.name)
    if not match:
        return [f"{request.name}: give a request as DIR/req-NNNN"]
    body_path = request.with_name(f"req-{match.group(1)}.json")
    try:
        body = json.loads(body_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"cannot read {body_path}: {exc}"]
    try:
        answer = json.loads(text)
    except ValueError as exc:
        return [f"not valid JSON: {exc}"]
    problems = check_answer(answer, tool_names(tools_of(body)), body.get("tool_choice"))
    if problems:
        return problems
    closed = request.with_name(f"req-{match.group(1)}.closed")
    if closed.exists():
        return [f"req-{match.group(1)} has ended without an answer: {closed.read_text(encoding='utf-8').strip()}"]
    target = request.with_name(f"resp-{match.group(1)}.json")
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(answer, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, target)
    return []


def main(argv: Sequence[str] | None = None) -> int:
    """Run one of the two commands."""
    parser = argparse.ArgumentParser(description="Find waiting requests; send checked answers.")
    commands = parser.add_subparsers(dest="command", required=True)
    find = commands.add_parser("next", help="list the requests waiting for an answer")
    find.add_argument("dir", type=Path)
    find.add_argument("--wait", type=float, default=600, help="seconds to wait for one (default 600)")
    answer = commands.add_parser("send", help="check an answer and write it")
    answer.add_argument("request", type=Path, help="DIR/req-NNNN")
    answer.add_argument("file", nargs="?", type=Path, help="the answer's JSON (default: standard input)")
    args = parser.parse_args(argv)
    if args.command == "next":
        deadline = time.monotonic() + args.wait
        while True:
            found = waiting(args.dir)
            if found:
                print("\n".join(map(str, found)))
                return 0
            if time.monotonic() >= deadline:
                now = args.dir / "NOW"
                running = f" (NOW: {now.read_text(encoding='utf-8').strip()})" if now.is_file() else ""
                print(f"no request waiting under {args.dir}{running}", file=sys.stderr)
                return 1
            time.sleep(POLL)
    text = args.file.read_text(encoding="utf-8") if args.file else sys.stdin.read()
    problems = send(args.request, text)
    for problem in problems:
        print(f"not sent: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
