"""Asking the person: the ``ask_person`` tool and the run's ask channel.

A run may hold an ask channel (``RunContext.ask``), an async ``(Question) -> Answer``
fixed when the run is launched, like its approval channel: a notebook view shows the
question as a card in the running cell, a terminal asks on stdin. What a subagent's run
holds is decided by the runner (``subagents/runner.py``): a foreground subagent asks
through its parent's channel, a background one only with ``background_approvals="ask"``,
a map row never.

``ask_person`` is offered only to a run that holds a channel: where no one can answer
(a plain ``Harness.run``, an unattended notebook, a background subagent that may not ask)
its schema would only weigh down every call. The run still holds the tool, not offered
(``offered_tools``): a model that calls it anyway — it saw it earlier in the
conversation — is told at once that no one can answer, and to go on with its own best
judgement, saying what it assumed.

Everything here is hostile input: the model's question and options are bounded (a clear
error names the limit) and cleaned of terminal escapes and secrets before anyone shows
them; the person's typed answer is cleaned like a denial's reason
(``hook.person_reason``) before the model reads it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict

from ..core import ToolError
from ..tools import Tool, ToolContext, ToolRegistry
from .hook import person_reason

ASK_PERSON = "ask_person"
QUESTION_LIMIT = 1_000
"""Most characters of a question."""
MAX_OPTIONS = 8
OPTION_LIMIT = 80
"""Most characters of one option (a button's label)."""
ANSWER_LIMIT = 1_000
"""Most characters of the person's answer that reach the model."""
NO_ONE_TO_ASK = "no one can answer questions in this run"
_PROCEED = "Go on with your own best judgement, and say in your reply what you assumed."


@dataclass(frozen=True, slots=True)
class Question:
    """What ``ask_person`` asks: its ``text`` (lines kept), the ``options`` offered as
    choices (none: a typed answer only), the ``agent`` asking (a card labels a
    subagent's question with it) and the ``call_id`` of the call (a view shows the card
    under that call's line). Made by ``Question.checked``, bounded and cleaned."""

    text: str
    options: tuple[str, ...] = ()
    agent: str = "main"
    call_id: str = ""

    @classmethod
    def checked(cls, text: str, options: list[str] | None = None, *, agent: str = "main", call_id: str = "") -> Question:
        """A question from the model's arguments: ``ToolError`` naming the limit it passes
        (an empty question, one over ``QUESTION_LIMIT`` characters, more than
        ``MAX_OPTIONS`` options, one over ``OPTION_LIMIT``); lines cleaned of escapes and
        control characters, secrets masked, repeated options dropped."""
        if len(text) > QUESTION_LIMIT:
            raise ToolError(
                f"the question is {len(text):,} characters; ask in at most {QUESTION_LIMIT:,} "
                "(say the background in your reply, not in the question)"
            )
        lines = [person_reason(line, QUESTION_LIMIT) for line in text.strip().splitlines()]
        shown = "\n".join(lines).strip()
        if not shown:
            raise ToolError("the question is empty: say what you want to know")
        given = options or []
        if len(given) > MAX_OPTIONS:
            raise ToolError(f"{len(given)} options; give at most {MAX_OPTIONS} (the person can also type an answer)")
        long = [o for o in given if len(o) > OPTION_LIMIT]
        if long:
            raise ToolError(
                f"option {long[0][:40]!r}… is {len(long[0])} characters; keep each option to {OPTION_LIMIT} "
                "(a button's label), the detail in the question"
            )
        cleaned = [person_reason(o, OPTION_LIMIT) for o in given]
        return cls(shown, tuple(dict.fromkeys(o for o in cleaned if o)), agent=agent, call_id=call_id)


@dataclass(frozen=True, slots=True)
class Answer:
    """What came back: the person's answer (``by_person``; build it with
    ``by_the_person``, which cleans it) or why there is none (a timeout, no one to ask)."""

    text: str
    by_person: bool = False

    @classmethod
    def by_the_person(cls, text: str) -> Answer:
        """The person's own answer, cleaned (``person_reason``, at most ``ANSWER_LIMIT``)."""
        return cls(person_reason(text, ANSWER_LIMIT), by_person=True)


AskChannel: TypeAlias = Callable[[Question], Awaitable[Answer]]


def answer_result(answer: Answer) -> str:
    """The tool result for ``answer``: the person's words, or why there are none and what
    to do without them."""
    if answer.by_person:
        return f'The person answered: "{answer.text}"'
    return f"No answer ({answer.text}). {_PROCEED}"


class AskPersonParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str
    options: list[str] | None = None


class AskPersonTool(Tool):
    """``ask_person``: asks through the calling run's ask channel (``ToolContext.parent``'s
    ``ask``) and returns the answer. ``offered``: whether the model is offered it (see
    the module doc); one not offered still answers a call."""

    name = ASK_PERSON
    description = (
        "Ask the person and wait for their answer. Only for a decision or fact you cannot find "
        "yourself. options: short choices, shown as buttons."
    )
    Params = AskPersonParams
    read_only = True  # it changes nothing: no approval, and a plan-mode agent keeps it
    long_running = True  # a person takes their time: no tool timeout, and no slot held while waiting

    def __init__(self, *, offered: bool = True) -> None:
        self.offered = offered

    def usable(self) -> bool:
        return self.offered

    async def run(self, params: Any, ctx: ToolContext) -> str:
        question = Question.checked(params.question, params.options, agent=ctx.agent, call_id=ctx.call.id)
        channel: AskChannel | None = getattr(ctx.parent, "ask", None)  # the run's, in its ParentContext
        answer = await channel(question) if channel is not None else Answer(NO_ONE_TO_ASK)
        return answer_result(answer)


def offered_tools(tools: ToolRegistry, ask: AskChannel | None) -> ToolRegistry:
    """``tools`` as a run holding ``ask`` offers them: ``ask_person`` offered only with a
    channel (``tools`` itself when that is so already, else a copy: a registry handed out
    is never changed)."""
    tool = tools.get(ASK_PERSON)
    if not isinstance(tool, AskPersonTool) or tool.offered == (ask is not None):
        return tools
    return tools.with_tool(AskPersonTool() if ask is not None else _NOT_OFFERED)


_NOT_OFFERED = AskPersonTool(offered=False)  # it holds no state: every run without a channel shares it
