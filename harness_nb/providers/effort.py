"""Reasoning effort: an agent file's ``effort`` (low, medium, high, max) on the wire.

One table per API, and one rule for which models have such a parameter (the providers
send it, ``%agents`` says whether it will be):

=====================  ============================================  ====================
API                    models                                        field sent
=====================  ============================================  ====================
Chat Completions       reasoning models: ``o1``/``o3``/``o4``…,      ``reasoning_effort``:
(openai,               ``gpt-5``…, ``gpt-oss``                       low, medium, high
openai-compatible,                                                   (max is sent as high)
ollama)
Anthropic Messages     models with extended thinking: Claude 3.7     ``thinking: {type:
                       Sonnet and the Claude 4 family (``claude-     enabled,
                       sonnet-4…``, ``claude-opus-4…``,              budget_tokens}``
                       ``claude-haiku-4…``)                          (``THINKING_BUDGETS``)
=====================  ============================================  ====================

Any other model has no such parameter: nothing is sent (an unknown field makes most
servers refuse the request), and ``effort_note`` says so.
"""

from __future__ import annotations

import re

__all__ = ["THINKING_BUDGETS", "effort_note", "openai_effort", "thinking_budget"]

OPENAI_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "high"}
THINKING_BUDGETS = {"low": 2048, "medium": 6144, "high": 12288, "max": 20480}
"""Anthropic ``budget_tokens`` per effort (``max_tokens`` is raised by as much, so the
answer keeps its own room; the largest stays under the smallest Claude 4 output cap)."""

_OPENAI_REASONING = re.compile(r"^(o[1-9]|gpt-5|gpt-oss)", re.IGNORECASE)
_ANTHROPIC_THINKING = re.compile(
    r"^claude-(3-7-sonnet|(sonnet|opus|haiku)-([4-9]|[1-9][0-9]))", re.IGNORECASE
)
_OPENAI_APIS = ("openai", "openai-compatible", "ollama")


def openai_effort(model: str, effort: str | None) -> str | None:
    """The ``reasoning_effort`` to send for ``effort`` to Chat Completions ``model``, or
    ``None`` (no effort asked, or the model has no such parameter)."""
    if not effort or not _OPENAI_REASONING.match(_bare(model)):
        return None
    return OPENAI_EFFORTS.get(effort)


def thinking_budget(model: str, effort: str | None) -> int | None:
    """The extended-thinking ``budget_tokens`` for ``effort`` on Anthropic ``model``, or
    ``None`` (no effort asked, or the model does not think)."""
    if not effort or not _ANTHROPIC_THINKING.match(_bare(model)):
        return None
    return THINKING_BUDGETS.get(effort)


def effort_note(model_id: str, effort: str | None) -> str | None:
    """How ``effort`` reaches ``model_id`` (``provider/model``), for ``%agents``:
    ``reasoning_effort=high``, ``thinking budget 12288 tokens`` or why nothing is sent."""
    if not effort:
        return None
    api, _, model = model_id.partition("/")
    if api in _OPENAI_APIS and (value := openai_effort(model, effort)):
        return f"{effort} (reasoning_effort={value})"
    if api == "anthropic" and (budget := thinking_budget(model, effort)):
        return f"{effort} (extended thinking, budget {budget:,} tokens)"
    return f"{effort} (not sent: {model_id} has no reasoning-effort parameter)"


def _bare(model: str) -> str:
    # a proxy's "openai/o3-mini" or a dated "claude-sonnet-4-5-20250929": the name that counts
    return model.rsplit("/", 1)[-1]
