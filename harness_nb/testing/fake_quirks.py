"""What real servers do that the APIs they copy do not, as the fake LLM server reproduces it
when asked (seen against llama-cpp-python 0.3.36 and LiteLLM 1.108.7):

- ``stream_tools="empty_body"``: llama.cpp's server cannot stream an answer when tools are
  offered with ``tool_choice: "auto"`` (its log: "Automatic streaming tool choice is not
  supported"): such a streamed request gets 200 and an empty body.
- ``stream_tools="empty_answer"``: a LiteLLM proxy in front of that server turns it into an
  empty answer that finishes properly (no text, no tool call, no usage).
- ``system_blocks=False``: LiteLLM's Anthropic side in front of an OpenAI-style backend
  passes a system prompt given as a list of blocks (what prompt caching sends) on as a
  list, which llama.cpp's request schema refuses: HTTP 500 with pydantic's errors, naming
  ``ChatCompletionRequestSystemMessage`` and ``content``.

A request so refused uses no step of the script: the server never reached its model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from .fake_answers import error_body

__all__ = ["StreamTools", "quirk_step"]

StreamTools = Literal["ok", "empty_body", "empty_answer"]

_AUTO = (None, "auto", {"type": "auto"})


def quirk_step(
    api: str, body: Mapping[str, Any], *, stream_tools: StreamTools = "ok", system_blocks: bool = True
) -> dict[str, Any] | None:
    """The step that answers ``body`` (a request to ``api``) the way such a server would, or
    ``None`` when this request meets none of the quirks asked for."""
    if not system_blocks and api == "anthropic" and isinstance(body.get("system"), list):
        return {"raw": json.dumps(error_body(api, "api_error", _system_blocks_refused(body["system"]))),
                "status": 500, "content_type": "application/json"}  # fmt: skip
    offers_tools = bool(body.get("tools")) and body.get("tool_choice") in _AUTO
    if body.get("stream") and offers_tools:
        if stream_tools == "empty_body":
            return {"raw": ""}
        if stream_tools == "empty_answer":
            return {"text": "", "omit_usage": True, "stop_reason": "end_turn"}
    return None


def _system_blocks_refused(system: list[Any]) -> str:
    """LiteLLM's words for llama.cpp's refusal of a system message whose content is a list:
    one pydantic error per member of the message union it could have been."""
    shown = repr(system)[:200]
    errors = [
        f"{{'type': 'string_type', 'loc': ('body', 'messages', 0, '{kind}', 'content'), "
        f"'msg': 'Input should be a valid string', 'input': {shown}}}"
        for kind in ("ChatCompletionRequestSystemMessage", "ChatCompletionRequestUserMessage")
    ]
    return "litellm.APIError: APIError: OpenAIException - 10 validation errors:\n  " + "\n  ".join(errors)
