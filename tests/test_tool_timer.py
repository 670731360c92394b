"""The tool calls' timeouts, kept by one timer per engine (``engine/limits.py``: ``ToolTimer``).

Each call used to schedule and cancel a timer of its own (``asyncio.timeout``). These tests
hold the one timer to what that gave: a call past its deadline is cancelled and told so,
calls with later deadlines are not, an outside cancel is never taken for a timeout, a call
that swallows the cancel leaves its task able to go on, and the timer follows an engine to
another event loop. The calls wait on events the test sets, so what is proved is which call
timed out, never how long anything took."""

from __future__ import annotations

import asyncio

import pytest

from harness_nb.engine.limits import ToolTimer


async def bounded(timer: ToolTimer, seconds: float, work: asyncio.Future[str] | asyncio.Event) -> str:
    """What the engine does around a call: ``work`` (awaited), bounded by ``seconds``."""
    deadline = timer.start(seconds)
    try:
        if isinstance(work, asyncio.Event):
            await work.wait()
            outcome = "done"
        else:
            outcome = await work
    except BaseException as exc:
        if not timer.finish(deadline, exc):
            raise
        return "timed out"
    timer.finish(deadline)
    return outcome


async def test_a_call_past_its_deadline_times_out_and_the_task_goes_on() -> None:
    timer = ToolTimer()
    assert await bounded(timer, 0.01, asyncio.Event()) == "timed out"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # the timeout's cancel was taken back
    await asyncio.sleep(0)  # and no cancel is left pending for the next await


async def test_only_the_calls_past_their_deadlines_time_out() -> None:
    timer = ToolTimer()
    slow, patient = asyncio.Event(), asyncio.Event()
    short = asyncio.create_task(bounded(timer, 0.01, slow))
    long = asyncio.create_task(bounded(timer, 60, patient))
    assert await short == "timed out"
    assert not long.done()  # the timer fired for the first deadline only
    patient.set()
    assert await long == "done"


async def test_a_later_call_with_an_earlier_deadline_sets_the_timer_sooner() -> None:
    timer = ToolTimer()
    patient, hurried = asyncio.Event(), asyncio.Event()
    long = asyncio.create_task(bounded(timer, 60, patient))
    await asyncio.sleep(0)  # the 60 s deadline set the timer first
    assert await bounded(timer, 0.01, hurried) == "timed out"
    patient.set()
    assert await long == "done"


async def test_the_timer_set_for_a_finished_call_serves_the_next() -> None:
    """A call that ends leaves the timer set for its deadline; a later call with a later
    deadline is still cut off at its own, once the timer has fired and set itself again."""
    timer = ToolTimer()
    done = asyncio.Event()
    done.set()
    assert await bounded(timer, 0.01, done) == "done"
    later = asyncio.Event()
    assert await bounded(timer, 0.05, later) == "timed out"


async def test_an_outside_cancel_is_not_a_timeout() -> None:
    timer = ToolTimer()
    call = asyncio.create_task(bounded(timer, 60, asyncio.Event()))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_an_outside_cancel_racing_the_timeout_still_propagates() -> None:
    """The timer and an interrupt cancel the same call: the interrupt wins, as with
    ``asyncio.timeout`` (the task was cancelled by someone else too)."""
    timer = ToolTimer()
    started = asyncio.Event()

    async def call() -> str:
        deadline = timer.start(0.01)
        started.set()
        try:
            await asyncio.Event().wait()
        except BaseException as exc:
            asyncio.current_task().cancel()  # type: ignore[union-attr]  # the interrupt, meanwhile
            if not timer.finish(deadline, exc):
                raise
            return "timed out"
        return "done"

    task = asyncio.create_task(call())
    await started.wait()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_call_that_swallows_the_cancel_leaves_no_cancel_behind() -> None:
    timer = ToolTimer()

    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "kept going"  # a tool that catches everything
        return "never"

    assert await bounded(timer, 0.01, asyncio.ensure_future(stubborn())) == "kept going"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)


def test_the_timer_follows_the_engine_to_another_loop() -> None:
    timer = ToolTimer()
    for _ in range(2):  # each asyncio.run is a new loop; the second must not use the first's
        assert asyncio.run(bounded(timer, 0.01, asyncio.Event())) == "timed out"
