"""The one error family of harness_nb.

::

    HarnessError
     ├── ConfigError        bad configuration, unknown model string, missing key
     ├── ProviderError      an LLM API failed (status, provider, retryable, kind)
     │    └── StreamCutError   a stream ended mid-answer (e.g. inside a tool call)
     ├── ToolError          a tool refused or failed; becomes a tool result the model reads
     │    └── PathEscapeError  a path outside the working directory
     ├── LimitExceeded      max turns, token budget or wall time reached
     └── UnknownNameError   an unknown agent, task id or recipient (lists the valid ones)

Every message names the problem and how to fix it. No message ever contains an API key.
"""

from __future__ import annotations

from collections.abc import Iterable


class HarnessError(Exception):
    """Base of every error harness_nb raises on purpose."""


class ConfigError(HarnessError):
    """The configuration cannot work: fix the setting named in the message."""


class ProviderError(HarnessError):
    """An LLM provider call failed.

    ``status`` is the HTTP status (``None`` for connection problems), ``provider`` the
    provider name (``openai``, ``anthropic``, ...), ``retryable`` whether retrying the same
    request may succeed. ``kind`` is ``"context_length"`` when the request was too long for
    the model's context window (the engine then compacts the conversation and retries once);
    ``context_window`` is the window the server stated in that error, when it did.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        kind: str | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.kind = kind
        self.context_window = context_window

    def __str__(self) -> str:
        where = f"{self.provider}" + (f" HTTP {self.status}" if self.status else "")
        return f"{where}: {self.message}"


class StreamCutError(ProviderError):
    """The response stream ended before the answer was complete."""


class ToolError(HarnessError):
    """A tool could not do what was asked. The engine turns it into ``error: ...``."""


class PathEscapeError(ToolError):
    """A path points outside the working directory."""


class LimitExceeded(HarnessError):
    """A run limit was reached. ``limit`` is ``max_turns``, ``token_budget`` or ``wall_time``."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class UnknownNameError(HarnessError, KeyError):
    """A name (agent, task id, recipient) that does not exist; the message lists valid ones."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        names = sorted(valid)
        listing = ", ".join(names) if names else "(none)"
        super().__init__(f"unknown {kind} {name!r}; valid: {listing}")
        self.kind = kind
        self.name = name
        self.valid = names

    def __str__(self) -> str:
        return str(self.args[0])
