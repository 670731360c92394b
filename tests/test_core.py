"""Core models: message values, tool-call arguments, usage arithmetic and pricing, errors
and secret scrubbing."""

from __future__ import annotations

import pytest

from harness_nb.core import AssistantMessage, ToolCall, UnknownNameError, Usage, UserMessage, price_for
from harness_nb.core.secret import environment_secrets, scrub


def test_messages_compare_by_value_not_by_their_wire_cache():
    a, b = UserMessage(content="hi"), UserMessage(content="hi")
    a.wire["openai"] = {"role": "user", "content": "hi"}
    assert a == b and hash(a) == hash(b)
    assert UserMessage(content="hi") != AssistantMessage(content="hi")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"a": 1', "arguments are not valid JSON (Expecting ',' delimiter at char 7)"),
        ("[1, 2]", "arguments must be a JSON object, got list"),
    ],
)
def test_tool_call_arguments_errors_are_readable(raw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ToolCall(id="1", name="x", arguments=raw).parsed_arguments()
    assert ToolCall(id="1", name="x", arguments="  ").parsed_arguments() == {}


def test_usage_adds_and_prices_known_models():
    u = Usage(input_tokens=1_000_000, output_tokens=100_000, turns=1)
    u.add(Usage(input_tokens=1_000_000, cache_read_tokens=200_000, turns=2, tool_calls=3))
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.turns, u.tool_calls) == (2_000_000, 100_000, 200_000, 3, 3)
    assert u.priced("gpt-4o-mini-2024-07-18").cost == pytest.approx(2 * 0.15 + 0.1 * 0.60 + 0.2 * 0.075)
    assert u.priced("my-local-llama").cost is None
    assert price_for("claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    # "tokens" counts the cached part of prompts too: every token the model read or wrote
    assert u.summary().startswith("2,300,000 tokens · 3 turns · 3 tools")


def test_unknown_name_error_lists_the_valid_names():
    err = UnknownNameError("agent", "nope", ["b", "a"])
    assert str(err) == "unknown agent 'nope'; valid: a, b"
    assert str(UnknownNameError("task id", "bg-9", [])) == "unknown task id 'bg-9'; valid: (none)"


def test_scrub_removes_keys_and_partly_masked_echoes(monkeypatch):
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz"
    text = f"Incorrect API key provided: {key}. Also sk-proj-****uvwxyz and sk-proj-abcdefgh****"
    clean = scrub(text, [key])
    assert key not in clean and "abcdefgh" not in clean
    assert clean.startswith("Incorrect API key provided: [redacted]")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    monkeypatch.setenv("SHORT_API_KEY", "abc")
    assert "tok-1234567890" in environment_secrets() and "abc" not in environment_secrets()
