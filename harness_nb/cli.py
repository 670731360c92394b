"""``python -m harness_nb``: run the main agent or a subagent from a terminal.

    python -m harness_nb run "Summarise data.csv" --model openai/gpt-4o-mini
    python -m harness_nb run "…" --agent explore
    python -m harness_nb demo            # offline, on the shipped scripted model
    python -m harness_nb agents          # list the registered subagents

Approvals are asked on the terminal (``y`` approves; ``--yes`` approves everything), and so
are the questions of ``ask_person`` (a number picks an option, or type the answer).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from importlib import resources
from pathlib import Path

from .core import HarnessError
from .harness import Harness
from .textview import TextView, terminal_approval, terminal_ask


def demo_script() -> Path:
    """The scripted model the demo runs on (shipped inside the package)."""
    return Path(str(resources.files("harness_nb") / "demo" / "demo.yaml"))


async def _run(args: argparse.Namespace) -> int:
    model = args.model
    workdir = Path(args.workdir)
    prompt = args.prompt
    if args.command == "demo":
        model = f"scripted/{demo_script()}"
        prompt = "Find where the dataset is loaded and summarise the columns."
        workdir = Path(str(resources.files("harness_nb") / "demo" / "project"))
    approval = terminal_approval(auto_yes=args.yes)
    async with Harness(model, workdir=workdir, approval=approval, ask=terminal_ask(), transcripts=args.command != "demo") as h:
        if args.command == "agents":
            for d in h.registry.list():
                tools = ", ".join(d.tools) if d.tools is not None else "(all)"
                print(f"{d.name:20} {d.source}\n    {' '.join(d.description.split())[:100]}\n    tools: {tools}")
            for w in h.registry.warnings:
                print(f"warning: {w}")
            return 0
        view = TextView()
        print(f"▶ {prompt}")
        if args.agent:
            result = await h.run_subagent(args.agent, prompt, on_event=view)
        else:
            result = await h.run(prompt, on_event=view)
        if args.command == "demo":
            print("\n── transcript ──")
            for m in result.messages:
                print(f"[{m.role}] {getattr(m, 'content', '')[:200]}")
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness_nb", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["run", "demo", "agents"])
    parser.add_argument("prompt", nargs="?", default="")
    parser.add_argument("--model", default=None, help="provider/model (default: $HARNESS_NB_MODEL)")
    parser.add_argument("--workdir", default=".")
    parser.add_argument("--agent", default=None, help="run this subagent directly")
    parser.add_argument("--yes", action="store_true", help="approve every tool call that asks")
    args = parser.parse_args(argv)
    if args.command == "run" and not args.prompt:
        parser.error("run needs a prompt")
    try:
        return asyncio.run(_run(args))
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
