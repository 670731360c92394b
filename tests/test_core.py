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


# Errors that stay outside HarnessError's tree, each with its reason.
OUTSIDE_THE_TREE = {
    "harness_nb.core.fs.NotRegularFileError": "an OSError: handled with every other error of opening a file",
    "harness_nb.core.fs.SymlinkError": "an OSError: handled with every other error of opening a file",
    "harness_nb.providers.window.WindowUnansweredError": "a window lookup the server did not answer, caught inside providers/",
    "harness_nb.sandbox.checkpoints.gitstore.StoreError": "an OSError of the checkpoint store, caught inside sandbox/",
    "harness_nb.sandbox.helper.HelperError": "the root helper's failure, caught inside sandbox/",
    "harness_nb.tools.ripgrep.RgPatternError": "a pattern rg refuses, caught by the grep tool",
}


def _error_classes() -> dict[str, type[Exception]]:
    """Every Exception class harness_nb defines, by its dotted name (private ones left out;
    the watchdog's KeyboardInterrupts are interrupts, not errors)."""
    import importlib
    import inspect
    import pkgutil

    import harness_nb

    found = {}
    for info in pkgutil.walk_packages(harness_nb.__path__, "harness_nb."):
        if info.name in ("harness_nb.__main__",) or info.name.startswith("harness_nb.demo"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            ours = inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == info.name
            if ours and not name.startswith("_"):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_error_is_in_the_one_tree_drawn_in_core_error():
    """core/error.py holds every error harness_nb raises on purpose, each one ending in
    ``Error`` and drawn in the module's docstring; anything else is named above with why."""
    from harness_nb.core import error

    errors = _error_classes()
    assert set(OUTSIDE_THE_TREE) <= set(errors), "an exception listed outside the tree is gone: drop it"
    stray = sorted(n for n in errors if not n.startswith("harness_nb.core.error.") and n not in OUTSIDE_THE_TREE)
    assert stray == [], f"define these in core/error.py, under HarnessError: {stray}"
    assert error.__doc__ is not None
    for dotted, cls in errors.items():
        assert cls.__name__.endswith("Error"), dotted
        if dotted.startswith("harness_nb.core.error."):
            assert issubclass(cls, error.HarnessError), dotted
            drawn = cls is error.HarnessError or f"── {cls.__name__} " in error.__doc__
            assert drawn, f"{cls.__name__} is not drawn in core/error.py's tree"
