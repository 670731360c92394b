"""At most N tool calls of a run at once (issue 18, item 6: 500 parallel ``bash`` calls all
started at once). The calls here block on gates the test opens, so what is proved is the
order and the count inside, never a time: exactly N run at once, they start in the order
the model made them, a foreground subagent's calls share the parent's N while the
delegation call itself holds none, and a call waiting for an approval holds none."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness_nb import RunSettings
from harness_nb.core import ConfigError
from harness_nb.engine import Approved, Ask, Hook
from harness_nb.harness import Harness
from harness_nb.providers.scripted import ScriptedProvider
from harness_nb.subagents import SubAgentDefinition
from harness_nb.tools import ToolContext, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)


class Gates:
    """A tool whose calls wait for the test to open their gate; records who got in."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.inside: set[str] = set()
        self.peak = 0
        self.gates: dict[str, asyncio.Event] = {}

        @tool(read_only=True)
        async def gate(ctx: ToolContext, name: str) -> str:
            """Wait at a gate."""
            self.started.append(name)
            self.inside.add(name)
            self.peak = max(self.peak, len(self.inside))
            try:
                await self.gates.setdefault(name, asyncio.Event()).wait()
            finally:
                self.inside.discard(name)
            return f"through {name}"

        self.tool = gate

    def open(self, *names: str) -> None:
        for name in names:
            self.gates.setdefault(name, asyncio.Event()).set()

    async def until(self, count: int) -> None:
        """Wait (by yielding to the loop, never by the clock) until ``count`` calls started."""
        for _ in range(10_000):
            if len(self.started) >= count:
                return
            await asyncio.sleep(0)
        raise AssertionError(f"only {self.started} started, expected {count}")

    @staticmethod
    async def settle() -> None:
        """Give every runnable task its turns: whatever could start now has started."""
        for _ in range(200):
            await asyncio.sleep(0)


def _gate(name: str) -> dict[str, object]:
    return {"name": "gate", "arguments": {"name": name}}


def _harness(tmp_path: Path, script: object, gates: Gates, **kw: object) -> Harness:
    h = Harness(
        ScriptedProvider(script),
        workdir=tmp_path,
        tools=[gates.tool],
        include_user_agents=False,
        approval_policy="never",
        sandbox="off",
        **kw,
    )
    OPEN.append(h)
    return h


async def test_at_most_n_calls_run_at_once_and_they_start_in_call_order(tmp_path: Path) -> None:
    gates = Gates()
    names = [f"c{i:02}" for i in range(20)]
    h = _harness(tmp_path, [{"tool_calls": [_gate(n) for n in names]}, {"text": "all through"}], gates)
    h.configure(max_parallel_tool_calls=4)
    run = asyncio.create_task(h.run("go"))
    await gates.until(4)
    await gates.settle()
    assert gates.started == names[:4] and gates.inside == set(names[:4])
    gates.open("c02")  # one leaves: exactly the next in call order enters
    await gates.until(5)
    await gates.settle()
    assert gates.started == names[:5] and gates.inside == {"c00", "c01", "c03", "c04"}
    gates.open(*names)
    result = await run
    assert result.final_text == "all through"
    assert gates.started == names and gates.peak == 4


async def test_a_foreground_subagent_shares_its_parents_slots_and_the_task_call_holds_none(tmp_path: Path) -> None:
    """With 3 slots: the parent's two gates and the subagent's first take all three — so the
    ``task`` call itself holds none, or the subagent could never start — and the
    subagent's second call (made with its first) waits for one of the parent's."""
    gates = Gates()
    script = {
        "main": [
            {
                "tool_calls": [
                    {"name": "task", "arguments": {"subagent_type": "gater", "prompt": "pass your gates"}},
                    _gate("p1"),
                    _gate("p2"),
                ]
            },
            {"text": "done"},
        ],
        "gater": [{"tool_calls": [_gate("s1"), _gate("s2")]}, {"text": "sub done"}],
    }
    h = _harness(tmp_path, script, gates, max_parallel_tool_calls=3)
    h.registry.register(SubAgentDefinition(name="gater", description="Passes gates.", tools=["gate"]))
    run = asyncio.create_task(h.run("go"))
    await gates.until(3)
    await gates.settle()
    assert gates.started == ["p1", "p2", "s1"], "s2 waits: the subagent's calls count with the parent's"
    gates.open("p1")
    await gates.until(4)
    assert gates.started[-1] == "s2" and gates.inside == {"p2", "s1", "s2"} and gates.peak == 3
    gates.open("p2", "s1", "s2")
    assert (await run).final_text == "done"


async def test_a_call_waiting_for_approval_holds_no_slot_and_keeps_its_turn_once_approved(tmp_path: Path) -> None:
    """With one slot: the first call waits for the person; the second runs meanwhile. Once
    approved, the first goes before the calls made after it."""
    gates = Gates()
    answer: asyncio.Future[Approved] = asyncio.get_running_loop().create_future()

    async def approval(call: object, reason: str, risk: str) -> Approved:
        return await answer

    class AskForA(Hook):
        async def before_tool(self, call, ctx):  # type: ignore[no-untyped-def]
            if call.name == "gate" and '"a"' in call.arguments:
                return Ask("a needs approval", "low")
            return await super().before_tool(call, ctx)

    script = [{"tool_calls": [_gate("a"), _gate("b"), _gate("c")]}, {"text": "done"}]
    h = _harness(tmp_path, script, gates, hooks=[AskForA()], approval=approval, max_parallel_tool_calls=1)
    run = asyncio.create_task(h.run("go"))
    await gates.until(1)
    await gates.settle()
    assert gates.started == ["b"], "a waits for the person, b takes the slot"
    answer.set_result(Approved())
    await gates.settle()
    gates.open("b")
    await gates.until(2)
    assert gates.started == ["b", "a"], "approved, a keeps its turn ahead of c"
    gates.open("a", "c")
    assert (await run).final_text == "done"
    assert gates.started == ["b", "a", "c"] and gates.peak == 1


def test_the_limit_is_a_run_setting() -> None:
    assert RunSettings().limits.max_parallel_tool_calls == 8
    assert RunSettings(max_parallel_tool_calls=2).limits.max_parallel_tool_calls == 2
    with pytest.raises(ConfigError, match="max_parallel_tool_calls must be a whole number above 0"):
        RunSettings(max_parallel_tool_calls=0)
