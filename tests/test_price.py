"""Prices: the built-in list, derived cache prices, your own prices on top, and costs that
are exactly what the table says."""

from __future__ import annotations

import pytest

from harness_nb.core import PRICES, ConfigError, Price, PriceTable, Usage, price_for


def test_cache_prices_follow_the_anthropic_ratios_unless_given():
    assert Price(input=3.0, output=15.0) == Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    own = Price(input=1.0, output=2.0, cache_read=0.5)
    assert (own.cache_read, own.cache_write) == (0.5, 1.25)
    # OpenAI charges nothing extra to write its cache and gives its own read price
    assert PRICES["gpt-4.1"] == Price(input=2.0, output=8.0, cache_read=0.5, cache_write=2.0)
    assert PRICES["claude-opus-4-5"] == Price(input=5.0, output=25.0, cache_read=0.5, cache_write=6.25)


def test_a_cost_is_exactly_the_table_figure_for_each_kind_of_token():
    usage = Usage(input_tokens=1_234, output_tokens=567, cache_read_tokens=40_000, cache_write_tokens=2_500)
    cost = PriceTable().priced(usage, "anthropic/claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929").cost
    assert cost == (1_234 * 3.0 + 567 * 15.0 + 40_000 * 0.3 + 2_500 * 3.75) / 1_000_000
    openai = PriceTable().priced(Usage(input_tokens=100, output_tokens=10, cache_read_tokens=1_024), "gpt-4o-mini")
    assert openai.cost == (100 * 0.15 + 10 * 0.60 + 1_024 * 0.075) / 1_000_000


def test_names_find_their_entry_with_a_date_or_a_provider_prefix():
    assert price_for("gpt-4o-2024-08-06") is PRICES["gpt-4o"]
    assert price_for("gpt-4o-mini-2024-07-18") is PRICES["gpt-4o-mini"]  # the longest key wins
    assert price_for("claude-sonnet-4-20250514") is PRICES["claude-sonnet-4"]
    assert price_for("claude-3-5-haiku-latest") is PRICES["claude-3-5-haiku"]
    assert price_for("my-local-llama") is None


def test_your_own_prices_win_over_the_built_in_ones():
    table = PriceTable.of(
        {"openai-compatible/qwen2.5": {"input": 0, "output": 0}, "gpt-4o": {"input": 1.0, "output": 4.0}}
    )
    assert table.lookup("openai-compatible/qwen2.5", "qwen2.5") == Price(input=0, output=0)
    assert table.lookup("openai/gpt-4o", "gpt-4o-2024-08-06") == Price(input=1.0, output=4.0)
    assert table.lookup("openai/gpt-4.1", "gpt-4.1") is PRICES["gpt-4.1"]
    assert PriceTable.of(table) is table and PriceTable.of(None) == PriceTable()


def test_a_call_without_a_price_or_without_usage_is_never_shown_as_free():
    table = PriceTable()
    unpriced = table.priced(Usage(input_tokens=10, output_tokens=2), "ollama/llama3", "llama3")
    assert unpriced.cost is None and unpriced.unpriced_calls == 1
    silent = table.priced(Usage(unreported_calls=1), "gpt-4o")
    assert silent.cost is None and silent.unpriced_calls == 0
    total = Usage()
    total.add(table.priced(Usage(input_tokens=1_000_000), "gpt-4o"))
    total.add(unpriced)
    assert total.cost == 2.5 and total.cost_label() == "$2.50 (1 call unpriced)"
    assert unpriced.cost_label() == "" and Usage().cost_label() == ""  # no figure rather than $0
    assert Usage(cost=0.01234).summary() == "0 tokens · 0 turns · 0 tools · $0.0123"


def test_tokens_count_the_cached_part_of_a_prompt_too():
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=1_000, cache_write_tokens=100)
    assert (usage.prompt_tokens, usage.total_tokens) == (1_110, 1_115)


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ({"m": {"input": -1, "output": 1}}, "prices['m']: input must be a number of USD per million tokens, 0 or more, not -1"),
        ({"m": {"input": 1}}, "prices['m']: output: missing (input and output are required"),
        ({"m": {"input": 1, "output": 1, "cached": 0.1}}, "prices['m']: cached: unknown field; a price has input, output"),
        ({"m": {"input": "cheap", "output": 1}}, "input must be a number of USD per million tokens"),
        ({"": {"input": 1, "output": 1}}, "a model name must be non-empty text"),
        (["gpt-4o"], "prices must be a mapping of model name to price"),
    ],
)
def test_a_bad_price_is_one_clear_config_error(prices, message):
    with pytest.raises(ConfigError) as info:
        PriceTable.of(prices)
    assert message in str(info.value)


def test_a_batch_request_costs_the_price_s_batch_share_half_unless_given():
    usage = Usage(input_tokens=1_000, output_tokens=100, cache_read_tokens=500, cache_write_tokens=200)
    online = PriceTable().priced(usage, "claude-haiku-4-5").cost
    assert PriceTable().priced(usage, "claude-haiku-4-5", batch=True).cost == pytest.approx(online / 2)
    own = PriceTable.of({"my-model": {"input": 1.0, "output": 2.0, "batch": 0.4}})
    assert own.priced(usage, "my-model", batch=True).cost == pytest.approx(own.priced(usage, "my-model").cost * 0.4)
    with pytest.raises(ConfigError, match=r"prices\['x'\]: batch must be the share of the price a batch request costs, 0 to 1, not 2"):
        PriceTable.of({"x": {"input": 1, "output": 1, "batch": 2}})
