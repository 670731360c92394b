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

from .core import HarnessError, SettingFix
from .harness import Harness
from .settings import default_model
from .textview import TextView, terminal_approval, terminal_ask


def demo_script() -> Path:
    """The scripted model the demo runs on (shipped inside the package)."""
    return Path(str(resources.files("harness_nb") / "demo" / "demo.yaml"))


_FLAGS = {"model": "--model", "workdir": "--workdir"}


def command_line_fix(fix: SettingFix) -> str:
    """How the command line sets the setting an error's ``fix`` names: its flag (``pass
    --model openai/gpt-4o-mini``), else the Python keyword, saying no flag sets it."""
    flag = _FLAGS.get(fix.setting)
    if flag is None:
        return f"{fix.keyword()} (no flag of python -m harness_nb sets {fix.setting})"
    return f"pass {flag} {fix.value}"


def _line(text: str, width: int) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis when longer than ``width``."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 1].rsplit(" ", 1)[0] if " " in flat[: width - 1] else flat[: width - 1]
    return cut.rstrip(" ,.;:") + "…"


async def _run(args: argparse.Namespace) -> int:
    model = args.model
    workdir = Path(args.workdir)
    prompt = getattr(args, "prompt", "")
    agent = getattr(args, "agent", None)
    if args.command == "demo":
        model = f"scripted/{demo_script()}"
        prompt = "Find where the dataset is loaded and summarise the columns."
        workdir = Path(str(resources.files("harness_nb") / "demo" / "project"))
    approval = terminal_approval(auto_yes=getattr(args, "yes", False))
    async with Harness(model, workdir=workdir, approval=approval, ask=terminal_ask(), transcripts=args.command != "demo") as h:
        if args.command == "agents":
            for d in h.registry.list():
                tools = ", ".join(d.tools) if d.tools is not None else "(all)"
                print(f"{d.name:20} {d.source}\n    {_line(d.description, 100)}\n    tools: {tools}")
            for w in h.registry.warnings:
                print(f"warning: {w}")
            return 0
        view = TextView()
        print(f"▶ {prompt}")
        if agent:
            result = await h.run_subagent(agent, prompt, on_event=view)
        else:
            result = await h.run(prompt, on_event=view)
        if args.command == "demo":
            print("\n── transcript ──")
            for m in result.messages:
                print(f"[{m.role}] {getattr(m, 'content', '') or ''}".rstrip())
        return 0


def parser() -> argparse.ArgumentParser:
    """The command line: ``run``, ``demo`` and ``agents``, each with its own help."""
    top = argparse.ArgumentParser(
        prog="python -m harness_nb",
        description="Run harness_nb's main agent or a subagent from a terminal.",
        epilog="Approvals (y approves) and the agent's questions are asked on the terminal. In a notebook: "
        "%load_ext harness_nb.",
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="{run,demo,agents}")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--model", default=None, help="provider/model, e.g. openai/gpt-4o-mini (default: $HARNESS_NB_MODEL)")
    where.add_argument("--workdir", default=".", help="the folder the agent works in (default: the current one)")
    run = commands.add_parser(
        "run", parents=[where], help="run the main agent (or --agent NAME) on a prompt",
        description="Run the main agent, or one subagent with --agent, on PROMPT.",
    )
    run.add_argument("prompt", help="what to do, in quotes")
    run.add_argument("--agent", default=None, help="run this subagent directly (see: agents)")
    run.add_argument("--yes", action="store_true", help="approve every tool call that asks")
    commands.add_parser(
        "demo", help="a run offline on the shipped scripted model (no key, no cost)",
        description="Run the main agent offline on the shipped scripted model over a small project.",
    )
    commands.add_parser(
        "agents", parents=[where], help="list the subagents: name, file, description, tools",
        description="List the subagents the workdir and your own agent folders define.",
    )
    return top


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.command == "run":
        if not args.prompt.strip():
            cli.error("run needs a prompt, e.g. python -m harness_nb run \"summarise data.csv\"")
        if args.model is None and default_model() is None:
            cli.error(
                "no model: pass --model provider/model (openai/…, anthropic/…, ollama/…, openai-compatible/…) "
                "or set HARNESS_NB_MODEL; offline: --model scripted/<script.yaml>"
            )
    if args.command == "demo":
        args.model, args.workdir = None, "."
    try:
        return asyncio.run(_run(args))
    except HarnessError as exc:
        print(f"error: {exc.explained(command_line_fix)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
