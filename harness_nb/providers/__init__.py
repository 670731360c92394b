"""LLM providers: the interface, ``create_provider`` and the concrete clients.

The clients (and so httpx) are imported on first use: ``import harness_nb.providers``
stays cheap. May import ``core`` only (never ``sandbox`` beside it, nor anything above).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.imports import import_module
from .base import ModelRequest, ModelResponse, Provider, TextChunk
from .factory import create_provider
from .options import ProviderOptions

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .cassette import RecordingProvider, ReplayProvider, recording
    from .openai import OpenAIProvider

_LAZY = {
    "OpenAIProvider": ".openai",
    "AnthropicProvider": ".anthropic",
    "RecordingProvider": ".cassette",
    "ReplayProvider": ".cassette",
    "recording": ".cassette",
}

__all__ = [
    "AnthropicProvider",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Provider",
    "ProviderOptions",
    "RecordingProvider",
    "ReplayProvider",
    "TextChunk",
    "create_provider",
    "recording",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
