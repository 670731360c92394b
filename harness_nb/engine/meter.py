"""``ContextMeter``: how many tokens the next request of a conversation will hold, known
before it is sent, at a cost that does not grow with the conversation.

The tokens of the last request are known exactly: its answer reported them (input plus
cache reads plus cache writes). The next request holds those plus what was added since —
the answer itself, tool results, injected messages — which is estimated from characters
with the provider's calibrated ``TokenRatio``. Only the messages added since the last call
are measured, so a call costs the same at turn 5 and at turn 500. Before any answer (the
first call, or a server that reports no usage) the whole request is estimated once.

Characters are counted as ``providers/estimate.py`` says (the count each provider's ratio
learns against).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import Message, Usage
from ..providers.base import Provider
from ..providers.estimate import IMAGE_CHARS_PER_TOKEN, MESSAGE_OVERHEAD, fixed_chars, message_chars, spec_chars

__all__ = [
    "IMAGE_CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD",
    "ContextMeter",
    "fixed_chars",
    "input_tokens",
    "message_chars",
    "spec_chars",
]


def input_tokens(usage: Usage) -> int:
    """The tokens a request held, as its answer reported them (cache reads and writes are
    part of the input: only their price differs)."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class ContextMeter:
    """The size of one conversation's next request, kept incrementally.

    ``estimate`` is called before each request (with the history, the characters of the
    system prompt and tools, and the provider); ``observe`` with that request's usage once
    it is answered; ``rewritten`` after compaction replaced the history."""

    __slots__ = ("_counted", "_chars", "_sent", "_anchor")

    def __init__(self) -> None:
        self._counted = 0  # messages whose characters are summed in _chars
        self._chars = 0
        self._sent = 0  # characters of the request last estimated (fixed part included)
        # (tokens reported for a request, its characters, the model): the next estimate's base
        self._anchor: tuple[int, int, str] | None = None

    def estimate(self, messages: Sequence[Message], fixed: int, provider: Provider) -> int:
        """The tokens a request of ``messages`` (plus ``fixed`` characters of system prompt
        and tools) will hold."""
        if len(messages) < self._counted:  # the history was replaced under us
            self._recount(messages)
        for message in messages[self._counted :]:
            self._chars += message_chars(message)
        self._counted = len(messages)
        self._sent = fixed + self._chars
        ratio = provider.token_ratio
        anchor = self._anchor
        if anchor is not None and anchor[2] == provider.model_id:
            return anchor[0] + ratio.tokens(max(0, self._sent - anchor[1]))
        return ratio.tokens(self._sent)

    def observe(self, usage: Usage, provider: Provider) -> None:
        """Take the usage reported for the request last estimated: the next estimate starts
        from it, and the provider's ratio learns from it. A call with no usage reported
        leaves the estimate as it was."""
        tokens = input_tokens(usage)
        if tokens <= 0 or usage.unreported_calls:
            return
        provider.token_ratio.observe(self._sent, tokens)
        self._anchor = (tokens, self._sent, provider.model_id)

    def rewritten(self, messages: Sequence[Message], fixed: int, tokens: int, provider: Provider) -> None:
        """The history is now ``messages`` (compacted), estimated at ``tokens``: the next
        estimate starts from there until an answer reports the real figure."""
        self._recount(messages)
        self._sent = fixed + self._chars
        self._anchor = (tokens, self._sent, provider.model_id)

    def forget(self) -> None:
        """Drop what the last answer reported (the history changed in a way not measured)."""
        self._anchor = None

    def _recount(self, messages: Sequence[Message]) -> None:
        self._chars = sum(message_chars(m) for m in messages)
        self._counted = len(messages)
        self._anchor = None
