"""Typed map outputs (``h.map(..., output=...)``): each row's answer asked for as structured
output in the provider's own way — OpenAI's ``response_format`` JSON schema, Anthropic's
forced answer tool — validated, asked once more with the problem, failed on a second misfit
(the other rows fine), and returned as DataFrame columns. Over real HTTP (the fake LLM
server); the spec text ``%agent map --output`` takes, and ``h.map``'s option names, checked
with one clear error each."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import pandas as pd  # noqa: F401  (frame() needs it)
import pytest
from pydantic import BaseModel

from harness_nb import Harness
from harness_nb.core import ConfigError
from harness_nb.subagents import SubAgentDefinition
from harness_nb.subagents.map_output import ANSWER_TOOL, output_fields, row_output, strict_schema
from harness_nb.testing import FakeLLMServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

ROW = re.compile(r"ROW<(.*?)>")
FIELDS = "label:bug|question, score:float"


def texts_of(body: dict[str, Any]) -> list[str]:
    """Every text of the request's messages, in order."""
    out = []
    for message in body.get("messages", []):
        content = message.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text") or p.get("content") or "" for p in content or []]
        out += [p for p in parts if isinstance(p, str)]
    return out


def row_of(body: dict[str, Any]) -> str:
    return next(found.group(1) for text in texts_of(body) if (found := ROW.search(text)))


def harness(tmp_path, server: FakeLLMServer, model: str = "openai-compatible/m") -> Harness:
    h = Harness(
        model, workdir=tmp_path, base_url=server.url + ("/v1" if model.startswith("openai") else ""),
        api_key="sk-test", include_user_agents=False, sandbox="off", provider_options={"max_retries": 0},
    )
    OPEN.append(h)
    return h


# what each row answers: a good answer, a bad one then a good one, bad twice
ANSWERS = {
    "crash": ['{"label": "bug", "score": 0.9}'],
    "howto": ['{"label": "qestion", "score": 0.5}', '{"label": "question", "score": 0.7}'],
    "rant": ['{"label": "complaint", "score": 1}', '{"label": "bug"}'],
}


async def test_typed_rows_over_json_schema_valid_fixed_once_and_invalid_twice_in_an_error_column(tmp_path):
    def answer(body):
        row = row_of(body)
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return {"text": ANSWERS[row][said], "usage": {"input_tokens": 50, "output_tokens": 10}}

    async with FakeLLMServer([answer], loop=True) as srv:
        h = harness(tmp_path, srv)
        result = await h.map("general-purpose", "Triage ROW<{value}>", ["crash", "howto", "rant"], output=FIELDS)

    frame = result.frame()
    assert list(frame.columns) == ["label", "score", "error", "tokens", "cost", "attempts"]
    assert frame.loc[0, "label"] == "bug" and frame.loc[0, "score"] == 0.9
    assert frame.loc[1, "label"] == "question" and frame.loc[1, "score"] == 0.7
    assert frame[["label", "score"]].isna().loc[2].all() and frame["error"].isna().tolist() == [True, True, False]
    assert frame.loc[2, "error"].startswith("the answer did not fit the output twice: score: Field required")
    assert result.outputs[1].label == "question" and result.outputs[2] is None
    assert frame.loc[1, "tokens"] == 120  # both of the row's calls

    assert len(srv.requests) == 5  # 1 + 2 + 2: one more call for each misfit, never a third
    for request in srv.requests:
        sent = request.body["response_format"]
        assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
        schema = sent["json_schema"]["schema"]
        assert schema["properties"]["label"]["enum"] == ["bug", "question"] and schema["additionalProperties"] is False
        assert schema["required"] == ["label", "score"]
    (fixing,) = [r.body for r in srv.requests if row_of(r.body) == "howto" and len(r.body["messages"]) > 2]
    told = texts_of(fixing)[-1]
    assert told.startswith("That answer does not fit this row's fields: label: Input should be 'bug' or 'question'")
    assert "(got 'qestion')" in told


class Ticket(BaseModel):
    label: Literal["bug", "question"]
    score: float


@pytest.mark.parametrize("agent_tools", [[], None])
async def test_typed_rows_over_anthropic_s_forced_answer_tool(tmp_path, agent_tools):
    """A row with no other tool is forced to call the answer tool by name; one with tools
    must call some tool (``any``) and ends by calling the answer tool. Either way the call's
    arguments are the answer, validated and fixed once like any other."""

    def answer(body):
        row = row_of(body)
        said = sum(1 for m in body["messages"] if m["role"] == "assistant")
        fields = json.loads(ANSWERS[row][said])
        return {"tool_calls": [{"name": ANSWER_TOOL, "arguments": fields, "id": f"toolu_{row}{said}"}]}

    async with FakeLLMServer([answer], loop=True) as srv:
        h = harness(tmp_path, srv, "anthropic/claude-x")
        h.registry.register(SubAgentDefinition(name="triage", description="Triage.", tools=agent_tools))
        result = await h.map("triage", "Triage ROW<{value}>", {"t1": "crash", "t2": "howto", "t3": "rant"}, output=Ticket)

    assert [o.model_dump() if o else None for o in result.outputs] == [
        {"label": "bug", "score": 0.9},
        {"label": "question", "score": 0.7},
        None,
    ]
    assert list(result.errors) == ["t3"] and "score: Field required" in result.errors["t3"]
    forced = {"type": "tool", "name": ANSWER_TOOL} if agent_tools == [] else {"type": "any"}
    assert [r.body["tool_choice"] for r in srv.requests] == [forced] * 5
    for request in srv.requests:
        (offered,) = [t for t in request.body["tools"] if t["name"] == ANSWER_TOOL]
        assert offered["input_schema"]["properties"]["label"]["enum"] == ["bug", "question"]
        assert "response_format" not in request.body
        assert (len(request.body["tools"]) == 1) == (agent_tools == [])


def test_output_specs_parse_to_fields_and_a_bad_one_is_one_error_naming_it():
    fields = output_fields(" label : bug | question ,score:float, tags:list[str], ok:bool, stars:1|2|3")
    assert fields == {
        "label": Literal["bug", "question"], "score": float, "tags": list[str], "ok": bool, "stars": Literal[1, 2, 3]
    }
    for spec, says in [
        ("", "the output names no field: give name:type pairs, e.g. 'label:bug|question, score:float'"),
        ("label", "output field 'label' has no type: write label:TYPE, TYPE being str, int, float, bool, list[str]"),
        ("score:flaot", "output field score: 'flaot' is no type (did you mean float?); use str, int,"),
        ("label:bug||question", "output field label: 'bug||question' has an empty choice; write choices as a|b|c"),
        ("label:bug|bug", "output field label: 'bug|bug' names a choice twice"),
        ("a:int, a:str", "output field a is given twice"),
        ("2x:int", "output field '2x' is not a field name: use letters, digits and _"),
        ("cost:float", "output field 'cost' would clash with the result's own cost column"),
        ("a:int,,b:int", "output 'a:int,,b:int' has an empty field between commas"),
    ]:
        with pytest.raises(ConfigError) as info:
            output_fields(spec)
        assert str(info.value).startswith(says), str(info.value)


def test_an_output_is_a_model_a_mapping_or_a_spec_and_the_same_fields_give_the_same_schema():
    from_spec = row_output(FIELDS)
    from_mapping = row_output({"label": Literal["bug", "question"], "score": float})
    assert from_spec.fingerprint == from_mapping.fingerprint and from_spec.columns == ["label", "score"]
    assert row_output(Ticket).columns == ["label", "score"] and row_output(Ticket).strict
    with pytest.raises(ConfigError, match="output must be a pydantic model, a mapping .* not int"):
        row_output(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="the output's types cannot be checked"):
        row_output({"when": object()})

    class WithDefault(BaseModel):
        label: str
        note: str = ""

    closed, strict = strict_schema(WithDefault.model_json_schema())
    assert not strict and closed["additionalProperties"] is False  # sent, but not as strict


async def test_every_map_option_is_checked_with_a_did_you_mean_before_any_call(tmp_path):
    async with FakeLLMServer([{"text": "x"}], loop=True) as srv:
        h = harness(tmp_path, srv)
        for options, says in [
            ({"concurency": 4}, "unknown map option 'concurency' (did you mean concurrency?); the options are concurrency,"),
            ({"resum": True, "outptu": "a:int"}, "unknown map option 'resum' (did you mean resume?), 'outptu' (did you mean output?)"),
            ({"estimat": True}, "unknown map option 'estimat' (did you mean estimate?)"),
            ({"budget_usd": -1}, "map option budget_usd=-1: it takes a number of dollars above 0, or None"),
            ({"resume": 1}, "map option resume=1: it takes True, False or a stored map's id"),
            ({"sample": 5}, "map option sample= goes with estimate=True"),
            ({"output": "score:flaot"}, "output field score: 'flaot' is no type (did you mean float?)"),
        ]:
            with pytest.raises(ConfigError) as info:
                await h.map("general-purpose", "ROW<{value}>", ["a"], **options)
            assert str(info.value).startswith(says), str(info.value)
        with pytest.raises(ConfigError, match="map option estimate='yes': it takes True or False"):
            await h.map("general-purpose", "ROW<{value}>", ["a"], estimate="yes")  # type: ignore[call-overload]
        with pytest.raises(ConfigError, match="unknown map option 'concurency'"):
            await h.start_map("general-purpose", "ROW<{value}>", ["a"], concurency=2)  # type: ignore[call-arg]
    assert srv.requests == []


async def test_a_typed_map_recorded_from_a_json_schema_model_replays_offline_as_it_was_asked(tmp_path):
    """A cassette records the row's request as it went (its JSON answer format included), and
    a replay told the recorded model's ``structured_output`` asks the same way and answers;
    left at the default (a forced tool) it asks differently and the miss says so."""

    def answer(body):
        return {"text": json.dumps({"label": "bug" if row_of(body) == "crash" else "question", "score": 1.0})}

    async with FakeLLMServer([answer], loop=True) as srv:
        h = Harness(
            "openai/gpt-4o-mini", workdir=tmp_path, base_url=srv.url, api_key="sk-test", include_user_agents=False,
            sandbox="off", record_to="typed.jsonl",
        )
        OPEN.append(h)
        live = await h.map("general-purpose", "Triage ROW<{value}>", ["crash", "howto"], output=FIELDS)
    assert live.failed == 0

    def replayed(**options: Any) -> Harness:
        h = Harness("replay/typed.jsonl", workdir=tmp_path, include_user_agents=False, sandbox="off", provider_options=options)
        OPEN.append(h)
        return h

    again = await replayed(structured_output="json_schema").map("general-purpose", "Triage ROW<{value}>", ["crash", "howto"], output=FIELDS)
    assert [o.model_dump() for o in again.outputs] == [o.model_dump() for o in live.outputs]
    missed = await replayed().map("general-purpose", "Triage ROW<{value}>", ["crash"], output=FIELDS)
    assert missed.failed == 1 and "no recorded answer for this request" in missed.errors[0]
