"""``LoopPacer``: a background map lets rows start while the kernel's loop keeps up, and
freezes the heap from full collections while paced maps run (``map_pacer.py``)."""

from __future__ import annotations

import gc
import sys

from harness_nb import Harness
from harness_nb.subagents.map_pacer import SWITCH_INTERVAL, LoopPacer
from harness_nb.testing import FakeLLMServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from map_support import upper


def test_the_window_grows_while_the_loop_is_on_time_and_shrinks_while_the_maps_work_makes_it_late():
    pacer = LoopPacer(limit=0.001, busy=0.25, floor=2)
    for _ in range(7):
        pacer.judge(0.0001, 0.9)  # on time, however busy
    assert pacer.window == 9
    pacer.judge(0.050, 0.9)  # late, and the loop was working: the map's doing
    assert pacer.window == 6
    pacer.judge(0.050, 0.05)  # late, the loop idle: the machine is busy elsewhere, holding back would not help
    assert pacer.window == 7
    for _ in range(10):
        pacer.judge(0.050, 0.9)
    assert pacer.window == 2  # never below the floor


async def test_a_row_past_the_window_waits_for_one_to_end():
    pacer = LoopPacer(period=0.001)
    running = iter([5, 5, 5, 1])  # rows running each time the pacer looks
    await pacer.admit(lambda: next(running))  # the window is the floor, 2: it waited until one fitted
    assert next(running, None) is None


async def test_the_heap_is_frozen_and_the_gil_handed_over_sooner_while_paced_maps_run():
    gc.unfreeze()
    before = sys.getswitchinterval()
    one, two = LoopPacer(), LoopPacer()
    one.start()
    assert gc.get_freeze_count() > 0 and sys.getswitchinterval() == SWITCH_INTERVAL < before
    two.start()
    await one.stop()
    assert gc.get_freeze_count() > 0 and sys.getswitchinterval() == SWITCH_INTERVAL  # the other map still runs
    await two.stop()
    assert gc.get_freeze_count() == 0 and sys.getswitchinterval() == before


async def test_someone_elses_freeze_is_left_alone():
    gc.unfreeze()
    one = LoopPacer()

    gc.freeze()  # the process's own
    try:
        one.start()
        await one.stop()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    one.start()  # theirs was undone: the next map freezes again
    assert gc.get_freeze_count() > 0
    await one.stop()
    assert gc.get_freeze_count() == 0


async def test_a_background_map_is_paced_and_a_foreground_one_is_not(tmp_path):
    async with FakeLLMServer([upper], loop=True) as srv:
        h = Harness(
            "openai-compatible/m", workdir=tmp_path, base_url=srv.url + "/v1", api_key="sk-test",
            include_user_agents=False, sandbox="off",
        )
        OPEN.append(h)
        handle = await h.start_map("general-purpose", "ROW<{value}>", [f"r{n}" for n in range(40)], concurrency=16)
        result = await handle
        assert isinstance(handle.map.pacer, LoopPacer) and gc.get_freeze_count() == 0  # unfrozen at its end
        assert result.texts == [f"R{n}" for n in range(40)]
        await h.map("general-purpose", "ROW<{value}>", ["a"])
        assert h.last_map is not None and h.last_map.pacer is None
