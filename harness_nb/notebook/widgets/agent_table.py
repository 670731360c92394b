"""``%agents``' table: each agent's effective tools, model, and what its file sets or
ignores (``agent_row``), as plain text (stable: nbval compares it) and HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.usage import usd
from ...providers.effort import effort_note
from ...subagents import SubAgentDefinition, describe_model, resolve_model, resolve_tools
from ...subagents.memory import MEMORY_FILE, memory_folder
from ...subagents.narrowing import effective_mode, memory_only_writes
from .theme import STYLE, agent_name, css_color, table


def shown_source(source: str, workdir: Path) -> str:
    """An agent file's path as the person knows it: relative to the working directory when
    inside it, ``~/…`` under the home folder, else as found (``../agents/x.md``, ``builtin``).
    Also keeps a saved notebook's ``%agents`` output the same on every machine."""
    path = Path(source)
    if not path.is_absolute():
        return source
    for base, prefix in ((workdir, ""), (Path.home(), "~/")):
        if path.is_relative_to(base):
            return prefix + path.relative_to(base).as_posix()
    return source


@dataclass(frozen=True)
class AgentRow:
    """One agent as ``%agents`` shows it. ``tools`` are its effective tools (narrowed
    against the main agent's current ones); ``notes`` the lines under it: its mode, run
    mode, memory, effort, colour, and the fields it does not act on."""

    name: str
    description: str
    source: str
    tools: str
    model: str
    budget: str
    color: str | None
    notes: tuple[tuple[str, str], ...]


def agent_row(definition: SubAgentDefinition, harness: Any) -> AgentRow:
    """How ``%agents`` shows ``definition`` under ``harness`` as it is configured now: its
    tools among those the main agent is offered now (``Tool.usable``: the notebook tools
    only in a page with the extension)."""
    d = definition
    workdir = Path(harness.workdir)
    tools = resolve_tools(d, [t for t in harness.tools if t.usable()])
    shown = ", ".join(tools) or "(none)"
    if d.tools is None:
        shown = f"(all of the main agent's) {shown}"
    if memory_only_writes(d):
        shown += " (write_file, edit_file: its memory only)"
    notes: list[tuple[str, str]] = []
    mode, why = effective_mode(d, allow_bypass=harness.settings.subagents.allow_bypass_permissions)
    if d.permission_mode:
        notes.append(("mode", d.permission_mode if why is None else f"{d.permission_mode} → {mode}: {why}"))
    if d.background:
        notes.append(("runs", "in the background unless told otherwise"))
    if d.memory:
        folder = memory_folder(d.memory, d.name, workdir=workdir, home=Path.home())
        notes.append(("memory", f"{d.memory}, {shown_source(str(folder / MEMORY_FILE), workdir)}"))
    main = harness.model
    if d.effort:
        model = resolve_model(d.model, main) if main else None
        notes.append(("effort", (effort_note(model, d.effort) if model else None) or f"{d.effort} (no model configured)"))
    if d.color:
        notes.append(("color", d.color))
    if d.unsupported():
        notes.append(("not supported here", ", ".join(d.unsupported())))
    ignored = [f"{', '.join(d.delegation)} in tools (subagents never delegate)"] if d.delegation else []
    if d.extra:
        ignored.append("unknown keys " + ", ".join(sorted(d.extra)))
    if ignored:
        notes.append(("ignored", "; ".join(ignored)))
    budget = f"{usd(d.max_budget_usd)} a run" if d.max_budget_usd is not None else ""
    if budget:
        notes.insert(0, ("budget", budget))
    source = shown_source(str(d.source), workdir)
    return AgentRow(d.name, d.description, source, shown, describe_model(d, main), budget, css_color(d.color), tuple(notes))


class AgentTable:
    """``%agents`` output: an HTML table and a plain-text listing (``agent_row`` for each
    agent), then the warnings: agent files that could not be (fully) loaded, and ``bash``
    running unsandboxed."""

    def __init__(self, harness: Any) -> None:
        self.rows = [agent_row(d, harness) for d in harness.registry.list()]
        self.warnings = list(harness.registry.warnings)
        if not harness.sandbox.active:
            self.warnings.append(harness.sandbox.describe())

    def __repr__(self) -> str:
        lines = []
        for r in self.rows:
            lines.append(f"{r.name}  [{r.source}]\n    tools: {r.tools}\n    model: {r.model}")
            lines.extend(f"    {label}: {text}" for label, text in r.notes)
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        budgets = any(r.budget for r in self.rows)  # a budget column only when some agent has one

        def name_cell(r: AgentRow) -> str:
            name = agent_name(f"@{r.name}", r.color) if r.color else f"<b>@{html.escape(r.name)}</b>"
            about = f"<br><span style='opacity:.8'>{html.escape(r.description)}</span>" if r.description else ""
            return f"{name}{about}"

        def notes_cell(r: AgentRow) -> str:
            notes = [f"{label}: {text}" for label, text in r.notes if label != "budget"]
            return "<br>".join(html.escape(n) for n in notes)

        rows = [
            [name_cell(r), f"<code>{html.escape(r.source)}</code>", html.escape(r.tools), html.escape(r.model)]
            + ([html.escape(r.budget)] if budgets else [])
            + [notes_cell(r)]
            for r in self.rows
        ]
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        warn_html = f"<p><b>Warnings:</b></p><ul>{warn}</ul>" if warn else ""
        head = ["agent", "source", "tools", "model"] + (["budget"] if budgets else []) + ["notes"]
        # in the views' style sheet: an agent's colour is lightened in a dark theme there
        return f"<div class='hnb'>{STYLE}{table(head, rows)}{warn_html}</div>"
