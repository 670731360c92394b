"""Images in tool results: the typed part and its bounds, hooks that keep them, each wire
format (OpenAI's image_url parts after the results, Anthropic's image blocks inside
tool_result, a text placeholder for a model that takes text only), the image in the next
request over real HTTP, cassettes, compaction, transcripts and resume.

How run_python makes them and a run view shows them: ``test_rich_outputs.py`` (without a
kernel) and ``test_notebook_rich.py`` (in a real one)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core import (
    AssistantMessage,
    DisplayData,
    ImagePart,
    ToolCall,
    ToolCallFinished,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from harness_nb.core.media import MAX_IMAGE_BYTES, bound_images, image_size
from harness_nb.engine import AgentEngine, HookRegistry, MemorySession, OffloadHook, RedactSecretsHook
from harness_nb.engine.compaction.keeper import STUB_PREFIX, CompactionPolicy, ContextKeeper, FitContext
from harness_nb.engine.meter import message_chars
from harness_nb.engine.resume import read_session
from harness_nb.engine.session import load_transcript
from harness_nb.providers import ModelRequest, ReplayProvider, create_provider
from harness_nb.providers.cassette import request_hash, request_record
from harness_nb.providers.wire import encode_body
from harness_nb.testing import ScriptedProvider
from harness_nb.testing.fake_server import FakeLLMServer
from harness_nb.tools import ToolContext, ToolOutcome, ToolOutput, ToolRegistry, tool
from image_support import png

pytestmark = pytest.mark.usefixtures("no_provider_env")


PLOT = ImagePart.from_bytes(png(64, 48))
SPEC = ToolSpec(name="plot", description="Plot.", parameters={"type": "object", "properties": {}})


def history(*, images: tuple[ImagePart, ...] = (PLOT,)) -> list[Any]:
    """A turn of two parallel calls, the first answered with text and an image."""
    return [
        UserMessage(content="Plot it, and count the rows."),
        AssistantMessage(
            content="",
            tool_calls=(ToolCall(id="c1", name="plot", arguments="{}"), ToolCall(id="c2", name="plot", arguments="{}")),
        ),
        ToolResultMessage(tool_call_id="c1", name="plot", content="<Figure 64x48>", images=images),
        ToolResultMessage(tool_call_id="c2", name="plot", content="3 rows"),
        UserMessage(content="Thanks."),
    ]


def body(model: str, messages: list[Any], **options: Any) -> dict[str, Any]:
    provider = create_provider(model, api_key="k", base_url="http://127.0.0.1:9", options=options or None)
    return provider.body(ModelRequest(system="s", messages=messages, tools=[SPEC]), stream=False)


# -- the part and its bounds -------------------------------------------------------------


def test_an_image_part_knows_its_size_and_how_to_say_it_is_missing() -> None:
    assert (PLOT.width, PLOT.height, PLOT.media_type) == (64, 48, "image/png")
    assert PLOT.nbytes == len(png(64, 48))
    assert PLOT.placeholder() == "[image/png 64×48, 1 KB: not sent, this model takes text only]"
    assert PLOT.data_url().startswith("data:image/png;base64,iVBORw0KGgo")
    assert ImagePart.from_base64(PLOT.data[:40] + "\n" + PLOT.data[40:]) == PLOT
    with pytest.raises(ValueError, match="not base64"):
        ImagePart.from_base64("not base64 at all!")
    # token estimates: small, by area, at most ~1,600 (both APIs scale large images down)
    assert PLOT.token_estimate() == 255
    assert ImagePart(media_type="image/png", data="", width=640, height=480).token_estimate() == 425
    assert ImagePart(media_type="image/png", data="", width=8000, height=8000).token_estimate() == 1_600
    assert ImagePart(media_type="image/png", data="").token_estimate() == 1_600
    gif = b"GIF89a" + struct.pack("<HH", 7, 5)
    jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x0b\x08" + struct.pack(">HH", 30, 20) + b"\x01\x01"
    assert image_size(gif) == (7, 5) and image_size(jpeg) == (20, 30) and image_size(b"nope") is None


def test_images_are_bounded_in_number_and_size_with_a_note() -> None:
    huge = ImagePart(media_type="image/png", data="A" * (MAX_IMAGE_BYTES + 4), width=9000, height=9000)
    kept, note = bound_images([PLOT, huge, *[PLOT] * 5])
    assert kept == (PLOT,) * 4
    assert note == "[image/png 9000×9000, 3.8 MB: not sent, 5.0 MB as base64 is over the 5.0 MB limit per image]\n[2 more images not sent: at most 4 per result]"
    assert bound_images([PLOT]) == ((PLOT,), "")


def test_a_result_without_images_is_dumped_as_before() -> None:
    plain = ToolResultMessage(tool_call_id="c", name="n", content="x")
    assert "images" not in plain.model_dump(mode="json")
    assert ToolResultMessage.model_validate(history()[2].model_dump(mode="json")) == history()[2]


def test_a_display_keeps_what_a_notebook_renders_within_bounds() -> None:
    shown = DisplayData.bounded(
        {"text/html": "<b>x</b>", "image/png": png(2, 2), "application/vnd.jupyter.widget-view+json": {"model_id": "m"}},
        {"image/png": {"width": 2}, "text/html": "not a dict"},
    )
    assert shown is not None and set(shown.data) == {"text/html", "image/png"}
    assert shown.metadata == {"image/png": {"width": 2}}
    assert shown.image() == ImagePart.from_bytes(png(2, 2))
    assert DisplayData.bounded({"text/html": "x" * 2_000_000}) is None


# -- tools and hooks -----------------------------------------------------------------------


@tool
async def plot(ctx: ToolContext, count: int = 1) -> ToolOutput:
    """Draw ``count`` plots."""
    return ToolOutput("key sk-ant-api03-" + "s" * 40 + " drawn", (PLOT,) * count, (DisplayData(data={"text/html": "<i>p</i>"}),))


async def test_hooks_that_rewrite_the_text_keep_the_images(tmp_path: Path) -> None:
    """Redaction and offloading change a result's text; its images and displays stay."""
    provider = ScriptedProvider([{"tool_calls": [{"id": "p", "name": "plot", "arguments": {"count": 6}}]}, {"text": "ok"}])
    hooks = HookRegistry([RedactSecretsHook(), OffloadHook(tmp_path / "offload", limit=10, keep=4)])
    engine = AgentEngine(provider, ToolRegistry([plot]), hooks=hooks, workdir=tmp_path)
    events: list[Any] = []
    await engine.run("plot", on_event=events.append)
    result = engine.session.messages[2]
    assert isinstance(result, ToolResultMessage)
    assert result.images == (PLOT,) * 4, "bounded where the result is made"
    assert "sk-ant" not in result.content and "read it with read_file" in result.content
    assert result.content.endswith("[2 more images not sent: at most 4 per result]")
    (finished,) = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.images == result.images and finished.displays == (DisplayData(data={"text/html": "<i>p</i>"}),)
    # the next request carried the images (the scripted model records what it was sent)
    assert provider.requests[1].messages[2].images == (PLOT,) * 4
    assert ToolOutcome("a", images=(PLOT,)).with_content("b") == ToolOutcome("b", images=(PLOT,))


# -- wire formats --------------------------------------------------------------------------


def test_openai_sends_the_images_as_a_user_message_after_the_results() -> None:
    messages = body("openai/gpt-4o", history())["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "user", "user"]
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "<Figure 64x48>"}
    assert messages[5] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "The image from the plot result (call c1):"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PLOT.data}},
        ],
    }


def test_openai_images_of_the_last_results_follow_them() -> None:
    messages = body("openai/gpt-4o", history()[:4])["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert messages[-1]["content"][1]["image_url"]["url"] == PLOT.data_url()


def test_anthropic_puts_image_blocks_inside_the_tool_result() -> None:
    messages = body("anthropic/claude-sonnet-4-5", history(), prompt_caching=False)["messages"]
    results = messages[2]["content"]
    assert results[0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": [
            {"type": "text", "text": "<Figure 64x48>"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PLOT.data}},
        ],
    }
    assert results[1] == {"type": "tool_result", "tool_use_id": "c2", "content": "3 rows"}
    # an image with no text is an image block alone (the API rejects empty text blocks)
    alone = [m for m in history() if m.role != "tool"][:2] + [ToolResultMessage(tool_call_id="c1", name="plot", content="", images=(PLOT,))]
    only = body("anthropic/m", alone, prompt_caching=False)["messages"][2]["content"][0]["content"]
    assert [b["type"] for b in only] == ["image"]


def test_the_cache_breakpoint_marks_a_result_with_images() -> None:
    messages = body("anthropic/m", history()[:4])["messages"]
    assert messages[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("openai-compatible/llama", {}),
        ("ollama/llama3.1", {}),
        ("openai/gpt-3.5-turbo", {"vision": False}),
        ("anthropic/m", {"vision": False, "prompt_caching": False}),
    ],
)
def test_a_model_that_takes_text_only_reads_a_placeholder(model: str, options: dict[str, Any]) -> None:
    sent = json.dumps(body(model, history(), **options), ensure_ascii=False)
    assert PLOT.data not in sent and "image_url" not in sent and '"type": "image"' not in sent
    assert "<Figure 64x48>\\n[image/png 64×48, 1 KB: not sent, this model takes text only]" in sent


def test_a_local_server_with_a_vision_model_gets_the_images() -> None:
    messages = body("ollama/llava", history(), vision=True)["messages"]
    assert messages[5]["content"][1]["image_url"]["url"] == PLOT.data_url()


@pytest.mark.parametrize("model", ["openai/m", "anthropic/m", "ollama/m"])
@pytest.mark.parametrize("vision", [True, False])
def test_the_encoded_body_with_images_is_the_body(model: str, vision: bool) -> None:
    request = body(model, history(), vision=vision)
    assert encode_body(request) == json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
    again = body(model, history(), vision=vision)  # new messages, fresh caches: the same bytes
    assert encode_body(again) == encode_body(request)


# -- over real HTTP: the image is in the request after the tool call ---------------------------


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-sonnet-4-5"])
async def test_the_next_request_carries_the_image_over_http(model: str, tmp_path: Path) -> None:
    steps = [{"tool_calls": [{"id": "call_p", "name": "plot", "arguments": {}}]}, {"text": "A rising line."}]
    async with FakeLLMServer(steps) as srv:
        provider = create_provider(model, api_key="k", base_url=srv.url)
        async with provider:
            engine = AgentEngine(provider, ToolRegistry([plot]), workdir=tmp_path)
            result = await engine.run("plot it")
    assert result.final_text == "A rising line."
    first, second = (r.body for r in srv.requests)
    assert PLOT.data not in json.dumps(first)
    if model.startswith("openai"):
        assert second["messages"][-1]["content"][1] == {"type": "image_url", "image_url": {"url": PLOT.data_url()}}
    else:
        (block,) = second["messages"][-1]["content"]
        assert block["type"] == "tool_result" and block["content"][1]["source"]["data"] == PLOT.data


# -- cassettes, compaction, transcripts ----------------------------------------------------


def test_a_cassette_records_an_image_by_type_and_size() -> None:
    request = ModelRequest(system="s", messages=history(), tools=[SPEC])
    record = request_record(request)
    assert record["messages"][2]["images"] == [{"media_type": "image/png", "width": 64, "height": 48}]
    assert "images" not in record["messages"][3]
    redrawn = ImagePart(media_type="image/png", data=PLOT.data[:-8] + "AAAAAAA=", width=64, height=48)
    other = ModelRequest(system="s", messages=history(images=(redrawn,)), tools=[SPEC])
    assert request_hash(request_record(other)) == request_hash(record), "the same figure, drawn by another version"
    bigger = ModelRequest(system="s", messages=history(images=(ImagePart.from_bytes(png(65, 48)),)), tools=[SPEC])
    assert request_hash(request_record(bigger)) != request_hash(record)


async def test_a_run_with_an_image_is_recorded_and_replays(tmp_path: Path) -> None:
    steps = [{"tool_calls": [{"id": "call_p", "name": "plot", "arguments": {}}]}, {"text": "A rising line."}]
    async with FakeLLMServer(steps) as srv:
        recorder = create_provider("openai/gpt-4o", api_key="k", base_url=srv.url, record_to="c.jsonl", workdir=tmp_path)
        async with recorder:
            await AgentEngine(recorder, ToolRegistry([plot]), workdir=tmp_path).run("plot it")
    cassette = (tmp_path / "c.jsonl").read_text()
    assert PLOT.data not in cassette and '"width":64' in cassette.replace(" ", "")
    replay = create_provider(f"replay/{tmp_path / 'c.jsonl'}", workdir=tmp_path)
    assert isinstance(replay, ReplayProvider)
    result = await AgentEngine(replay, ToolRegistry([plot]), workdir=tmp_path).run("plot it")
    assert result.final_text == "A rising line."


def test_an_image_counts_at_its_token_estimate() -> None:
    text_only = ToolResultMessage(tool_call_id="c1", name="plot", content="<Figure 64x48>")
    assert message_chars(history()[2]) == message_chars(text_only) + 4 * PLOT.token_estimate()


async def test_compaction_stubs_a_result_with_images_and_drops_them(tmp_path: Path) -> None:
    session = MemorySession("s")
    session.extend(history())
    session.extend([AssistantMessage(content="Done."), UserMessage(content="Next?")])
    keeper = ContextKeeper(session, workdir=tmp_path)
    provider = ScriptedProvider()
    # a window the image alone puts over the target: clearing it is enough, no summary
    provider.context_window = int(keeper.measure(provider, "s", [SPEC]) / 0.6)
    policy = CompactionPolicy(offload_dir=tmp_path / "offload", keep_results=0)
    done = await keeper.compact("threshold", FitContext(provider, policy, "s", [SPEC], lambda e: None, lambda r: None))
    assert (done.cleared, done.summarised) == (1, 0)
    stub = next(m for m in session.messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "c1")
    assert stub.images == () and stub.content.startswith(STUB_PREFIX)
    assert stub.content.endswith("; its 1 image was dropped]")
    assert (tmp_path / "offload" / "c1.txt").read_text() == "<Figure 64x48>"


async def test_a_transcript_keeps_the_image_and_a_resumed_conversation_has_it(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    session = MemorySession("s1", transcript=folder / "s1.jsonl")
    session.extend(history())
    session.close()
    assert load_transcript(folder / "s1.jsonl") == history()
    _id, _path, messages, repaired = read_session(folder, "s1")
    assert repaired == 0 and messages[2].images == (PLOT,)
    assert body("openai/gpt-4o", messages)["messages"][5]["content"][1]["image_url"]["url"] == PLOT.data_url()
