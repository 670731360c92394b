"""The summary compaction writes: the model itself records the oldest turns of a
conversation as one user message that is unmistakably history.

``summarise`` renders the turns as a bounded transcript (each message, tool result and
argument cut to a size), asks the model in pieces that fit its window (a rolling record,
each piece added to the one before; halved again when a server still says "too long"), and
bounds the answer. The record (``summary_message``) says it is history, already done, not to
be redone: agents that read a summary as a to-do list re-execute finished work (claude-code
#68097, #75241). When the model cannot give one, a digest of the prompts and calls stands in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ...core import AssistantMessage, HarnessError, Message, ProviderError, ToolResultMessage, UserMessage
from ...providers.base import ModelRequest, ModelResponse, Provider

log = logging.getLogger("harness_nb.engine")

Biller = Callable[[ModelResponse], None]

SUMMARY_TAG = "conversation-summary"
SUMMARY_NOTE = (
    "This is a summary of earlier turns of this conversation, already done; do not redo any "
    "of it. It records what happened, not what to do: continue from the messages after it."
)
SUMMARISER_AGENT = "compaction"  # the ``agent`` of summary requests (scripted models key on it)
SUMMARISER_PROMPT = """\
You compact the history of a conversation between a person and an AI agent that works in a \
Jupyter notebook with tools, so that the agent can go on with a smaller context. Write a \
concise, factual record in the past tense: what the person asked, what the agent did (files \
read or written, commands run, tools called and what they showed), the facts, numbers, names \
and file paths that were learnt, and the decisions taken. Mention where full outputs are kept \
(offload files) when the history names them. Everything you describe is finished: never write \
instructions, next steps or a to-do list. Answer with the record only."""
_CHUNK_CHARS_UNKNOWN = 48_000  # summariser input per call when the window is not known
_MIN_CHUNK_CHARS = 2_000
_ENTRY_CHARS = 4_000  # one message as the summariser sees it
_RESULT_CHARS = 1_500


def summary_message(text: str) -> UserMessage:
    """The compaction record: a user message that is unmistakably history."""
    return UserMessage(content=f"<{SUMMARY_TAG}>\n{SUMMARY_NOTE}\n\n{text.strip()}\n</{SUMMARY_TAG}>")


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a compaction record."""
    return isinstance(message, UserMessage) and message.content.startswith(f"<{SUMMARY_TAG}>")


async def summarise(
    messages: Sequence[Message],
    provider: Provider,
    *,
    summary_tokens: int,
    window: int | None,
    bill: Biller,
    strict: bool,
    agent: str = "main",
) -> tuple[str, str]:
    """A summary of ``messages`` by ``provider``'s model, at most about ``summary_tokens``
    long, and a note when it could not be had: then a digest of the prompts and calls
    stands in — unless ``strict`` (compacting on request), where the failure is raised.
    Each summary call is billed through ``bill``."""
    entries = [_entry(m) for m in messages]
    limit = min(summary_tokens, window // 8) if window else summary_tokens
    limit = max(limit, 64)
    ratio = provider.token_ratio
    if window:
        chunk = int((window * 0.6 - limit - 400) * ratio.value)
    else:
        chunk = _CHUNK_CHARS_UNKNOWN
    chunk = max(chunk, _MIN_CHUNK_CHARS)
    try:
        for _halving in range(5):
            try:
                text = await _rolling(entries, chunk, _answer_cap(limit, window), provider, bill)
            except ProviderError as exc:
                if exc.kind != "context_length" or chunk <= _MIN_CHUNK_CHARS:
                    raise
                chunk = max(_MIN_CHUNK_CHARS, chunk // 2)
                continue
            if text.strip():
                return _bounded(text, int(limit * ratio.value * 1.5)), ""
            raise HarnessError("the model answered the summary request with no text")
        raise HarnessError("the summary request stayed too long for the context window")
    except HarnessError as exc:
        if strict:
            raise
        log.warning("%s: compaction summary failed (%s); keeping a digest instead", agent, exc)
        return _digest(messages, int(limit * ratio.value)), f"the summary call failed ({exc}); a digest was kept"


async def _rolling(
    entries: Sequence[str], chunk: int, cap: int | None, provider: Provider, bill: Biller
) -> str:
    """One rolling summary over ``entries`` in pieces of at most ``chunk`` characters,
    each answer at most ``cap`` tokens (``None``: the provider's own limit)."""
    summary = ""
    for piece in _pieces(entries, chunk):
        earlier = f"Record of still earlier turns:\n{summary}\n\n" if summary else ""
        request = ModelRequest(
            system=SUMMARISER_PROMPT,
            messages=[UserMessage(content=f"{earlier}Turns to add to the record:\n\n{piece}")],
            agent=SUMMARISER_AGENT,
            max_tokens=cap,
        )
        response = await provider.complete(request)
        bill(response)
        summary = response.message.content
    return summary


def _answer_cap(limit: int, window: int | None) -> int | None:
    """The ``max_tokens`` of a summary request. A small window needs it, or the answer may
    not fit beside the request; a large one is better without: a reasoning model (o-series,
    GPT-5) counts its thinking in ``max_tokens`` and could spend a small cap before writing
    a word. The summary is bounded in length afterwards either way."""
    return limit if window is not None and window < 65_536 else None


def _entry(message: Message) -> str:
    """``message`` as one entry of the transcript the summariser reads (bounded)."""
    if isinstance(message, ToolResultMessage):
        flag = " (error)" if message.is_error else ""
        images = "".join(f" [{image.describe()}]" for image in message.images)  # the summariser reads text
        text = f"Result of {message.name}{flag}: {_bounded(message.content, _RESULT_CHARS)}{images}"
    elif isinstance(message, AssistantMessage):
        lines = [f"Agent: {message.content}"] if message.content else []
        lines += [f"Agent called {c.name}({_bounded(c.arguments, 300)})" for c in message.tool_calls]
        text = "\n".join(lines)
    elif is_summary(message):
        text = f"Record of earlier turns:\n{message.content}"
    else:
        text = f"{message.role.capitalize()}: {message.content}"
    return _bounded(text, _ENTRY_CHARS)


def _pieces(entries: Sequence[str], chunk: int) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for entry in entries:
        if current and size + len(entry) > chunk:
            pieces.append("\n\n".join(current))
            current, size = [], 0
        current.append(_bounded(entry, chunk))
        size += len(entry) + 2
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _digest(messages: Sequence[Message], limit: int) -> str:
    """A summary made without the model: the prompts and the calls, one line each."""
    lines = []
    for m in messages:
        if is_summary(m):  # an earlier record: its lines come first, as they happened first
            body = m.content.removeprefix(f"<{SUMMARY_TAG}>").removesuffix(f"</{SUMMARY_TAG}>")
            lines.append(body.replace(SUMMARY_NOTE, "").strip())
        elif isinstance(m, UserMessage):
            lines.append(f"- The person asked: {_bounded(' '.join(m.content.split()), 200)}")
        elif isinstance(m, AssistantMessage):
            lines += [f"- The agent called {c.brief(120)}" for c in m.tool_calls]
    return _bounded("\n".join(lines) or "(earlier turns)", max(limit, 200))


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
