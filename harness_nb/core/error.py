"""The one error tree of harness_nb: every error it raises on purpose is defined here.

::

    HarnessError
     ├── ConfigError            bad configuration, unknown model string, missing key
     │    └── FrontmatterError     an agent or skill file's frontmatter is over a limit
     ├── ProviderError          an LLM API failed (status, provider, retryable, kind)
     │    └── StreamCutError       a stream ended mid-answer (e.g. inside a tool call)
     ├── ToolError              a tool refused or failed; becomes a tool result the model reads
     │    └── PathEscapeError      a path outside the working directory
     ├── LimitExceededError     max turns, token budget, cost budget or wall time reached
     ├── BudgetSpentError       a subagent not started: its parent run has no budget left
     ├── SubagentFailedError    a subagent's run raised (``__cause__`` is what it raised)
     ├── McpServerError         an MCP server could not start, or stopped answering
     │    └── McpUntrustedError    a project's server asked to start before it was trusted
     ├── RayWorkerError         a map row's attempt failed on a Ray worker, or the workers did not start
     └── UnknownNameError       an unknown agent, task id or recipient (also a KeyError)

Two file errors of ``core.fs`` stay ``OSError``s, outside the tree, so that callers handle
them with every other error of opening a file: ``NotRegularFileError`` (a FIFO, device or
folder where a file was expected) and ``SymlinkError`` (a symlink where none may be).

Every message names the problem and how to fix it. No message ever contains an API key.
An error that a setting fixes carries it as ``fix`` (a ``SettingFix``): ``str(error)`` says
it as a Python keyword, and each front end says it in its own form where it shows the error
(``explained``: ``%config HarnessNB.…`` in a notebook, a flag on the command line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SettingFix:
    """A setting whose value fixes an error: ``setting`` (its flat name, as ``RunSettings``
    spells it), the ``value`` to give it, and what doing so does (``purpose``: "turn
    streaming off"). Data, not words: each front end says it the way that works there."""

    setting: str
    value: Any
    purpose: str

    def keyword(self) -> str:
        """The Python form: ``pass provider_options={'streaming': False} to Harness or
        Harness.configure``."""
        return f"pass {self.setting}={self.value!r} to Harness or Harness.configure"


class HarnessError(Exception):
    """Base of every error harness_nb raises on purpose. ``fix``: the setting that fixes
    it, when one does (``None``: none)."""

    fix: SettingFix | None = None

    def text(self) -> str:
        """The error's own words, without its fix."""
        return super().__str__()

    def explained(self, spell: Callable[[SettingFix], str] = SettingFix.keyword) -> str:
        """The error's words, then its fix as ``spell`` says a setting (the Python keyword
        unless a front end gives its own form)."""
        text = self.text()
        if self.fix is None:
            return text
        return f"{text.rstrip().rstrip('.')}. To {self.fix.purpose}, {spell(self.fix)}"

    def __str__(self) -> str:
        return self.explained()


class ConfigError(HarnessError):
    """The configuration cannot work: fix the setting named in the message."""


class ProviderError(HarnessError):
    """An LLM provider call failed.

    ``status`` is the HTTP status (``None`` for connection problems), ``provider`` the
    provider name (``openai``, ``anthropic``, ...), ``retryable`` whether retrying the same
    request may succeed. ``kind`` is ``"context_length"`` when the request was too long for
    the model's context window (the engine then compacts the conversation and retries once);
    ``context_window`` is the window the server stated in that error, when it did; ``kind``
    is ``"empty_stream"`` for a stream the server ended before sending anything, and
    ``"system_form"`` for a request refused for its system prompt's block form (the
    provider then asks again in a form the server takes: ``providers/quirks.py``).
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

    def text(self) -> str:
        where = f"{self.provider}" + (f" HTTP {self.status}" if self.status else "")
        return f"{where}: {self.message}"


class FrontmatterError(ConfigError):
    """Frontmatter over a limit (``core.frontmatter``): the message says which, and how to
    fix it."""


class StreamCutError(ProviderError):
    """The response stream ended before the answer was complete."""


class ToolError(HarnessError):
    """A tool could not do what was asked. The engine turns it into ``error: ...``."""


class PathEscapeError(ToolError):
    """A path points outside the working directory."""


class LimitExceededError(HarnessError):
    """A run limit was reached. ``limit`` is ``max_turns``, ``token_budget``, ``budget_usd``,
    ``wall_time``, ``max_repeated_calls`` or ``max_turns_without_text``."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class BudgetSpentError(HarnessError):
    """A subagent was not started: the run that would launch it has no budget left."""


class SubagentFailedError(HarnessError):
    """A subagent run raised; ``task_id`` names its task entry, ``__cause__`` the error."""

    def __init__(self, task_id: str, agent: str, cause: BaseException) -> None:
        super().__init__(f"subagent {agent} ({task_id}) failed: {type(cause).__name__}: {cause}")
        self.task_id = task_id
        self.agent = agent


class McpServerError(HarnessError):
    """An MCP server could not be started, or stopped answering; the message names it."""


class McpUntrustedError(McpServerError):
    """A project's MCP server was asked to start before the person trusted it."""


class RayWorkerError(HarnessError):
    """A map row's attempt failed on a Ray worker (its text says how), or the workers could
    not be started or reached (``backend="ray"``)."""


class UnknownNameError(HarnessError, KeyError):
    """A name (agent, task id, recipient) that does not exist; the message lists valid ones."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]) -> None:
        names = sorted(valid)
        listing = ", ".join(names) if names else "(none)"
        super().__init__(f"unknown {kind} {name!r}; valid: {listing}")
        self.kind = kind
        self.name = name
        self.valid = names

    def text(self) -> str:
        return str(self.args[0])
