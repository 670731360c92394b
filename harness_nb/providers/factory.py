"""``create_provider("provider/model")``: the one way a model string becomes a provider.

Provider modules are imported only when one is created, so importing ``harness_nb``
does not import httpx.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import ConfigError
from ..core.imports import shielded_imports
from .base import Provider
from .options import ProviderOptions

if TYPE_CHECKING:
    import httpx

    from .http import RetryPolicy

PREFIXES = ("openai", "openai-compatible", "ollama", "anthropic", "scripted", "replay")
_EXAMPLES = (
    "openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/qwen2.5:7b, "
    "openai-compatible/meta-llama/Llama-3-8B, scripted/script.yaml, replay/cassette.jsonl"
)


def parse_model(model: str) -> tuple[str, str]:
    """Split ``provider/model`` at the first ``/``; the model part may hold more ``/``
    and ``:`` (``openai-compatible/meta-llama/Llama-3-8B``, ``ollama/qwen2.5:7b``)."""
    prefix, slash, rest = model.strip().partition("/")
    if not slash or prefix not in PREFIXES:
        what = f"unknown provider {prefix!r}" if slash else "no provider prefix"
        raise ConfigError(
            f"model {model!r}: {what}. Write provider/model with a provider of "
            f"{', '.join(PREFIXES)}; for example {_EXAMPLES}"
        )
    if not rest.strip():
        raise ConfigError(f"model {model!r}: the model name after {prefix + '/'!r} is missing")
    return prefix, rest.strip()


def create_provider(
    model: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    retry: RetryPolicy | None = None,
    record_to: str | Path | None = None,
    workdir: Path | None = None,
    options: ProviderOptions | Mapping[str, Any] | None = None,
    **option_keywords: Any,
) -> Provider:
    """The provider for ``model`` (``provider/model``).

    ``api_key`` and ``base_url`` override the environment (``OPENAI_API_KEY``,
    ``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``OLLAMA_HOST``);
    ``transport`` (an ``httpx.AsyncBaseTransport``) and ``retry`` (a ``RetryPolicy``) are
    for tests. ``options`` (a ``ProviderOptions`` or a mapping of its fields) apply to
    whichever provider is built (see ``ProviderOptions``: offline models take
    ``streaming`` and ``context_window`` only); a bad key or value is a ``ConfigError``
    naming it. Option keywords (``streaming=False``) are a shorthand kept for older
    callers, checked the same way. ``scripted/`` and ``replay/`` paths are taken relative
    to ``workdir`` unless absolute. With ``record_to``, every call of a real provider is
    also appended to that cassette (see ``recording``).
    """
    prefix, name = parse_model(model)
    settings = ProviderOptions.of(options, **option_keywords)
    provider: Provider
    if prefix in ("openai", "openai-compatible", "ollama"):
        with shielded_imports():
            from . import openai

        cls = {
            "openai": openai.OpenAIProvider,
            "openai-compatible": openai.OpenAICompatibleProvider,
            "ollama": openai.OllamaProvider,
        }[prefix]
        provider = cls(
            name, api_key=api_key, base_url=base_url, transport=transport, retry=retry, options=settings
        )
    elif prefix == "anthropic":
        with shielded_imports():
            from .anthropic import AnthropicProvider

        provider = AnthropicProvider(
            name, api_key=api_key, base_url=base_url, transport=transport, retry=retry, options=settings
        )
    elif prefix == "scripted":
        with shielded_imports():
            from .scripted import ScriptedProvider

        provider = ScriptedProvider.from_file(name, workdir=workdir, options=settings)
    else:
        with shielded_imports():
            from .cassette import ReplayProvider

        provider = ReplayProvider(name, workdir=workdir, options=settings)
    if record_to is not None:
        with shielded_imports():
            from .cassette import recording

        provider = recording(provider, record_to, workdir=workdir)
    return provider

