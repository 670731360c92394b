"""``%skills``: the Agent Skills the main agent can load, and what is wrong with each.

    %skills            name, source (project or user), description, problems
    %skills NAME       one skill: its folder, fields, problems and instructions
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ...skills.catalog import Skill, SkillCatalog
from ..controller import NotebookHarness
from ..widgets.reply import MarkdownText
from .agent import Table

_DESCRIPTION_SHOWN = 120


@magics_class
class SkillMagics(Magics):
    """The ``%skills`` magic."""

    def __init__(self, shell: Any, controller: NotebookHarness) -> None:
        super().__init__(shell)
        self.controller = controller

    @magic_arguments()
    @argument("name", nargs="?", default=None, help="show this skill in full")
    @line_magic
    def skills(self, line: str) -> None:
        """List the skills of the skill folders (re-read when they changed): name, source,
        description and problems; ``%skills NAME`` shows one in full."""
        args = parse_argstring(self.skills, line)
        catalog = self.controller.harness().skill_catalog
        catalog.refresh()
        if args.name is None:
            display(SkillTable(catalog))
            return
        found = [s for s in catalog.skills() if s.name == args.name]
        if not found:
            names = ", ".join(s.name for s in catalog.skills()) or "(none)"
            raise UsageError(f"no skill named {args.name!r}; skills: {names}")
        display(MarkdownText(skill_details(found[0], catalog)))


class SkillTable(Table):
    """``%skills`` output: one row per skill found, in the order the first of a name wins
    (project before user); the problems column says why one is not offered to the model."""

    def __init__(self, catalog: SkillCatalog) -> None:
        rows = [
            (s.name, s.source, _short(s.description), "; ".join(_problems(s, catalog)) or "—")
            for s in catalog.skills()
        ]
        footer = "; ".join(catalog.notes)
        if not rows:
            footer = "; ".join(filter(None, [catalog.where(), footer]))
        super().__init__(("skill", "source", "description", "problems"), rows, empty="no skills found", footer=footer)


def _problems(skill: Skill, catalog: SkillCatalog) -> list[str]:
    """What ``%skills`` says is wrong with ``skill``, the reason it is not offered first."""
    out = []
    if skill.refused is not None:
        out.append(f"not used: {skill.refused}")
    if skill.shadowed_by is not None:
        out.append(f"not used: shadowed by {catalog.shown(skill.shadowed_by)}")
    if not skill.model_invocable:
        out.append("disable-model-invocation: not offered to the model (it can be preloaded)")
    out.extend(skill.problems)
    return out


def skill_details(skill: Skill, catalog: SkillCatalog) -> str:
    """``%skills NAME``: the skill's folder, fields, problems and instructions."""
    fields = [
        f"**{skill.name}** · {skill.source} · `{catalog.shown(skill.folder)}`",
        skill.description or "(no description)",
    ]
    for label, value in (("license", skill.license), ("compatibility", skill.compatibility)):
        if value:
            fields.append(f"{label}: {value}")
    if skill.allowed_tools:
        fields.append(f"allowed-tools: {' '.join(skill.allowed_tools)} (shown only: harness_nb pre-approves no tool)")
    if skill.metadata:
        fields.append("metadata: " + ", ".join(f"{k}={v}" for k, v in skill.metadata.items()))
    problems = _problems(skill, catalog)
    if problems:
        fields.append("problems:\n\n" + "\n".join(f"- {p}" for p in problems))
    if skill.body:
        fields.append(skill.body)
    return "\n\n".join(fields)


def _short(text: str) -> str:
    return text if len(text) <= _DESCRIPTION_SHOWN else text[: _DESCRIPTION_SHOWN - 1].rstrip() + "…"
