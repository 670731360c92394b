"""The person at the page in a ``--frontend`` task: what they decide when the page asks,
read from the task's ``person.yaml``, and a log of what they did.

```yaml
approvals: approve            # every approval card: approve | deny | "deny: <reason>"
# approvals: {"*": approve, bash: "deny: no shell today"}   # or by tool ("*": the rest)
edits: [accept_and_run]       # each edit card in turn: accept | accept_and_run | reject | "reject: <reason>"
questions:                    # each question card in turn:
  - {choose: revenue, else: "the revenue column"}  # the first option holding the text, else typed
  - {option: 2}               # the 2nd option offered (1-based)
  - "typed words"             # typed into the answer box, then Send
not_run: [cell-4]             # ids of code cells the person leaves unrun (the rest run in order)
```

Each list is used in order, one entry per card of its kind; once it runs out, its last
entry repeats. A missing section is the default person: approves every call, accepts every
edit, and answers a question with ``DEFAULT_ANSWER`` typed. ``{option: N}`` on a card with
fewer options types its ``else`` if it has one; otherwise the card is left to wait (the
kernel gives up after ``HarnessNB.approval_timeout``), and the log says why.

The file is the task author's: it is checked when the task starts, and a mistake stops the
run with a message naming the entry and what is allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_ANSWER = "I have no preference: decide yourself, and say what you chose."
EDIT_DECISIONS = {"accept": "accepted", "accept_and_run": "accepted_and_run", "reject": "rejected"}
_WITH_REASON = re.compile(r"^(deny|reject)\s*:\s*(.*)$", re.DOTALL)


@dataclass(frozen=True)
class Click:
    """What the person does on a question card: click the option ``label``, type
    ``text`` and Send, or leave it waiting (both empty; ``why`` says so in the log)."""

    label: str = ""
    text: str = ""
    why: str = ""


class PersonFileError(SystemExit):
    """person.yaml says something the person cannot do."""


def _decision(entry: Any, allowed: tuple[str, ...], where: str) -> tuple[str, str]:
    """``entry`` as (word, reason): one of ``allowed``, or ``"<word>: <reason>"`` for the
    word that takes one."""
    if not isinstance(entry, str):
        raise PersonFileError(f"{where}: {entry!r} is not text; write one of {', '.join(allowed)}")
    said = _WITH_REASON.match(entry.strip())
    word, reason = (said.group(1), said.group(2).strip()) if said else (entry.strip(), "")
    if word not in allowed:
        raise PersonFileError(
            f"{where}: {entry!r}; write one of {', '.join(allowed)} (deny and reject may add ': <reason>')"
        )
    return word, reason


def _question(entry: Any, where: str) -> Any:
    if isinstance(entry, str) and entry.strip():
        return entry
    if isinstance(entry, dict) and set(entry) <= {"option", "choose", "else"} and len(set(entry) - {"else"}) == 1:
        if "option" in entry and not (isinstance(entry["option"], int) and entry["option"] >= 1):
            raise PersonFileError(f"{where}: option must be a number from 1 (the first option offered)")
        if any(not isinstance(entry.get(k, ""), str) for k in ("choose", "else")):
            raise PersonFileError(f"{where}: choose and else take text")
        return entry
    raise PersonFileError(f'{where}: {entry!r}; write typed text, {{option: N}} or {{choose: "text", else: "typed"}}')


@dataclass
class Person:
    """The person's decisions (see the module doc) and the log of what they did."""

    approvals: dict[str, tuple[str, str]] = field(default_factory=dict)
    edits: list[tuple[str, str]] = field(default_factory=list)
    questions: list[Any] = field(default_factory=list)
    not_run: frozenset[str] = frozenset()
    log: list[dict[str, Any]] = field(default_factory=list)
    _used: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Person:
        """The person of ``path`` (the default person when it does not exist)."""
        if not path.is_file():
            return cls()
        try:
            given = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise PersonFileError(f"{path} is not YAML: {exc}") from exc
        if not isinstance(given, dict) or set(given) - {"approvals", "edits", "questions", "not_run"}:
            raise PersonFileError(
                f"{path}: its keys are approvals, edits, questions and not_run (see benchmarks/model_trial/person.py)"
            )
        approvals = given.get("approvals", "approve")
        by_tool = approvals if isinstance(approvals, dict) else {"*": approvals}
        person = cls(
            approvals={
                str(tool): _decision(d, ("approve", "deny"), f"{path}: approvals[{tool}]")
                for tool, d in by_tool.items()
            }
        )
        for key in ("edits", "questions", "not_run"):
            if not isinstance(given.get(key) or [], list):
                raise PersonFileError(f"{path}: {key} is a list")
        if not all(isinstance(c, str) for c in given.get("not_run") or []):
            raise PersonFileError(f'{path}: not_run lists cell ids (the notebook\'s cell "id" fields)')
        person.not_run = frozenset(given.get("not_run") or [])
        person.edits = [
            _decision(e, tuple(EDIT_DECISIONS), f"{path}: edits[{n}]") for n, e in enumerate(given.get("edits") or [])
        ]
        person.questions = [_question(e, f"{path}: questions[{n}]") for n, e in enumerate(given.get("questions") or [])]
        return person

    def _next(self, kind: str, entries: list[Any], default: Any) -> Any:
        """The entry for the next card of ``kind``: in order, the last repeating."""
        n = self._used.get(kind, 0)
        self._used[kind] = n + 1
        return entries[min(n, len(entries) - 1)] if entries else default

    def approval(self, tool: str, shown: str) -> tuple[str, str]:
        """Approve or deny (with the reason typed) a call of ``tool``."""
        decision = self.approvals.get(tool) or self.approvals.get("*") or ("approve", "")
        self.log.append(
            {"card": "approval", "tool": tool, "shown": shown[:300], "decision": decision[0], "reason": decision[1]}
        )
        return decision

    def edit(self, request: dict[str, Any]) -> tuple[str, str]:
        """The decision on an edit card (``FakePage.decide``): the protocol's word and reason."""
        word, reason = self._next("edit", self.edits, ("accept", ""))
        self.log.append(
            {
                "card": "edit",
                "cell": request.get("index"),
                "explanation": str(request.get("explanation", ""))[:300],
                "new_source": str(request.get("new_source", ""))[:2000],
                "decision": EDIT_DECISIONS[word],
                "reason": reason,
            }
        )
        return EDIT_DECISIONS[word], reason

    def answer(self, question: str, options: list[str]) -> Click:
        """What to do on a question card showing ``question`` and ``options``."""
        entry = self._next("question", self.questions, DEFAULT_ANSWER)
        if isinstance(entry, str):
            click = Click(text=entry)
        elif "choose" in entry:
            wanted = entry["choose"].casefold()
            label = next((o for o in options if wanted in o.casefold()), "")
            click = Click(label=label) if label else Click(text=entry.get("else") or entry["choose"])
        elif entry["option"] <= len(options):
            click = Click(label=options[entry["option"] - 1])
        elif entry.get("else"):
            click = Click(text=entry["else"])
        else:
            click = Click(
                why=f"person.yaml picks option {entry['option']}, but the card offers {len(options)}: left waiting"
            )
        self.log.append(
            {
                "card": "question",
                "question": question[:300],
                "options": options,
                "clicked": click.label,
                "typed": click.text,
            }
            | ({"left": click.why} if click.why else {})
        )
        return click

    def noted(self, what: str, **fields: Any) -> None:
        """Log something else the page did for the person (an input() answered, say)."""
        self.log.append({"card": what, **fields})
