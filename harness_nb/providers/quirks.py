"""What a server was found unable to do, learnt from its own answers and remembered for the
process.

Servers that speak an API somebody else wrote differ from it in ways that break a
harness's defaults. Two such differences are learnt here, once per server (its base URL and
model), for every provider of the process (a subagent's, a teammate's, another harness's):

- **No streamed answers** (``ServerQuirks.streams``). llama.cpp's server ends a stream at
  once, without a word, when tools are offered with ``tool_choice: "auto"`` (its log:
  "Automatic streaming tool choice is not supported"); a LiteLLM proxy in front of it turns
  that into an empty answer. A stream that ended before sending anything, or an empty
  streamed answer to a request offering tools, is asked for once more without streaming;
  when that answers, the server is not streamed to again. A stream cut after some of the
  answer arrived is still an error: the text was shown, and resending would answer twice.
- **No system prompt as blocks** (``ServerQuirks.system_blocks``). Anthropic prompt caching
  sends the system prompt as a list of blocks; LiteLLM's Anthropic side in front of an
  OpenAI-style backend passes the list on, and llama.cpp's request schema refuses it (HTTP
  500 naming ``ChatCompletionRequestSystemMessage`` and ``content``). A 4xx or 5xx whose
  error names the system message's form is not retried as it was, but sent once more with
  the prompt as a plain string; prompt caching is off for that server from then on.

What is learnt is said once: the answer of the call that learnt it carries a notice
(``ModelResponse.notices``) that the engine emits as ``ServerAdapted`` for the views, and
the log has it too.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

__all__ = ["EMPTY_STREAM", "QUIRKS", "SYSTEM_FORM", "ServerBook", "ServerQuirks", "names_system_form"]

log = logging.getLogger("harness_nb.providers")

EMPTY_STREAM = "empty_stream"
"""``ProviderError.kind`` of a stream the server ended, cleanly, before sending anything."""
SYSTEM_FORM = "system_form"
"""``ProviderError.kind`` of a request refused for its system prompt's block form."""

# An error that names the system message and says it wanted a string: pydantic's
# "ChatCompletionRequestSystemMessage', 'content') … Input should be a valid string"
# (llama.cpp, through LiteLLM), or a plainer "system: expected a string" from others. A
# failure that only echoes the request ("role": "system") says nothing of a string.
_SYSTEM_FORM_ERROR = re.compile(r"system.{0,400}?\bstr(ing)?(_type)?\b|\bstr(ing)?(_type)?\b.{0,400}?system", re.IGNORECASE | re.DOTALL)


def names_system_form(detail: str) -> bool:
    """Whether an error's ``detail`` says the system prompt's form was refused (see the
    module doc): it names the system message and says a string was wanted."""
    return _SYSTEM_FORM_ERROR.search(detail[:20_000]) is not None


@dataclass(slots=True)
class ServerQuirks:
    """What one server (``server``, a base URL, serving ``model``) was found unable to do;
    shared by every provider of that server in the process."""

    server: str
    model: str
    streams: bool = True
    system_blocks: bool = True

    def cannot_stream(self, *, tools: bool) -> tuple[str, ...]:
        """Note that the server cannot stream its answers; the notice to give, the first
        time only (``()`` after)."""
        if not self.streams:
            return ()
        self.streams = False
        offered = " to a request offering tools" if tools else ""
        why = " (llama.cpp's server cannot stream when tools are offered with tool_choice 'auto')" if tools else ""
        return self._learnt(
            f"{self.model} at {self.server} sent an empty streamed answer{offered}; asked again without "
            f"streaming, it answered. Streaming is off for this server from now on{why}, so answers appear whole."
        )

    def refuses_system_blocks(self) -> tuple[str, ...]:
        """Note that the server refuses the system prompt as blocks; the notice to give,
        the first time only."""
        if not self.system_blocks:
            return ()
        self.system_blocks = False
        return self._learnt(
            f"{self.model} at {self.server} refused the system prompt as a list of blocks (what prompt caching "
            "sends); it was sent again as plain text. Prompt caching is off for this server from now on."
        )

    def _learnt(self, notice: str) -> tuple[str, ...]:
        log.info("%s", notice)  # the views show it (ServerAdapted): a warning would say it twice
        return (notice,)


class ServerBook:
    """The ``ServerQuirks`` of every server the process has talked to, by base URL and
    model; at most ``size`` (servers come from configuration, but a bound costs nothing)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._servers: dict[tuple[str, str], ServerQuirks] = {}
        self._lock = threading.Lock()  # providers of several event loops (threads) share it

    def of(self, server: str, model: str) -> ServerQuirks:
        """The quirks of ``model`` at ``server`` (found unable to do nothing, the first time)."""
        key = (server.rstrip("/"), model)
        with self._lock:
            known = self._servers.get(key)
            if known is None:
                if len(self._servers) >= self.size:
                    del self._servers[next(iter(self._servers))]
                known = self._servers[key] = ServerQuirks(*key)
            return known


QUIRKS = ServerBook()
"""The process's one book of what servers cannot do."""
