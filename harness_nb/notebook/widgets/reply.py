"""What a run gives back to the notebook: ``AgentReply``, a ``str`` (the final answer)
that also carries the usage and the whole ``RunResult``, and renders as Markdown.
``MarkdownText`` is the same without the extras, for other Markdown the magics show."""

from __future__ import annotations

from typing import Any

from ...core import Usage


class MarkdownText(str):
    """Text displayed as Markdown whose ``text/plain`` form is the text itself (what nbval
    compares and a terminal shows), not ``<IPython.core.display.Markdown object>``."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self) -> str:
        return str(self)


class AgentReply(MarkdownText):
    """The final answer of a run. ``reply.usage``, ``reply.result`` (the ``RunResult`` or
    ``None``), ``reply.task_id`` (for background and subagent runs)."""

    usage: Usage
    result: Any
    task_id: str | None

    def __new__(cls, text: str, *, usage: Usage | None = None, result: Any = None, task_id: str | None = None) -> AgentReply:
        self = super().__new__(cls, text)
        self.usage = usage or Usage()
        self.result = result
        self.task_id = task_id
        return self

    @property
    def text(self) -> str:
        return str(self)
