"""What the person reads where the model reads a machine form: a task result, a background
completion, a teammate's message, a denial — one plain line each ("bg-1 finished: …",
"alice reported: …", "Denied by you: …").

The forms themselves are made (and read back) next to their makers: ``subagents.render``
for tasks, ``team.protocol`` for teammates. Only views use these lines; the model's text is
never changed.
"""

from __future__ import annotations

from ...subagents.render import TaskForm, read_task_forms
from ...team.protocol import read_envelope, read_started
from ...textview import preview

_STATE_WORDS = {"completed": "finished", "error": "failed", "failed": "failed", "cancelled": "was cancelled"}
_PERSON_DENIED = "error: the person denied this call"
_POLICY_DENIED = "error: the call was denied"
_REASON = 'Their reason: "'


def _task_line(form: TaskForm, width: int) -> str:
    agent = form.attributes.get("agent")
    who = f"{form.id} ({agent})" if agent and form.completed_block else form.id or "the task"
    if form.state == "running":
        if "elapsed" in form.attributes:
            last = form.body.removeprefix("last: ")
            figures = f"{form.attributes['elapsed'].removesuffix('s')} s · {int(form.attributes.get('tokens', 0) or 0):,} tokens"
            return preview(f"{who} is still running · {figures} · last: {last}", width)
        return f"{who} started in the background"
    verb = _STATE_WORDS.get(form.state, form.state)
    line = f"{who} {verb}: {form.body}" if form.body else f"{who} {verb}"
    if form.denials:
        line += f" (you denied {len(form.denials)} of its calls)"
    return preview(line, width)


def denial_words(by_person: bool, feedback: str) -> str:
    """How a denial reads: ``Denied by you: <reason>``, ``Denied by you``, or ``Denied:
    <why>`` for a policy's (timeout, unattended, background)."""
    if by_person:
        return f"Denied by you: {feedback}" if feedback else "Denied by you"
    return f"Denied: {feedback}" if feedback else "Denied"


def plain_result(result: str, width: int = 100) -> str:
    """One line for a tool result, worded for the person when it is one of the machine
    forms (else its first line)."""
    text = result.strip()
    forms = read_task_forms(text) if text.startswith(("<task", "<background-task-completed")) else []
    if forms:
        lines = [_task_line(f, width) for f in forms]
        return lines[0] if len(lines) == 1 else preview(f"{len(lines)} tasks: " + "; ".join(lines), width)
    teammate = read_started(text)
    if teammate is not None:
        task_id, name, team = teammate
        return f"{name} started as a teammate ({task_id}, team {team})"
    if text.startswith(_PERSON_DENIED):
        reason = text.partition(_REASON)[2].partition('". Do not retry')[0] if _REASON in text else ""
        return preview(denial_words(True, reason), width)
    if text.startswith(_POLICY_DENIED):
        why = text.removeprefix(_POLICY_DENIED).removeprefix(": ").partition(". Do not retry it unchanged")[0]
        return preview(denial_words(False, why.rstrip(".")), width)
    return preview(text, width)


def plain_body(result: str) -> str:
    """A tool result in full, as the person reads it: a task's own text without its
    wrapping, a recognised form as its plain line, anything else as it is."""
    text = result.strip()
    if text.startswith("<task"):
        forms = read_task_forms(text)
        if forms:
            return "\n\n".join(f"{_task_line(f, 100)}\n{f.body}".rstrip() if f.body else _task_line(f, 100) for f in forms)
    if text.startswith(("<teammate ", _PERSON_DENIED, _POLICY_DENIED)):
        return plain_result(text, 500)
    return result


def plain_injected(text: str, width: int = 140) -> str:
    """One line for text put into the conversation before a model call: a finished
    background task, a teammate's message (else the text's first line)."""
    envelope = read_envelope(text)
    if envelope is not None:
        sender, kind, body = envelope
        verb = {"idle_notification": "reported", "shutdown_response": "answered the shutdown request"}.get(kind, "wrote")
        return preview(f"{sender} {verb}: {' '.join(body.split())}", width)
    forms = read_task_forms(text) if text.lstrip().startswith("<background-task-completed") else []
    if forms:
        return "; ".join(_task_line(f, width) for f in forms)
    return preview(text, width)
