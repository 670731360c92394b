"""API keys never appear in an error, a repr, a log line or a cassette (provider part)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness_nb.core import ProviderError, UserMessage
from harness_nb.providers import ModelRequest, create_provider
from harness_nb.providers.http import RetryPolicy, scrub
from harness_nb.testing.fake_server import FakeLLMServer

pytestmark = pytest.mark.usefixtures("no_provider_env")

KEY = "sk-proj-Zq81xVb2Lm0PqRsTuVwXyZ4455667788"
REQUEST = ModelRequest(system="", messages=[UserMessage(content="hi")])


async def no_sleep(delay: float) -> None:
    pass


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x"])
@pytest.mark.parametrize("streaming", [True, False])
async def test_key_echoed_by_the_server_is_never_shown(
    model: str, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with FakeLLMServer([{"fault": "unauthorized", "echo_key": True}]) as srv:
        provider = create_provider(model, api_key=KEY, base_url=srv.url)
        with pytest.raises(ProviderError) as info:
            if streaming:
                async for _ in provider.stream(REQUEST):
                    pass
            else:
                await provider.complete(REQUEST)
        await provider.aclose()
    assert KEY in srv.requests[0].api_key  # the server did see it, and echoed it back
    error = info.value
    assert "[redacted]" in str(error)
    for shown in (str(error), repr(error), error.message, repr(provider), str(vars(provider)), caplog.text):
        assert KEY not in shown
        assert KEY[8:20] not in shown


async def test_partly_masked_echo_is_scrubbed_too(caplog: pytest.LogCaptureFixture) -> None:
    echoed = f"Incorrect API key provided: {KEY[:12]}****************{KEY[-4:]}"
    step = {"raw": '{"error": {"message": "%s"}}' % echoed, "status": 401, "content_type": "application/json"}
    async with FakeLLMServer([step]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url)
        with pytest.raises(ProviderError) as info:
            await provider.complete(REQUEST)
        await provider.aclose()
    assert KEY[:12] not in str(info.value)
    assert "check OPENAI_API_KEY" in str(info.value)


async def test_retry_log_lines_hold_no_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    step = {"raw": '{"error": {"message": "overloaded for key %s"}}' % KEY, "status": 503, "content_type": "application/json"}
    async with FakeLLMServer([step, {"text": "ok"}]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url, retry=RetryPolicy(sleep=no_sleep))
        assert (await provider.complete(REQUEST)).message.content == "ok"
        await provider.aclose()
    assert "retry 1 of 3" in caplog.text
    assert KEY not in caplog.text and "[redacted]" in caplog.text


async def test_cassettes_hold_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-another-key-00112233")
    leaky = ModelRequest(
        system="",
        messages=[UserMessage(content=f"env says OPENAI_API_KEY={KEY} and sk-ant-another-key-00112233")],
    )
    async with FakeLLMServer([{"text": f"I saw {KEY}"}]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url, record_to=tmp_path / "c.jsonl")
        await provider.complete(leaky)
        await provider.aclose()
    text = (tmp_path / "c.jsonl").read_text()
    assert KEY not in text and "sk-ant-another-key-00112233" not in text
    assert "authorization" not in text.lower()


def test_scrub() -> None:
    assert scrub(f"key={KEY}.", [KEY]) == "key=[redacted]."
    assert scrub(f"got '{KEY[:10]}…{KEY[-6:]}'", [KEY]) == "got '[redacted]'"
    assert scrub("nothing to see", [KEY, ""]) == "nothing to see"
