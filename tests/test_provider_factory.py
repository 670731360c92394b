"""``create_provider``: model string parsing, prefixes, errors, and cheap imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness_nb.core import ConfigError, ProviderError, UserMessage
from harness_nb.providers import ModelRequest, create_provider
from harness_nb.providers.factory import PREFIXES, parse_model

pytestmark = pytest.mark.usefixtures("no_provider_env")


@pytest.mark.parametrize(
    ("model", "parsed"),
    [
        ("openai/gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("anthropic/claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("ollama/qwen2.5:7b", ("ollama", "qwen2.5:7b")),
        ("openai-compatible/meta-llama/Llama-3-8B", ("openai-compatible", "meta-llama/Llama-3-8B")),
        ("replay/.harness_nb/cassettes/demo.jsonl", ("replay", ".harness_nb/cassettes/demo.jsonl")),
        (" scripted/demo.yaml ", ("scripted", "demo.yaml")),
    ],
)
def test_parse_model(model: str, parsed: tuple[str, str]) -> None:
    assert parse_model(model) == parsed


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("gpt-4o", "no provider prefix"),
        ("gemini/pro", "unknown provider 'gemini'"),
        ("OpenAI/gpt-4o", "unknown provider 'OpenAI'"),
    ],
)
def test_bad_model_strings_list_the_prefixes(model: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model(model)
    message = str(info.value)
    assert says in message
    assert all(prefix in message for prefix in PREFIXES)
    assert "openai/gpt-4o-mini" in message  # an example to copy


def test_missing_model_name() -> None:
    with pytest.raises(ConfigError, match="the model name after 'ollama/' is missing"):
        create_provider("ollama/")


async def test_providers_by_prefix(tmp_path: Path) -> None:
    openai = create_provider("openai/gpt-4o", api_key="k", options={"max_retries": 5, "timeout": 30})
    assert type(openai).__name__ == "OpenAIProvider" and openai.model_id == "openai/gpt-4o"
    assert openai.retry.max_retries == 5  # type: ignore[attr-defined]
    anthropic = create_provider("anthropic/claude-x", api_key="k")
    assert type(anthropic).__name__ == "AnthropicProvider"
    compatible = create_provider("openai-compatible/meta-llama/Llama-3-8B", base_url="http://h:8000/v1")
    assert compatible.model_id == "openai-compatible/meta-llama/Llama-3-8B"
    ollama = create_provider("ollama/qwen2.5:7b")
    assert ollama.base_url == "http://localhost:11434/v1"  # type: ignore[attr-defined]
    assert repr(openai) == "<OpenAIProvider openai/gpt-4o at https://api.openai.com/v1>"
    for provider in (openai, anthropic, compatible, ollama):
        await provider.aclose()
        await provider.aclose()  # twice is fine


def test_an_unknown_option_keyword_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="unknown provider option 'temprature' \\(did you mean temperature\\?\\)"):
        create_provider("openai/gpt-4o", api_key="k", temprature=0.5)


async def test_replay_is_labelled_with_the_path_as_written_and_read_from_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cassettes").mkdir()
    (tmp_path / "cassettes" / "c.jsonl").write_text("")
    monkeypatch.chdir(tmp_path.parent)  # the path is not relative to the process's folder
    replay = create_provider("replay/cassettes/c.jsonl", workdir=tmp_path)
    assert replay.model_id == "replay/cassettes/c.jsonl"
    assert replay.path == tmp_path / "cassettes" / "c.jsonl"  # type: ignore[attr-defined]
    with pytest.raises(ProviderError, match="the cassette is empty"):  # it was opened there
        await replay.complete(ModelRequest(system="", messages=[UserMessage(content="x")]))
    absolute = create_provider(f"replay/{tmp_path / 'cassettes' / 'c.jsonl'}", workdir=tmp_path / "elsewhere")
    assert absolute.model_id == f"replay/{tmp_path / 'cassettes' / 'c.jsonl'}"


async def test_scripted_prefix_loads_a_script_labelled_with_the_path_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "demo.json").write_text('[{"text": "hello"}]')
    monkeypatch.chdir(tmp_path.parent)
    provider = create_provider("scripted/scripts/demo.json", workdir=tmp_path)
    assert type(provider).__name__ == "ScriptedProvider"
    assert provider.model_id == "scripted/scripts/demo.json"
    assert (await provider.complete(ModelRequest(system="", messages=[UserMessage(content="x")]))).message.content == "hello"


def test_importing_providers_does_not_import_httpx() -> None:
    code = (
        "import sys, harness_nb.providers as p; assert 'httpx' not in sys.modules, 'httpx imported'; "
        "p.OpenAIProvider; assert 'httpx' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
