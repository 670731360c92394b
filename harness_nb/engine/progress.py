"""``ProgressGuard``: a run that keeps calling tools without getting anywhere is told so once,
then stopped, saying why.

Two signs, each a run limit (``Limits``) on by default:

- ``max_repeated_calls``: one call (a tool's name and arguments) answered with the same
  result this many times in the run, while the earlier answer is still in the conversation
  (a result compaction took away may well be asked for again). Calling it again cannot tell
  the model anything new.
- ``max_turns_without_text``: this many turns in a row whose answers are tool calls without
  a word for the person. A small model whose server drops tool results (llama.cpp's chat
  template for some models does) calls tool after tool, mostly different ones (47 of 50
  calls distinct in one measured run), which only this sign catches.

When a sign first shows, the model is told what it is doing and that the run stops if it
goes on (a note after the results, as a user message: a template that drops tool results
keeps it); when that sign shows again, the run stops with ``LimitExceededError`` whose
``limit`` (the run's stop reason) is the limit's name. Counted per run, from its own calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import AssistantMessage, LimitExceededError, Message, ToolResultMessage
from .limits import Limits

__all__ = ["ProgressGuard"]


class ProgressGuard:
    """Watches one run's turns for the signs of the module doc (``None`` limits: not watched)."""

    __slots__ = ("_repeats", "_silent_turns", "_calls", "_silent", "_told")

    def __init__(self, limits: Limits) -> None:
        self._repeats = limits.max_repeated_calls
        self._silent_turns = limits.max_turns_without_text
        # a call and its result (the tool's name, the arguments as sent, the result's text,
        # failure and images) -> how often in a row while in view, and its latest result.
        # Python's hash, not a digest: a string keeps its hash, a digest of a long result cost
        # ~20 µs a call; a collision (one in 2**64) could only count one call once too often.
        self._calls: dict[int, tuple[int, ToolResultMessage]] = {}
        self._silent = 0  # turns in a row with tool calls and no text
        self._told: set[str] = set()  # the signs the model was told about

    def after_tools(self, answer: AssistantMessage, conversation: Sequence[Message]) -> str | None:
        """Take a turn: the model's ``answer``, whose calls' results end ``conversation``.
        The note to give the model when a sign first shows, else ``None``;
        ``LimitExceededError`` when a sign it was told about shows again."""
        text = answer.content
        self._silent = 0 if text and not text.isspace() else self._silent + 1
        note = None
        calls = answer.tool_calls
        if self._repeats is not None and calls:
            in_view: set[int] | None = None  # ids of the conversation's messages, made when needed
            # the engine appends one result per call, in the calls' order
            for call, result in zip(calls, conversation[-len(calls) :], strict=False):
                if not isinstance(result, ToolResultMessage) or result.tool_call_id != call.id:
                    continue
                key = hash((call.name, call.arguments, result.content, result.is_error, *(i.data for i in result.images)))
                seen = self._calls.get(key)
                times = 1
                if seen is not None:
                    in_view = in_view if in_view is not None else {id(m) for m in conversation}
                    times = seen[0] + 1 if id(seen[1]) in in_view else 1
                self._calls[key] = (times, result)
                if times >= self._repeats:
                    note = note or self._sign(
                        "max_repeated_calls",
                        f"you have called {call.name} with these same arguments {times} times and got the same "
                        "result each time. Use the result you have, try something different, or answer in text "
                        "(to wait for something, use a call that waits). The run stops if you repeat it again.",
                        f"no progress: {call.name} was called {times} times with the same arguments and the same "
                        f"result (max_repeated_calls = {self._repeats})",
                    )
        if self._silent_turns is not None and self._silent >= self._silent_turns:
            note = note or self._sign(
                "max_turns_without_text",
                f"{self._silent} turns of tool calls in a row without a word for the person. Say in text what "
                "you have found and what you will do next; the run stops if your next answer is tool calls "
                "alone.",
                f"no progress: {self._silent} turns of tool calls without any text for the person "
                f"(max_turns_without_text = {self._silent_turns})",
            )
        return note

    def _sign(self, limit: str, note: str, stop: str) -> str:
        """The note for the sign ``limit`` the first time it shows; a stop after."""
        if limit in self._told:
            raise LimitExceededError(limit, stop)
        self._told.add(limit)
        return f"Note from the harness: {note}"

