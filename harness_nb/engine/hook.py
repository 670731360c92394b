"""Hooks around every tool call, and the approval channel.

``before_tool`` returns ``Allow``, ``Deny(reason)`` or ``Ask(reason, risk)``; ``after_tool``
may replace the outcome. ``Ask`` goes to the run's approval channel, an async callable
``(call, reason, risk) -> Approved | Denied``; with no channel the call is denied (fail
closed). Approval is therefore a hook, never an ``if`` inside the loop. The permission hook
that decides (rules, then the allow-list policy) is ``permissions/hook.py``.

A denial reads to the model in one of two ways (``denial_result``): the person said no
(``Denied.by_the_person(reason)``: a card's Deny, ``n …`` at the terminal) — with their
reason verbatim, cleaned by ``person_reason`` — or a policy did (a timeout, a background
subagent, an unattended run, no channel), with the policy's words.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import tempfile
import unicodedata
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from ..core import ApprovalDecided, Event, ToolCall, run_blocking
from ..core.secret import SECRETS, Secrets
from ..tools import ToolContext, ToolOutcome

log = logging.getLogger("harness_nb.engine")

if TYPE_CHECKING:
    from ..permissions.rule import Rule  # type only: see tests/test_layers.py TYPE_ONLY_UPWARD


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call. ``vouched``: the paths only the person may change that the hook let
    it change (a rule the person gave covers that write, or it is a subagent's own memory
    folder), so the checkpoints keep a change to them instead of reverting it — to them
    alone."""

    vouched: frozenset[Path] = frozenset()


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; the model reads ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the person (through the approval channel) before running the call. ``paths``:
    the paths the card names as written (a file tool's target; the protected paths a
    command's text shows, named in ``reason``): an approval lets the call change those of
    them only the person may change, and no other."""

    reason: str
    risk: str = "medium"
    paths: frozenset[Path] = frozenset()


Decision: TypeAlias = Allow | Deny | Ask
ALLOW = Allow()


@dataclass(frozen=True, slots=True)
class Approved:
    """The person approved the call; ``remember``: and every call matching this rule, for
    the rest of the session ("Approve for this session", see ``permission.remembering``)."""

    feedback: str = ""
    remember: Rule | None = None


@dataclass(frozen=True, slots=True)
class Denied:
    """The call was denied; ``feedback`` reaches the model. ``by_person``: the person said
    no, and ``feedback`` is their reason (may be empty; build it with ``by_the_person``);
    otherwise a policy denied it (timeout, background, unattended) and ``feedback`` says
    which."""

    feedback: str = ""
    by_person: bool = False

    @classmethod
    def by_the_person(cls, reason: str = "") -> Denied:
        """The person's own denial, with their typed ``reason`` cleaned (``person_reason``)."""
        return cls(person_reason(reason), by_person=True)


ApprovalChannel: TypeAlias = Callable[[ToolCall, str, str], Awaitable[Approved | Denied]]
RunTool: TypeAlias = Callable[[], Awaitable[ToolOutcome]]
"""Runs the call (with its timeout): what ``around_tool`` wraps."""
NO_CHANNEL_FEEDBACK = "no approval channel: denied"
REASON_LIMIT = 500
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.?)|\x9b[0-?]*[ -/]*[@-~]")


def person_reason(text: str, limit: int = REASON_LIMIT) -> str:
    """A reason the person typed, safe to put in a tool result, a card or a log: terminal
    escape sequences and control or format characters (bidi overrides, zero-width ones)
    removed, whitespace runs (newlines too) made one space, secrets masked, at most
    ``limit`` characters (cut with "…"). Idempotent."""
    text = _ESCAPES.sub("", text)
    text = "".join(" " if c.isspace() else c for c in text if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf"))
    text = SECRETS.scrub(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def denial_result(answer: Denied | None) -> str:
    """The tool result for a denied call (``None``: there was no approval channel). The
    person's denial says so and quotes their reason; a policy's names the policy. Both tell
    the model not to retry the call unchanged."""
    if answer is not None and answer.by_person:
        reason = person_reason(answer.feedback)
        if reason:
            return (
                f'error: the person denied this call. Their reason: "{reason}". Do not retry it '
                "unchanged: take their reason into account."
            )
        return (
            "error: the person denied this call (they gave no reason). Do not retry it unchanged: "
            "do it another way, or ask them what they want."
        )
    feedback = answer.feedback if answer is not None else NO_CHANNEL_FEEDBACK
    why = f": {feedback}" if feedback else ""
    return f"error: the call was denied{why}. Do not retry it unchanged."


async def ask_channel(
    channel: ApprovalChannel | None,
    call: ToolCall,
    reason: str,
    risk: str,
    *,
    emit: Callable[[Event], object],
    agent: str,
    shown: ToolCall | None = None,
) -> str | None:
    """Ask ``channel`` about ``call`` and tell ``emit`` the decision (``ApprovalDecided``);
    ``None`` when approved, else the tool result that says why not (``denial_result``). No
    channel denies (fail closed). ``shown``: the call as the person is shown it, when more
    than its arguments (``notebook_run``: the source of the cell it runs, read as it asks)."""
    answer = None if channel is None else await channel(shown or call, reason, risk)
    approved = isinstance(answer, Approved)
    by_person = isinstance(answer, Denied) and answer.by_person
    feedback = answer.feedback if answer is not None else NO_CHANNEL_FEEDBACK
    feedback = person_reason(feedback) if by_person else feedback
    emit(ApprovalDecided(call=call, approved=approved, feedback=feedback, by_person=by_person, agent=agent))
    return None if approved else denial_result(answer if isinstance(answer, Denied) else None)


def denial_line(call: ToolCall, reason: str) -> str:
    """One line naming a call the person denied, for the run above it (a subagent's
    parent): ``the person denied bash(command='rm -rf data'): keep the raw data``."""
    reason = person_reason(reason)
    return f"the person denied {call.brief(80)}: {reason}" if reason else f"the person denied {call.brief(80)} (no reason given)"


class Hook:
    """Base class: override any method. ``around_tool`` runs right around the call itself,
    once it is allowed (after any approval): ``vouched`` holds the protected paths it may
    change, those the approved card named (``Ask.paths``) or a hook vouched for
    (``Allow.vouched``)."""

    async def before_tool(self, call: ToolCall, ctx: ToolContext) -> Decision:
        return ALLOW

    async def around_tool(
        self, call: ToolCall, ctx: ToolContext, run: RunTool, *, vouched: frozenset[Path]
    ) -> ToolOutcome:
        return await run()

    async def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
        return outcome


class HookRegistry:
    """An ordered list of hooks. For ``before_tool`` the first ``Deny`` wins, then the first
    ``Ask``; ``after_tool`` hooks are applied in order, each seeing the previous outcome."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self.hooks: list[Hook] = list(hooks)

    def add(self, hook: Hook) -> None:
        self.hooks.append(hook)

    def with_hooks(self, *hooks: Hook) -> HookRegistry:
        """A new registry: these hooks plus ``hooks`` (a child's copy; the parent is untouched)."""
        return HookRegistry([*self.hooks, *hooks])

    async def before_tool(self, call: ToolCall, ctx: ToolContext) -> Decision:
        if not self.hooks:
            return ALLOW
        ask: Ask | None = None
        vouched: frozenset[Path] = frozenset()
        for hook in self.hooks:
            decision = await hook.before_tool(call, ctx)
            if isinstance(decision, Deny):
                return decision
            if isinstance(decision, Ask) and ask is None:
                ask = decision
            if isinstance(decision, Allow):
                vouched |= decision.vouched
        if ask is not None:
            return dataclasses.replace(ask, paths=ask.paths | vouched) if vouched else ask
        return Allow(vouched=vouched) if vouched else ALLOW

    async def around_tool(
        self, call: ToolCall, ctx: ToolContext, run: RunTool, *, vouched: frozenset[Path]
    ) -> ToolOutcome:
        """``run`` wrapped by every hook's ``around_tool``, the first hook outermost."""
        for hook in reversed(self.hooks):
            run = functools.partial(hook.around_tool, call, ctx, run, vouched=vouched)
        return await run()

    async def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
        for hook in self.hooks:
            outcome = await hook.after_tool(call, outcome, ctx)
        return outcome

    def __len__(self) -> int:
        return len(self.hooks)


class DenyCoordinationHook(Hook):
    """Deny every call to a coordination tool (``Tool.coordination``: delegating, steering
    other agents, managing teams) at run time, whatever the tool list says — a subagent's
    second line of defence. Tools named in ``exempt`` are the ones it is meant to hold (a
    teammate's own ``send_message``)."""

    REASON = "subagents cannot delegate or coordinate; do the work yourself"

    def __init__(self, exempt: Iterable[str] = ()) -> None:
        self.exempt = frozenset(exempt)

    async def before_tool(self, call: ToolCall, ctx: ToolContext) -> Decision:
        if ctx.tool is not None and ctx.tool.coordination and call.name not in self.exempt:
            return Deny(f"{call.name}: {self.REASON}")
        return ALLOW


class RedactSecretsHook(Hook):
    """Mask credentials in tool results before the model, the transcript, a view or an
    offload file sees them (so it must come before ``OffloadHook``): ``env`` or ``cat .env``
    must not leak a key. ``secrets`` is the process's ``SECRETS`` unless given. Before every
    result the secrets learn what the call read (``Secrets.observe_call``: the ``.env``
    files again, the configuration files it names, the key/value pairs it shows), off the
    event loop — or on it, for a call that could not have written a file and names no
    configuration file: then only its output is read (``Secrets.needs_files``), without
    the hop to a worker thread."""

    def __init__(self, secrets: Secrets | None = None) -> None:
        self.secrets = secrets if secrets is not None else SECRETS

    async def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
        wrote = ctx.tool is None or ctx.tool.effectful  # as the checkpoints judge it
        try:
            if self.secrets.needs_files(call.arguments, wrote=wrote):
                await run_blocking(self.secrets.observe_call, call.arguments, outcome.content, ctx.workdir)
            else:
                self.secrets.observe_output(outcome.content)
        except Exception:  # learning less must never lose the result: scrub with what is known
            log.exception("could not learn the credentials %s read", call.name)
        clean = self.secrets.scrub(outcome.content)
        if clean == outcome.content:
            return outcome
        return outcome.with_content(clean)  # images cannot be scrubbed: they go as they are


class OffloadHook(Hook):
    """Move a tool result longer than ``limit`` characters to ``folder/<call id>.txt``; the
    model sees the head, the tail and the path (so it can read the rest with read_file)."""

    def __init__(self, folder: Path, *, limit: int = 20_000, keep: int = 2_000) -> None:
        self.folder = folder
        self.limit = limit
        self.keep = keep

    async def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
        text = outcome.content
        if len(text) <= self.limit:
            return outcome
        path = await run_blocking(self._write, call.id, text)
        return outcome.with_content(self._pointer(text, path, ctx.workdir))

    def shorten(self, name: str, text: str, workdir: Path) -> str:
        """``text`` itself when short enough, else its head and tail with the path of the
        whole, written to ``folder/<name>.txt`` (for injected messages: a background result
        or a mailbox message, which must not flood the conversation any more than a tool
        result may). Writes synchronously: for callers that cannot await."""
        if len(text) <= self.limit:
            return text
        return self._pointer(text, self._write(name, text), workdir)

    def _pointer(self, text: str, path: Path, workdir: Path) -> str:
        try:
            shown = path.relative_to(workdir)
        except ValueError:
            shown = path
        omitted = len(text) - 2 * self.keep
        return (
            f"{text[: self.keep]}\n[… {omitted:,} characters omitted; the full output "
            f"({len(text):,} characters) is in {shown} — read it with read_file …]\n"
            f"{text[-self.keep :]}"
        )

    def _write(self, call_id: str, text: str) -> Path:
        return write_offload(self.folder, call_id, text)


def offload_path(folder: Path, name: str) -> Path:
    """Where the whole of output ``name`` (a tool call's id) is kept: ``folder/<name>.txt``,
    the name made safe for a file system (a model chooses call ids)."""
    safe = re.sub(r"[^\w.-]", "_", name)[:200] or "call"
    return folder / f"{safe}.txt"


def write_offload(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``offload_path(folder, name)`` atomically (a reader never sees half
    of it); returns the path. Blocking: call it in a thread from the event loop."""
    folder.mkdir(parents=True, exist_ok=True)
    target = offload_path(folder, name)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, target)
    return target
