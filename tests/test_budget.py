"""Budgets in USD and tokens, checked before each model call: a run, a subagent and a
parallel fan-out are stopped before the call that would pass a budget (the model
receives exactly the calls that fit), the parent goes on, and every cost is exactly what
the price table says."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from harness_nb.core import (
    BudgetSpentError,
    BudgetWarning,
    ConfigError,
    Price,
    PriceTable,
    SubagentUpdate,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from harness_nb.engine import Delegation, HookRegistry, Limits, ParentContext, UsageAccount
from harness_nb.engine.budget import BudgetScope, CallEstimate, PromptTally
from harness_nb.harness import Harness
from harness_nb.providers import ModelRequest
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition, SubagentRunner, TaskStatus, parse_agent_text
from harness_nb.testing import FakeLLMServer
from harness_nb.tools import ToolContext, ToolRegistry, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

PRICE = Price(input=1.0, output=10.0)  # USD per million tokens; cache 0.1 and 1.25
PRICES = {"test-model": {"input": 1.0, "output": 10.0}}


@tool(read_only=True)
async def echo(ctx: ToolContext, text: str) -> str:
    """Return the text."""
    return text


def cost(input_tokens: int, output_tokens: int) -> float:
    """One call's cost, straight from the table (the same arithmetic the harness does)."""
    return PRICE.cost(Usage(input_tokens=input_tokens, output_tokens=output_tokens))


def step(text: str = "", *, echo_text: str | None = None, input_tokens: int, output_tokens: int, delay: float = 0) -> dict:
    out: dict = {"text": text, "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}
    if echo_text is not None:
        out["tool_calls"] = [{"name": "echo", "arguments": {"text": echo_text}}]
    if delay:
        out["delay"] = delay
    return out


class Limited(ScriptedProvider):
    """A scripted model that sends ``max_tokens`` like a real provider: the budget's
    estimate counts that much output."""

    def __init__(self, script, *, limits: dict[str, int], **kw) -> None:
        super().__init__(script, model="test-model", **kw)
        self.limits = limits

    def output_limit(self, request: ModelRequest) -> int | None:
        return self.limits.get(request.agent)




def harness(tmp_path: Path, provider: ScriptedProvider, **kw) -> Harness:
    h = Harness(provider, workdir=tmp_path, tools=[echo], include_user_agents=False, approval_policy="never", prices=PRICES, **kw)
    OPEN.append(h)
    return h


def requests_of(provider: ScriptedProvider, agent: str) -> int:
    return sum(1 for r in provider.requests if r.agent == agent)


# -- the estimate ------------------------------------------------------------------------


def test_the_estimate_expects_the_previous_prompt_in_the_cache_while_the_history_is_unchanged():
    tally = PromptTally()
    messages: list = [UserMessage(content="x" * 40)]
    # nothing seen yet: the meter's prompt size, no output known, nothing cached
    assert tally.estimate(messages, 23, output_limit=None, cache_writes=False) == CallEstimate(23, 0)
    tally.observe(messages, Usage(input_tokens=500, cache_read_tokens=200, output_tokens=30))
    messages.append(ToolResultMessage(tool_call_id="1", name="echo", content="y" * 9))
    # the 700 prompt tokens the cache now holds; the largest answer so far as the output
    assert tally.estimate(messages, 703, output_limit=None, cache_writes=False) == CallEstimate(703, 30, cached_tokens=700)
    assert tally.estimate(messages, 703, output_limit=1000, cache_writes=True).output_tokens == 1000
    # compaction replaced a message that call sent: its cached prefix is gone
    messages[0] = UserMessage(content="[summary]")
    assert tally.estimate(messages, 40, output_limit=None, cache_writes=False).cached_tokens == 0
    # a call that used no cache leaves nothing cached
    tally.observe(messages, Usage(input_tokens=40, output_tokens=5))
    assert tally.estimate(messages, 45, output_limit=None, cache_writes=False) == CallEstimate(45, 30)


def test_the_estimated_cost_prices_the_cached_prefix_as_a_read_and_the_rest_as_a_write():
    price = Price(input=3.0, output=15.0)
    estimate = CallEstimate(10_000, 2_000, cached_tokens=9_000, cache_writes=True)
    assert estimate.cost(price) == (9_000 * 0.3 + 1_000 * 3.75 + 2_000 * 15.0) / 1_000_000
    plain = CallEstimate(10_000, 2_000)
    assert plain.cost(price) == (0 * 0.3 + 10_000 * 3.0 + 2_000 * 15.0) / 1_000_000


# -- a run -------------------------------------------------------------------------------


async def test_a_run_stops_before_the_call_that_would_pass_its_usd_budget(tmp_path):
    c = cost(10_000, 1_000)  # 0.02
    provider = ScriptedProvider([step(echo_text="x", input_tokens=10_000, output_tokens=1_000)] * 5, model="test-model")
    h = harness(tmp_path, provider, budget_usd=0.045)
    events: list = []
    result = await h.run("spend", on_event=events.append)
    # call 3 would hold ~10,000 prompt tokens and 1,000 output tokens (the largest answer
    # so far): about $0.02 more than the $0.005 left after two calls
    assert len(provider.requests) == 2 and result.turns == 2
    assert result.stop_reason == "budget_usd"
    assert result.usage.cost == c + c and h.usage.cost == c + c
    assert re.search(r"next call may cost \$0\.020\d and this run has \$0\.0050 of its \$0\.0450 budget left", result.final_text)
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    assert [(w.limit, w.spent, w.budget) for w in warnings] == [("budget_usd", c + c, 0.045)]
    assert warnings[0].text() == "used 89% of the $0.0450 budget ($0.0400)"


async def test_a_budget_on_a_model_without_a_price_stops_before_any_call(tmp_path):
    provider = ScriptedProvider([{"text": "never sent"}], model="mystery-model")
    h = harness(tmp_path, provider, budget_usd=1.0)
    result = await h.run("hello")
    assert provider.requests == [] and result.stop_reason == "budget_usd"
    assert "no price is known for scripted/mystery-model" in result.final_text
    assert "Harness(prices=...) or %config HarnessNB.prices" in result.final_text


async def test_a_budgeted_run_over_http_sends_only_the_calls_that_fit(tmp_path, monkeypatch, no_provider_env):
    """Anthropic over real HTTP: max_tokens bounds the output, the fresh part of a prompt
    is priced as a cache write (the provider writes its cache)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    usage = {"input_tokens": 2_000, "output_tokens": 50}
    script = [{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}], "usage": usage}] * 4
    async with FakeLLMServer(script) as srv:
        h = Harness(
            "anthropic/claude-haiku-4-5",
            workdir=tmp_path,
            base_url=srv.url,
            tools=[echo],
            include_user_agents=False,
            provider_options={"max_tokens": 50},
            budget_usd=0.006,
        )
        OPEN.append(h)
        result = await h.run("spend")
    per_call = (2_000 * 1.0 + 50 * 5.0) / 1_000_000  # claude-haiku-4-5: $1 in, $5 out
    # call 3: ~2,000 prompt tokens at the $1.25 write price + 50 output: $0.00276 > $0.0015 left
    assert len(srv.requests) == 2 and result.stop_reason == "budget_usd"
    assert result.usage.cost == per_call + per_call


async def test_the_token_budget_counts_subagents_and_cached_tokens(tmp_path):
    provider = Limited(
        {
            "main": [{"tool_calls": [{"name": "task", "arguments": {"subagent_type": "general-purpose", "prompt": "go"}}],
                      "usage": {"input_tokens": 100, "cache_read_tokens": 900, "output_tokens": 10}},
                     {"text": "never reached"}],
            "general-purpose": [{"text": "did it", "usage": {"input_tokens": 500, "output_tokens": 100}}],
        },
        limits={"main": 100, "general-purpose": 100},
    )
    h = harness(tmp_path, provider, token_budget=1_800)
    result = await h.run("delegate")
    # main 1,010 + child 600 = 1,610 of 1,800: main's next call (1,000+ prompt) cannot fit
    assert result.usage.total_tokens == 1_610 and result.stop_reason == "token_budget"
    assert requests_of(provider, "main") == 1 and requests_of(provider, "general-purpose") == 1


# -- subagents ---------------------------------------------------------------------------


def delegating(child_steps: list[dict], *, child: str = "general-purpose", tasks: int = 1) -> dict:
    main_call = {"name": "task", "arguments": {"subagent_type": child, "prompt": "work"}}
    if tasks > 1:
        main_call = {"name": "task", "arguments": {"tasks": [{"subagent_type": child, "prompt": f"work {n}"} for n in range(tasks)]}}
    return {
        "main": [
            {"tool_calls": [main_call], "usage": {"input_tokens": 1, "output_tokens": 100}},
            {"text": "went on without it", "usage": {"input_tokens": 1, "output_tokens": 100}},
        ],
        child: child_steps,
    }


@pytest.mark.parametrize("how", ["subagent_budget_usd", "maxBudgetUsd"])
async def test_a_subagent_that_runs_out_is_an_error_to_its_parent_which_goes_on(tmp_path, how):
    child_steps = [step(echo_text="x", input_tokens=10_000, output_tokens=1_000)] * 3 + [step("never", input_tokens=1, output_tokens=1)]
    provider = ScriptedProvider(delegating(child_steps, child="worker"), model="test-model")
    h = harness(tmp_path, provider, **({"subagent_budget_usd": 0.05} if how == "subagent_budget_usd" else {}))
    text = "---\nname: worker\ndescription: Works.\n" + ("maxBudgetUsd: 0.05\n" if how == "maxBudgetUsd" else "") + "---\nWork."
    h.registry.register(parse_agent_text(text, source="worker.md").definitions[0])
    result = await h.run("delegate")
    assert requests_of(provider, "worker") == 2  # calls 1 and 2 fit in $0.05; call 3 would not
    assert result.final_text == "went on without it" and requests_of(provider, "main") == 2
    (returned,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert returned.is_error and 'state="error"' in returned.content and "ran out of budget" in returned.content
    entry = h.tracker.get("fg-1")
    assert entry.status is TaskStatus.FAILED and entry.run_result.stop_reason == "budget_usd"
    c = cost(10_000, 1_000)
    assert entry.usage.cost == c + c
    assert result.usage.cost == cost(1, 100) + c + c + cost(1, 100)


async def test_a_subagent_is_clamped_to_what_its_parent_has_left(tmp_path):
    child_steps = [step(echo_text="x", input_tokens=10_000, output_tokens=1_000)] * 3
    provider = ScriptedProvider(delegating(child_steps), model="test-model")
    h = harness(tmp_path, provider, budget_usd=0.06, subagent_budget_usd=1.0)
    result = await h.run("delegate")
    # the child may spend what main had left when it started: $0.06 - $0.001001
    assert requests_of(provider, "general-purpose") == 2
    assert "this run has $0.0190 of its $0.0590 budget left" in h.tracker.get("fg-1").error
    assert result.final_text == "went on without it"


async def test_a_parallel_fan_out_never_spends_past_the_parents_budget_together(tmp_path):
    """Three children start at once; calls in flight are reserved against main's budget,
    so only one of them gets its second call, and main still has room for its answer."""
    children = []
    for n in range(3):  # each child its own steps, however their calls interleave
        children.append({**step(echo_text="x", input_tokens=1, output_tokens=1_000, delay=0.02), "match": f"work {n}"})
        children.append({**step("done", input_tokens=1, output_tokens=1_000), "match": f"work {n}"})
    script = delegating(children, tasks=3)
    provider = Limited(script, limits={"main": 100, "general-purpose": 1_000})
    h = harness(tmp_path, provider, budget_usd=0.046)
    events: list = []
    result = await h.run("fan out", on_event=events.append)
    assert requests_of(provider, "general-purpose") == 4  # 3 first calls, 1 second call
    assert requests_of(provider, "main") == 2 and result.final_text == "went on without it"
    states = sorted(h.tracker.get(f"fg-{n}").status for n in (1, 2, 3))
    assert states == [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.FAILED]
    stopped = [e for e in events if isinstance(e, SubagentUpdate) and getattr(e.event, "stop_reason", "") == "budget_usd"]
    assert len(stopped) == 2
    m, c = cost(1, 100), cost(1, 1_000)
    assert result.usage.cost == m + c + c + c + c + m
    assert result.usage.cost <= 0.046


def parent_of(limits: Limits, account: UsageAccount, workdir: Path) -> ParentContext:
    """A parent run with ``limits`` that has billed ``account`` so far."""
    return ParentContext(
        provider=ScriptedProvider([]),
        tools=ToolRegistry([echo]),
        hooks=HookRegistry(),
        limits=limits,
        workdir=workdir,
        approval=None,
        account=account,
        budget=BudgetScope(limits, account),
    )


def test_no_subagent_starts_when_its_parent_has_nothing_left(tmp_path):
    account = UsageAccount()
    account.credit(Usage(input_tokens=1, cost=0.45))
    limits = Limits(budget_usd=0.5)
    parent = parent_of(limits, account, tmp_path)
    runner = SubagentRunner(None)  # type: ignore[arg-type]
    definition = SubAgentDefinition(name="worker", description="Works.", max_budget_usd=0.1)
    # the smallest of its own $0.10 and the $0.05 its parent has left
    assert runner.child_limits(definition, parent).budget_usd == 0.5 - 0.45
    account.credit(Usage(cost=0.05))
    with pytest.raises(BudgetSpentError, match=r"worker was not started: main has \$0.0000 left of its budget"):
        runner.child_limits(definition, parent)


def test_a_childs_token_budget_is_what_its_parent_has_left(tmp_path):
    account = UsageAccount()
    account.credit(Usage(input_tokens=300, output_tokens=100))
    limits = Limits(token_budget=1_000)
    parent = replace(parent_of(limits, account, tmp_path), delegation=Delegation(budget_usd=0.2))
    child = SubagentRunner(None).child_limits(  # type: ignore[arg-type]
        SubAgentDefinition(name="w", description="W.", max_turns=3), parent
    )
    assert (child.token_budget, child.budget_usd, child.max_turns) == (600, 0.2, 3)


# -- settings ----------------------------------------------------------------------------


def test_agent_files_accept_max_budget_usd_in_either_spelling():
    for key in ("maxBudgetUsd", "max_budget_usd", "max-budget-usd"):
        loaded = parse_agent_text(f"---\nname: a\ndescription: A.\n{key}: 0.25\n---\n", source="a.md")
        assert loaded.definitions[0].max_budget_usd == 0.25, key
    bad = parse_agent_text("---\nname: a\ndescription: A.\nmaxBudgetUsd: -1\n---\n", source="a.md")
    assert not bad.definitions and "max_budget_usd" in bad.warnings[0]


def test_budget_and_price_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="budget_usd must be a number above 0"):
        Harness(ScriptedProvider([]), workdir=tmp_path, budget_usd=-1)
    with pytest.raises(ConfigError, match="subagent_budget_usd must be a number above 0"):
        Harness(ScriptedProvider([]), workdir=tmp_path, subagent_budget_usd=-0.5)
    with pytest.raises(ConfigError, match=r"prices\['m'\]: output: missing"):
        Harness(ScriptedProvider([]), workdir=tmp_path, prices={"m": {"input": 1}})
    h = Harness(ScriptedProvider([]), workdir=tmp_path, budget_usd=1.0, subagent_budget_usd=0.5)
    with pytest.raises(ConfigError, match="prices"):
        h.configure(prices={"m": {"input": "free"}}, budget_usd=2.0)
    assert h.settings.limits.budget_usd == 1.0  # nothing changed: a bad value leaves all in force
    h.configure(budget_usd=0, subagent_budget_usd=0, prices={"m": {"input": 1, "output": 2}})
    assert h.settings.limits.budget_usd is None and h.settings.delegation.budget_usd is None
    assert h.settings.price_table == PriceTable({"m": Price(input=1, output=2)})
    assert h.run_context().prices is h.settings.price_table


# -- where cost is shown -----------------------------------------------------------------


async def test_agents_show_their_budget_and_tasks_their_cost(tmp_path):
    from harness_nb.notebook.magics.agent import AgentTable, TaskTable, task_details

    child_steps = [step("done", input_tokens=10_000, output_tokens=1_000)]
    provider = ScriptedProvider(delegating(child_steps, child="worker"), model="test-model")
    h = harness(tmp_path, provider, sandbox="off")
    h.registry.register(SubAgentDefinition(name="worker", description="Works.", max_budget_usd=0.25))
    await h.run("delegate")
    listing = repr(AgentTable(h))
    assert "worker  [builtin]\n    tools: (all of the main agent's) echo, ask_person\n    model: inherit (scripted/test-model)\n    budget: $0.2500 a run" in listing
    assert ">budget</th>" in AgentTable(h)._repr_html_() and ">$0.2500 a run</td>" in AgentTable(h)._repr_html_()
    table = TaskTable(h.tracker.list(), total=h.usage)
    lines = repr(table).splitlines()
    assert lines[0].split() == ["id", "agent", "description", "state", "elapsed", "tokens", "cost"]
    assert lines[1].startswith("fg-1") and lines[1].endswith("11,000  $0.0200")
    assert lines[2] == "session: 11,202 tokens · $0.0220"
    assert "<p>session: 11,202 tokens · $0.0220</p>" in table._repr_html_()
    assert "· $0.0200" in task_details(h.tracker.get("fg-1"))
    assert repr(TaskTable([], total=Usage())) == "no tasks yet\nsession: 0 tokens"
