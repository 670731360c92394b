"""The mailbox: priority (shutdown > lead > peer, FIFO within), the wake-up without polling,
and many concurrent producers losing, duplicating and reordering nothing."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

import pytest

from harness_nb.team import TEAM_LEAD, Mailbox, Message, by_priority, pick_priority, priority_class


def msg(sender: str, text: str, kind: str = "message") -> Message:
    return Message(sender, kind, text)  # type: ignore[arg-type]


def test_pick_priority_prefers_shutdown_then_the_lead_then_peers_first_in_first_out() -> None:
    queue = [
        msg("bob", "peer 1"),
        msg(TEAM_LEAD, "lead 1"),
        msg("carol", "peer 2"),
        msg(TEAM_LEAD, "stop", "shutdown_request"),
        msg(TEAM_LEAD, "lead 2"),
        msg("bob", "done", "idle_notification"),
        msg(TEAM_LEAD, "stop again", "shutdown_request"),
    ]
    assert pick_priority(queue) == 3
    assert [m.text for m in by_priority(queue)] == [
        "stop", "stop again", "lead 1", "lead 2", "peer 1", "peer 2", "done",
    ]
    assert pick_priority([msg("bob", "a"), msg("carol", "b")]) == 0
    assert pick_priority([msg("bob", "a"), msg(TEAM_LEAD, "b")]) == 1
    assert priority_class(msg("alice", "bye", "shutdown_response")) == 0
    with pytest.raises(ValueError):
        pick_priority([])


async def test_take_removes_only_the_most_urgent_and_drain_keeps_arrival_order() -> None:
    box = Mailbox("alice")
    for m in (msg("bob", "peer"), msg(TEAM_LEAD, "lead"), msg("carol", "peer 2")):
        box.send(m)
    assert box.take().text == "lead"  # type: ignore[union-attr]
    assert [m.text for m in box.peek()] == ["peer", "peer 2"]
    box.send(msg(TEAM_LEAD, "stop", "shutdown_request"))
    assert [m.text for m in box.drain()] == ["peer", "peer 2", "stop"]
    assert box.drain() == [] and box.take() is None and len(box) == 0


async def test_wait_sleeps_until_a_message_arrives_and_returns_at_once_when_one_waits() -> None:
    box = Mailbox("alice")
    waiter = asyncio.create_task(box.wait())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()  # nothing queued: still asleep
    box.send(msg(TEAM_LEAD, "wake up"))
    async with asyncio.timeout(1):
        await waiter
    async with asyncio.timeout(1):
        await box.wait()  # still queued: no sleeping
    box.take()
    again = asyncio.create_task(box.wait())
    await asyncio.sleep(0)
    assert not again.done()  # emptied by take: the wake-up was reset
    again.cancel()
    with pytest.raises(asyncio.CancelledError):
        await again


async def _produce(box: Mailbox, sender: str, count: int, rng: random.Random) -> None:
    for i in range(count):
        box.send(msg(sender, f"{sender}:{i}"))
        if rng.random() < 0.3:
            await asyncio.sleep(0)  # interleave with the other producers and the consumer


async def test_ten_thousand_messages_from_eight_producers_none_lost_duplicated_or_reordered() -> None:
    box = Mailbox("alice")
    rng = random.Random(5)
    senders = [TEAM_LEAD, *(f"peer{i}" for i in range(7))]
    per_sender = 1250
    received: list[Message] = []

    async def consume() -> None:
        while len(received) < len(senders) * per_sender:
            await box.wait()
            received.extend(box.drain())

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(30):
        await asyncio.gather(*(_produce(box, s, per_sender, rng) for s in senders))
        await consumer
    assert len(received) == 10_000
    assert len({m.id for m in received}) == 10_000
    by_sender: defaultdict[str, list[str]] = defaultdict(list)
    for m in received:
        by_sender[m.sender].append(m.text)
    assert set(by_sender) == set(senders)
    for sender, texts in by_sender.items():
        assert texts == [f"{sender}:{i}" for i in range(per_sender)]
    assert [m.id for m in received] == sorted(m.id for m in received)  # drain keeps arrival order


async def test_taking_one_at_a_time_under_concurrent_mixed_senders_follows_priority() -> None:
    box = Mailbox("alice")
    rng = random.Random(11)
    queued = [0, 0, 0]  # messages of each priority class sent and not yet taken

    async def produce(sender: str, kinds: list[str]) -> None:
        for i in range(1250):
            m = msg(sender, f"{sender}:{i}", rng.choice(kinds))
            box.send(m)
            queued[priority_class(m)] += 1
            if rng.random() < 0.3:
                await asyncio.sleep(0)

    producers = [produce(TEAM_LEAD, ["message", "message", "shutdown_request"])]
    producers += [produce(f"peer{i}", ["message", "message", "idle_notification"]) for i in range(7)]
    taken: list[Message] = []
    max_waiting = 0

    async def consume() -> None:
        nonlocal max_waiting
        while len(taken) < 10_000:
            await box.wait()
            max_waiting = max(max_waiting, len(box))
            m = box.take()
            assert m is not None
            cls = priority_class(m)
            # nothing still queued may be more urgent than what was just taken
            assert not any(queued[:cls]), (m, queued)
            queued[cls] -= 1
            taken.append(m)
            if rng.random() < 0.5:
                await asyncio.sleep(0)

    consumer = asyncio.create_task(consume())
    async with asyncio.timeout(30):
        await asyncio.gather(*producers)
        await consumer
    assert max_waiting > 100  # the consumer really chose among many waiting messages
    assert len({m.id for m in taken}) == 10_000 and queued == [0, 0, 0]
    for cls in (0, 1, 2):
        ids = [m.id for m in taken if priority_class(m) == cls]
        assert ids and ids == sorted(ids)  # first in, first out within a class
    per_sender: defaultdict[tuple[str, int], list[int]] = defaultdict(list)
    for m in taken:
        per_sender[(m.sender, priority_class(m))].append(int(m.text.split(":")[1]))
    assert all(nums == sorted(nums) for nums in per_sender.values())
