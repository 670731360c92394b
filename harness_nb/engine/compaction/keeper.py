"""Keeping a conversation inside its model's context window: ``ContextKeeper``.

Before every model call the keeper measures the request (``ContextMeter``) and emits
``ContextMeasured``. When the request would pass ``CompactionPolicy.threshold`` of the
window it compacts, in two stages, saying so first (``CompactionStarted``) and after
(``Compacted``):

1. **Old tool results become stubs.** Oldest first, all but the ``keep_results`` most
   recent: the call stays, its result becomes one line naming the file that holds the
   whole result (written to the offload folder if the offload hook had not put it there),
   until the request is down to ``target`` of the window — the recent ones too, but for
   the latest call's, when a small window cannot hold them.
2. **The oldest turns become a summary.** If stubs could not bring it down to the target
   (else the next turns would each compact again by one more stub), the model itself
   summarises the oldest part of the conversation into one user message marked as history
   (``summary.py``). The cut is never between a tool call and its result. The prompt of the run under way, if summarised, is kept verbatim after the
   summary: that is the task still being worked on.

A provider's context-length error compacts harder (every old result, then a summary, with
the window the error stated) and the engine retries the call once. ``Harness.compact()``
and ``%agent --compact`` compact on request. The session's transcript keeps every original
message and gets one ``compaction`` line saying what was replaced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core import (
    Compacted,
    CompactionStarted,
    ConfigError,
    ContextMeasured,
    Message,
    ProviderError,
    SettingFix,
    ToolError,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    run_blocking,
)
from ...core.event import unheard
from ...providers.base import ModelResponse, Provider
from ..hook import offload_path, write_offload
from ..meter import ContextMeter, fixed_chars, message_chars
from ..session import MemorySession
from .summary import Biller, is_summary, summarise, summary_message

log = logging.getLogger("harness_nb.engine")

EventSink = Callable[[Any], Any]

STUB_PREFIX = "[cleared to save context:"
_MIN_STUB_CHARS = 400  # a result shorter than this is not worth a stub


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When and how a conversation is compacted.

    ``threshold``: compact when the next request would hold more than this fraction of the
    window (``1.0``: only when a provider says it is too long). ``target``: compact down to
    this fraction. ``keep_results``: the most recent tool results never stubbed by the
    threshold. ``summary_tokens``: the most a summary may take (and is asked for).
    ``offload_dir``: where cleared results are kept (default ``<workdir>/.harness_nb/offload``,
    where the offload hook puts long results). ``window``: the context window to assume when
    the provider knows none of its own (the ``context_window`` setting, for a provider object
    handed to a harness, which the harness does not change)."""

    threshold: float = 0.8
    target: float = 0.5
    keep_results: int = 3
    summary_tokens: int = 2_048
    offload_dir: Path | None = None
    window: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float) or not 0 < self.threshold <= 1:
            raise ConfigError(f"compact_threshold must be a fraction above 0 and at most 1, not {self.threshold!r}")
        if not 0 < self.target <= self.threshold:
            raise ConfigError(f"the compaction target ({self.target!r}) must be above 0 and at most the threshold")
        if self.keep_results < 0 or self.summary_tokens < 64:
            raise ConfigError("keep_results must be 0 or more and summary_tokens at least 64")


@dataclass(slots=True)
class FitContext:
    """What keeping one request within the window needs: the run's ``provider`` and
    ``policy``, the request's ``system`` prompt and ``tools`` (they take room too), where
    events go (``emit``) and who pays for a summary call (``bill``). Made for every call and
    only read (not frozen: a frozen dataclass's checked construction costs ~1 µs more)."""

    provider: Provider
    policy: CompactionPolicy
    system: str
    tools: Sequence[ToolSpec]
    emit: EventSink
    bill: Biller


def is_stub(message: Message) -> bool:
    """Whether ``message`` is a tool result already cleared to a stub."""
    return isinstance(message, ToolResultMessage) and message.content.startswith(STUB_PREFIX)


def cut_points(messages: Sequence[Message]) -> list[int]:
    """Where the history may be cut into "summarised" ``[:k]`` and "kept" ``[k:]``: never
    in front of a tool result (a call and its results stay together, and the kept part never
    starts with a result whose call is gone), never at 0 and never past the last message."""
    return [k for k in range(1, len(messages)) if not isinstance(messages[k], ToolResultMessage)]


class ContextKeeper:
    """Measures and compacts the history of one conversation (``session``); owned by its
    engine, so subagents and teammates — each an engine of its own — compact the same way.

    ``pin(message)`` names the prompt of the run under way (kept verbatim when the part of
    the history holding it is summarised)."""

    def __init__(self, session: MemorySession, *, workdir: Path, agent: str = "main") -> None:
        self.session = session
        self.workdir = workdir
        self.agent = agent
        self.meter = ContextMeter()
        self._pinned: Message | None = None
        self._fixed: tuple[str, tuple[int, ...], int] = ("", (), 0)  # (system, tool spec ids, chars)

    def pin(self, message: Message) -> None:
        """``message`` is the prompt the conversation is working on now."""
        self._pinned = message

    # -- measuring -------------------------------------------------------------------------

    def measure(self, provider: Provider, system: str, tools: Sequence[ToolSpec]) -> int:
        """The tokens the next request will hold."""
        return self.meter.estimate(self.session.messages, self._fixed_chars(system, tools), provider)

    def _fixed_chars(self, system: str, tools: Sequence[ToolSpec]) -> int:
        # the same prompt and specs on almost every call: counted again only when they change
        ids = tuple(map(id, tools))
        known_system, known_ids, chars = self._fixed
        if system is not known_system or ids != known_ids:
            chars = fixed_chars(system, tools)
            self._fixed = (system, ids, chars)
        return chars

    def observe(self, response: ModelResponse, provider: Provider) -> None:
        """Learn from the usage of the answer to the request last measured."""
        self.meter.observe(response.usage, provider)

    async def fit(self, fit: FitContext) -> None:
        """Before a call: measure the request, say so, and compact when it would pass the
        threshold of a known window."""
        window = await fit.provider.discover_window() or fit.policy.window
        tokens = self.measure(fit.provider, fit.system, fit.tools)
        if fit.emit is not unheard:
            fit.emit(ContextMeasured(tokens=tokens, window=window, agent=self.agent))
        if window and tokens > fit.policy.threshold * window:
            await self.compact("threshold", fit, tokens=tokens)

    async def after_too_long(self, error: ProviderError, fit: FitContext) -> Compacted:
        """The provider said the request was too long: take the window it stated, compact
        hard. ``error`` is re-raised (clearly) when there was nothing left to compact."""
        if error.context_window:
            fit.provider.learn_window(error.context_window)
        self.meter.forget()  # the last figure reported was for a request that fitted
        done = await self.compact("context_length", fit)
        if not (done.cleared or done.summarised):
            raise self.still_too_long(error, "there was nothing left to compact")
        return done

    def still_too_long(self, error: ProviderError, why: str = "even after compacting") -> ProviderError:
        """The error for a request that does not fit ``why``."""
        window = error.context_window or None
        size = f" ({window:,} tokens)" if window else ""
        refused = ProviderError(
            f"the conversation does not fit the model's context window{size} {why}: "
            f"{error.message} Start a new conversation (%agent --new, Harness.new_conversation()), "
            "use a model with a larger context, or offer fewer tools.",
            provider=error.provider,
            status=error.status,
            kind="context_length",
            context_window=error.context_window,
        )
        refused.fix = SettingFix("tools", ["read_file", "edit_file", "grep", "bash"], "offer fewer tools")
        return refused

    # -- compacting ------------------------------------------------------------------------

    async def compact(self, reason: str, fit: FitContext, *, tokens: int | None = None) -> Compacted:
        """Compact the history for ``reason`` (``threshold``, ``context_length`` or
        ``requested``; see the module doc) and return what was done."""
        provider, policy, emit = fit.provider, fit.policy, fit.emit
        window = provider.context_window or policy.window
        fixed = self._fixed_chars(fit.system, fit.tools)
        ratio = provider.token_ratio
        before = tokens if tokens is not None else self.measure(provider, fit.system, fit.tools)
        emit(CompactionStarted(reason=reason, tokens=before, window=window, agent=self.agent))
        messages = list(self.session.messages)
        target = int(policy.target * window) if window else None

        keep = policy.keep_results if reason != "context_length" else 0
        goal = target if reason == "threshold" else None
        messages, cleared, now = await self._clear_results(messages, keep, goal, before, provider, policy)
        if goal is not None and now > goal and keep:
            # the recent results alone keep it over the target: stub them too (all but the
            # latest call's) rather than summarise, and rather than compact again next turn
            messages, more, now = await self._clear_results(messages, 0, goal, now, provider, policy)
            cleared.update(more)

        summarised, note, record = 0, "", None
        pinned_at: int | None = None
        # "still over": over the target stubs could not reach, so that the next turns do
        # not each compact again by one more stub
        over = target is not None and now > target
        if reason != "threshold" or over:
            k = self._cut(messages, reason, window, target, fixed, policy, provider)
            if k is None:
                note = "nothing old enough to summarise"
            else:
                text, note = await summarise(
                    messages[:k],
                    provider,
                    summary_tokens=policy.summary_tokens,
                    window=window,
                    bill=fit.bill,
                    strict=reason == "requested",
                    agent=self.agent,
                )
                record = summary_message(text)
                head: list[Message] = [record]
                pinned_at = next((i for i, m in enumerate(messages[:k]) if m is self._pinned), None)
                if pinned_at is not None:
                    head.append(messages[pinned_at])
                removed = sum(message_chars(m) for m in messages[:k])
                added = sum(message_chars(m) for m in head)
                if added >= removed:  # a summary no shorter than what it replaces gains nothing
                    record, pinned_at = None, None
                    note = "the summary came out no shorter than the messages it would replace; they were kept"
                else:
                    now = max(0, now - ratio.tokens(removed) + ratio.tokens(added))
                    messages = head + messages[k:]
                    summarised = k

        if cleared or summarised:
            self.session.rewrite(
                messages,
                reason=reason,
                stubs=cleared,
                summarised=summarised,
                summary=record.content if record is not None else None,
                pinned=pinned_at,
                tokens_before=before,
                tokens_after=now,
            )
            self.meter.rewritten(self.session.messages, fixed, now, provider)
        done = Compacted(
            reason=reason,
            cleared=len(cleared),
            summarised=summarised,
            tokens_before=before,
            tokens_after=now,
            window=window,
            note=note,
            agent=self.agent,
        )
        emit(done)
        emit(ContextMeasured(tokens=now, window=window, agent=self.agent))
        return done

    async def _clear_results(
        self,
        messages: list[Message],
        keep: int,
        goal: int | None,
        tokens: int,
        provider: Provider,
        policy: CompactionPolicy,
    ) -> tuple[list[Message], dict[str, str], int]:
        """Stage 1: stub tool results oldest first, all but the ``keep`` most recent (and
        never the results of the latest call, which the model has not read yet), until the
        estimate is down to ``goal`` (all of them without one). Returns the history, the
        stubs made (call id → stub text) and the new estimate."""
        ratio = provider.token_ratio
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
        latest = _latest_results(messages)
        candidates = results[: len(results) - keep] if keep else results
        folder = policy.offload_dir or self.workdir / ".harness_nb" / "offload"
        stubs: dict[int, ToolResultMessage] = {}
        whole: list[tuple[str, str]] = []
        before = tokens
        for i in candidates:
            if goal is not None and tokens <= goal:
                break
            message = messages[i]
            assert isinstance(message, ToolResultMessage)
            if i in latest or is_stub(message) or (len(message.content) < _MIN_STUB_CHARS and not message.images):
                continue
            path = offload_path(folder, message.tool_call_id)
            whole.append((message.tool_call_id, message.content))
            stubs[i] = stub = ToolResultMessage(
                tool_call_id=message.tool_call_id,
                name=message.name,
                content=_stub_text(message, self._shown(path)),
                is_error=message.is_error,
            )
            tokens -= ratio.tokens(message_chars(message)) - ratio.tokens(message_chars(stub))
        if not stubs:
            return messages, {}, max(0, tokens)
        try:
            await run_blocking(_keep_whole, folder, whole)
        except (OSError, ToolError) as exc:
            # a stub must point at a file that holds the whole result, or the result is lost
            log.warning("%s: cannot keep cleared tool results in %s (%s); none cleared", self.agent, folder, exc)
            return messages, {}, before
        for i, stub in stubs.items():
            messages[i] = stub
        return messages, {s.tool_call_id: s.content for s in stubs.values()}, max(0, tokens)

    def _cut(
        self,
        messages: Sequence[Message],
        reason: str,
        window: int | None,
        target: int | None,
        fixed: int,
        policy: CompactionPolicy,
        provider: Provider,
    ) -> int | None:
        """Stage 2's cut: summarise ``messages[:k]``. By the threshold or a too-long error
        with a known window, the smallest cut leaving a kept part within the target; else
        (or when even the last exchange is over it) the last cut, keeping the last exchange.
        On request: the turns before the latest prompt. ``None``: nothing to summarise."""
        points = [k for k in cut_points(messages) if not all(is_summary(m) for m in messages[:k])]
        if not points:
            return None
        if reason == "requested":
            prompts = [i for i, m in enumerate(messages) if isinstance(m, UserMessage) and not is_summary(m)]
            before_latest = [k for k in points if prompts and k <= prompts[-1]]
            return before_latest[-1] if before_latest else points[-1]
        if target is None or window is None:
            return points[-1]
        ratio = provider.token_ratio
        budget = target - ratio.tokens(fixed) - min(policy.summary_tokens, window // 8)
        tail = 0
        suffix: dict[int, int] = {}
        for k in range(len(messages) - 1, 0, -1):
            tail += ratio.tokens(message_chars(messages[k]))
            suffix[k] = tail
        fitting = [k for k in points if suffix[k] <= budget]
        return fitting[0] if fitting else points[-1]

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.workdir))
        except ValueError:
            return str(path)


def _latest_results(messages: Sequence[Message]) -> set[int]:
    """Indices of the results of the latest assistant message, when the history ends with
    them (the model has not read them yet)."""
    out: set[int] = set()
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], ToolResultMessage):
            out.add(i)
        else:
            break
    return out


def _stub_text(message: ToolResultMessage, shown: str) -> str:
    """The stub of a cleared result. Its images are dropped, not kept in a file: read_file
    could not show them to the model anyway."""
    count = len(message.images)
    images = f"; its {count} image{'s' if count > 1 else ''} {'were' if count > 1 else 'was'} dropped" if count else ""
    return (
        f"{STUB_PREFIX} this {message.name} result ({len(message.content):,} characters) is in "
        f"{shown}; read it with read_file if you need it again{images}]"
    )


def _keep_whole(folder: Path, writes: Sequence[tuple[str, str]]) -> None:
    """Write each cleared result to the offload folder unless the whole of it is there
    already (the offload hook wrote it when it was long)."""
    for name, text in writes:
        if not offload_path(folder, name).is_file():
            write_offload(folder, name, text)


