"""How task results read to the model: every ``<task …>`` form in one place.

    <task id="fg-1" state="completed"><task_result>…</task_result></task>
    <task id="fg-2" state="error">…</task>            (also state="cancelled")
    <task id="bg-1" state="running"/>
    <task id="bg-1" agent="explore" state="running" elapsed="2.0s" tokens="812">last: …</task>
    <background-task-completed id="bg-1" agent="explore" status="completed">…</background-task-completed>

The forms follow the seed articles. What a finished task says is ``TaskEntry.outcome``:
its result when it completed, else its error. When the person denied some of its calls, a
``<denied_by_person>`` block follows, one line per call with their reason
(``TaskEntry.denials``), so the parent knows even if the subagent's report glosses over it:

    <task id="fg-1" state="completed"><task_result>…</task_result>
    <denied_by_person>the person denied bash(command='rm -rf data'): keep the raw data</denied_by_person></task>
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tracker import TaskEntry

# A task's status as a ``state`` attribute: a failure reads "error" to the model.
_STATES = {"completed": "completed", "failed": "error", "cancelled": "cancelled", "running": "running"}


def task_state(status: str) -> str:
    """The ``state`` word for a task status."""
    return _STATES.get(str(status), str(status))


def task_result(task_id: str, state: str, body: str, *, denials: Sequence[str] = (), **attributes: str) -> str:
    """``<task id=… state=…>``: a completed task's body is wrapped in ``<task_result>``;
    ``denials`` (calls the person denied) follow it."""
    extra = "".join(f' {k}="{v}"' for k, v in attributes.items())
    head = f'<task id="{task_id}" state="{state}"{extra}>' if task_id else f'<task state="{state}"{extra}>'
    if state == "completed":
        return f"{head}<task_result>{body}</task_result>{denied_block(denials)}</task>"
    return f"{head}{body}{denied_block(denials)}</task>"


def denied_block(denials: Sequence[str]) -> str:
    """``<denied_by_person>`` with one line per denied call, on a line of its own (empty
    when there were none)."""
    if not denials:
        return ""
    lines = "\n".join(denials)
    return f"\n<denied_by_person>{lines}</denied_by_person>"


def finished_task(entry: TaskEntry) -> str:
    """A finished task as its result form (what ``task`` and ``task_output`` return)."""
    return task_result(entry.id, task_state(entry.status), entry.outcome, denials=entry.denials)


def running_task(task_id: str) -> str:
    """What a background launch returns at once."""
    return f'<task id="{task_id}" state="running"/>'


def task_snapshot(entry: TaskEntry) -> str:
    """A running task's status (what ``task_output`` returns while it runs)."""
    last = entry.log[-1] if entry.log else "no progress yet"
    return (
        f'<task id="{entry.id}" agent="{entry.agent}" state="{task_state(entry.status)}" '
        f'elapsed="{entry.elapsed:.1f}s" tokens="{entry.usage.total_tokens}">last: {last}</task>'
    )


def background_completed(entry: TaskEntry) -> str:
    """The block injected into the main agent's prompt when a background task has ended."""
    return (
        f'<background-task-completed id="{entry.id}" agent="{entry.agent}" status="{entry.status}">'
        f"{entry.outcome}{denied_block(entry.denials)}</background-task-completed>"
    )


@dataclass(frozen=True)
class TaskForm:
    """One ``<task …>`` or ``<background-task-completed …>`` form read back: its
    attributes and body (``<task_result>`` unwrapped; ``denials`` the lines of its
    ``<denied_by_person>`` block). For views that show a person what the model was told."""

    attributes: dict[str, str]
    body: str = ""
    denials: tuple[str, ...] = ()
    completed_block: bool = False  # a <background-task-completed> block

    @property
    def id(self) -> str:
        return self.attributes.get("id", "")

    @property
    def state(self) -> str:
        return self.attributes.get("state") or self.attributes.get("status", "")


_FORM = re.compile(
    r"<(?P<tag>task|background-task-completed)(?P<attrs>(?:\s+[\w-]+=\"[^\"]*\")*)\s*"
    r"(?:/>|>(?P<body>.*?)</(?P=tag)>)",
    re.DOTALL,
)
_ATTR = re.compile(r'([\w-]+)="([^"]*)"')
_RESULT = re.compile(r"^<task_result>(.*)</task_result>", re.DOTALL)
_DENIED = re.compile(r"\s*<denied_by_person>(.*?)</denied_by_person>\s*$", re.DOTALL)


def read_task_forms(text: str) -> list[TaskForm]:
    """Every task form in ``text``, in order (none: it is not one of ours)."""
    forms = []
    for match in _FORM.finditer(text):
        body = match.group("body") or ""
        denials: tuple[str, ...] = ()
        denied = _DENIED.search(body)
        if denied:
            denials = tuple(line for line in denied.group(1).splitlines() if line.strip())
            body = body[: denied.start()]
        result = _RESULT.match(body)
        if result:
            body = result.group(1)
        attributes = dict(_ATTR.findall(match.group("attrs")))
        forms.append(TaskForm(attributes, body.strip(), denials, match.group("tag") != "task"))
    return forms
