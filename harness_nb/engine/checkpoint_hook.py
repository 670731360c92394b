"""``CheckpointHook``: the workdir checkpointed around every call that can change files.

It wraps the call itself (``Hook.around_tool``: after any approval, inside every other
limit) when its tool is ``effectful``: a snapshot before (``Checkpoints.start``), the call,
a snapshot after (``Checkpoints.finish``, which reverts protected changes no approval
covered: of the protected paths, only those the approved card named, or a hook vouched
for, stay). The model reads what happened in the call's result; the view gets an
``EffectsRecorded`` event. Being a hook, it reaches every subagent and teammate, whose
engines inherit the parent's hooks.

When no checkpoint can be taken (the store cannot be written), the call still runs and
its result says its effects cannot be undone. An interrupted call is finished on a worker
thread without waiting: its protected changes are reverted all the same.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ..core import EffectsRecorded, HarnessError, ToolCall, run_blocking
from ..sandbox.checkpoints.checkpoint import CallEffects, Checkpoints, Watch
from ..tools import ToolContext, ToolOutcome
from .hook import Hook, RunTool

log = logging.getLogger("harness_nb.checkpoints")


class CheckpointHook(Hook):
    """Checkpoints ``checkpoints.workdir`` around each effectful call made in it."""

    def __init__(self, checkpoints: Checkpoints) -> None:
        self.checkpoints = checkpoints

    async def around_tool(
        self, call: ToolCall, ctx: ToolContext, run: RunTool, *, vouched: frozenset[Path]
    ) -> ToolOutcome:
        workdir = self.checkpoints.workdir
        if ctx.tool is None or not ctx.tool.effectful or ctx.workdir.resolve() != workdir:
            return await run()
        key = object()
        scope = frozenset(p.relative_to(workdir).as_posix() for p in vouched if p.is_relative_to(workdir))
        try:
            watch = await run_blocking(self.checkpoints.start, call.id, call.name, ctx.agent, vouched=scope, key=key)
        except asyncio.CancelledError:
            self.checkpoints.abandon(key)  # its snapshot may still finish on its thread
            raise
        except (OSError, HarnessError) as exc:
            log.warning("no checkpoint before %s: %s", call.brief(60), exc)
            return self._report(call, ctx, await run(), CallEffects(call.name, problem=f"none was taken ({exc})"))
        try:
            outcome = await run()
        except BaseException:
            _finish_later(self.checkpoints, watch)
            raise
        try:
            found = await run_blocking(self.checkpoints.finish, watch)
        except (OSError, HarnessError) as exc:
            self.checkpoints.forget(watch)
            log.warning("no snapshot after %s: %s", call.brief(60), exc)
            found = CallEffects(call.name, problem=f"the snapshot after it failed ({exc})")
        return self._report(call, ctx, outcome, found)

    def _report(self, call: ToolCall, ctx: ToolContext, outcome: ToolOutcome, found: CallEffects) -> ToolOutcome:
        if not found:
            return outcome
        ctx.emit(
            EffectsRecorded(
                call=call,
                line=found.line(),
                checkpoint=found.checkpoint.number if found.checkpoint is not None else None,
                reverted=found.reverted_line(),
                lost=tuple(found.lost()),
                overlapped=found.effects.overlapped,
                partial=found.effects.partial,
                problem=found.problem,
                agent=ctx.agent,
            )
        )
        return outcome.with_content(f"{outcome.content}\n\n{found.for_model()}".strip())


def _finish_later(checkpoints: Checkpoints, watch: Watch) -> None:
    """Finish an interrupted call's watch on a worker thread, not waited for: the revert of
    protected changes must happen whether or not anyone reads the result."""

    def logged(done: asyncio.Future[CallEffects]) -> None:
        if done.cancelled() or done.exception() is not None:
            checkpoints.forget(watch)
            if not done.cancelled():
                log.warning("after an interrupted %s: %s", watch.tool, done.exception())

    asyncio.get_running_loop().run_in_executor(None, checkpoints.finish, watch).add_done_callback(logged)
