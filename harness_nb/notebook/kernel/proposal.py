"""``propose_cell``: the agent hands code back as a new cell for the person to review and
run. It never runs the code.

A kernel can make a new cell only through the ``set_next_input`` payload of an execute
reply, and a frontend makes at most one cell of a reply: ipykernel's payload manager keeps
one payload per source (a second ``set_next_input`` replaces the first), and JupyterLab
(so Notebook 7) takes the first ``set_next_input`` of a reply that succeeded and inserts it
below the cell that ran (``handlePayload`` in ``@jupyterlab/notebook``'s cellexecutor).

So several proposals of one run become a chain: each is a cell headed
``# Agent proposal N: <explanation>``; the first appears below the agent's cell when it
finishes, and each next one below the previous proposal when the person runs that one
(``CellProposals.after_cell``, a ``post_run_cell`` hook). The proposals of one run are those
made while the same cell was the current one (for a background run: between two cells).
A proposal waits while the cell it follows fails (a frontend drops the payload of a failed
reply) or when that cell already carries a ``set_next_input`` of its own (``%load``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from ...core import ToolError
from ...tools import Tool, ToolContext, tool

MAX_CODE_CHARS = 50_000
MAX_EXPLANATION_CHARS = 2_000
MAX_PENDING = 20  # proposals waiting to appear: a runaway agent cannot queue a thousand cells
_HEADER = re.compile(r"^# Agent proposal (\d+)\b")


@dataclass(frozen=True)
class Proposal:
    """A cell to be: ``number`` (kernel-wide), its text, the cell whose run makes it
    appear (``after``: the previous proposal of its run; ``None``: the next cell to finish)
    and ``group``: the execution count current when it was made."""

    number: int
    text: str
    after: int | None
    group: int


def cell_text(number: int, code: str, explanation: str) -> str:
    """The proposed cell: a header comment with the explanation, then the code."""
    lines = explanation.strip().splitlines() or [""]
    header = f"# Agent proposal {number}: {lines[0].strip()}".rstrip(": ")
    comments = [f"# {line.rstrip()}".rstrip() for line in lines[1:]]
    return "\n".join([header, *comments, code.strip("\n")])


def proposal_sentence(proposal: Proposal, code: str) -> str:
    """What ``propose_cell`` tells the model, in one plain sentence: which proposal, how
    many lines, not run, and where the cell will appear."""
    count = len(code.strip("\n").splitlines())
    where = (
        "the cell running now when it ends (or below the next cell run, if none is running)"
        if proposal.after is None
        else f"Agent proposal {proposal.after} once the person runs that one"
    )
    lines = f"{count} line" + ("" if count == 1 else "s")
    return (
        f"Agent proposal {proposal.number} ({lines}) was not run: it appears below {where}, for the person to "
        "review and run."
    )


class CellProposals:
    """The proposals of one shell that have not appeared yet, and the hook that shows them."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.pending: list[Proposal] = []
        self._count = 0

    def propose(self, code: str, explanation: str) -> Proposal:
        """Queue ``code`` as a new cell; it appears at the next cell end that may show it."""
        if not code.strip():
            raise ToolError("code is empty: propose the code the cell should hold")
        if len(code) > MAX_CODE_CHARS:
            raise ToolError(f"code is {len(code):,} characters; a proposed cell holds at most {MAX_CODE_CHARS:,}")
        if len(explanation) > MAX_EXPLANATION_CHARS:
            raise ToolError(f"explanation is {len(explanation):,} characters; keep it under {MAX_EXPLANATION_CHARS:,}")
        if len(self.pending) >= MAX_PENDING:
            raise ToolError(
                f"{MAX_PENDING} proposed cells are still waiting for the person to run the ones above them; "
                "stop proposing and say what you proposed"
            )
        group = int(getattr(self.shell, "execution_count", 0))
        previous = [p for p in self.pending if p.group == group]
        self._count += 1
        proposal = Proposal(
            self._count, cell_text(self._count, code, explanation), previous[-1].number if previous else None, group
        )
        self.pending.append(proposal)
        return proposal

    def after_cell(self, result: Any) -> None:
        """The ``post_run_cell`` hook: put the proposal this cell's end releases into its
        reply (at most one: a frontend makes one cell of a reply)."""
        if result is None or not result.success or not self.pending:
            return
        manager = getattr(self.shell, "payload_manager", None)
        if manager is not None and any(p.get("source") == "set_next_input" for p in manager.read_payload()):
            return  # the cell asked for a next input itself (%load): never replace it
        found = _HEADER.match(result.info.raw_cell or "")
        ran = int(found.group(1)) if found else None
        chained = [p for p in self.pending if ran is not None and p.after == ran]
        ready = next(iter(chained), None) or next((p for p in self.pending if p.after is None), None)
        if ready is None:
            return
        self.pending.remove(ready)
        self.shell.set_next_input(ready.text, replace=False)


def propose_cell_tool(proposals: CellProposals, *, usable: Callable[[], bool] | None = None) -> Tool:
    """``propose_cell`` bound to ``proposals`` (offered while ``usable()``)."""

    @tool(name="propose_cell", read_only=True, foreground_only=True, usable=usable)
    async def propose_cell(
        ctx: ToolContext,
        code: str,
        explanation: Annotated[str, Field(description="A line; the cell's leading comment.")],
    ) -> str:
        """Add a cell below for the person to review and run. It is not run: you will not
        see its output."""
        proposal = proposals.propose(code, explanation)
        return proposal_sentence(proposal, code)

    return propose_cell
