"""Which model a subagent runs on, and the providers a harness has made.

One rule, used by the runner, the notebook's views and ``%agents``: a definition's
``model`` of ``None`` (``inherit``) is the parent's model; a Claude Code alias (``sonnet``,
``opus``, ``haiku``, see ``CLAUDE_MODEL_ALIASES``) is that Anthropic model when the parent
runs on Anthropic, else the parent's model; a bare name without a provider prefix is the
parent's model too (with a log line); ``provider/model`` is itself.

``ModelResolver`` also keeps every provider it made, by model string, so that runs and
subagents on the same model share one connection pool, and a provider still used by a
background task is never closed under it: they are all closed with the harness.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..providers.base import Provider
from .definition import CLAUDE_MODEL_ALIASES, SubAgentDefinition

log = logging.getLogger("harness_nb.subagents")

ProviderFactory = Callable[[str], Provider]


def resolve_model(requested: str | None, parent_model: str) -> str:
    """The ``provider/model`` a definition asking for ``requested`` runs on under a parent
    running ``parent_model``."""
    text = (requested or "").strip()
    if not text or text.lower() == "inherit":
        return parent_model
    if "/" in text:
        return text
    alias = CLAUDE_MODEL_ALIASES.get(text.lower())
    if alias is not None and parent_model.startswith("anthropic/"):
        return f"anthropic/{alias}"
    if alias is None:
        log.info("model %r is not provider/model; using the parent's (%s)", text, parent_model)
    return parent_model


def describe_model(definition: SubAgentDefinition, parent_model: str | None) -> str:
    """How ``%agents`` and the views name a definition's model: ``inherit (openai/gpt-4o)``,
    ``sonnet → anthropic/claude-sonnet-4-5``, or the model itself."""
    shown_parent = parent_model or "(not configured)"
    requested = (definition.model or "").strip()
    if not requested:
        return f"inherit ({shown_parent})"
    if "/" in requested:
        return requested
    if parent_model is None:
        return f"{requested} → (not configured)"
    return f"{requested} → {resolve_model(requested, parent_model)}"


class ModelResolver:
    """Turns model strings into providers, once each (see the module docstring)."""

    def __init__(self, factory: ProviderFactory) -> None:
        self.factory = factory
        self._providers: dict[str, Provider] = {}
        self._adopted: set[str] = set()
        self._retired: list[Provider] = []

    def get(self, model: str) -> Provider:
        """The provider for ``model``, made on first use and kept until ``aclose``."""
        provider = self._providers.get(model)
        if provider is None:
            provider = self._providers[model] = self.factory(model)
        return provider

    def provider_for(self, definition: SubAgentDefinition, parent: Provider) -> Provider:
        """The provider ``definition`` runs on under a parent using ``parent``."""
        model = resolve_model(definition.model, parent.model_id)
        return parent if model == parent.model_id else self.get(model)

    def adopt(self, model: str, provider: Provider) -> None:
        """Keep a provider made elsewhere (``Harness(model=<Provider>)``) under ``model``."""
        self._providers[model] = provider
        self._adopted.add(model)

    def retire_made(self) -> None:
        """Make providers afresh from now on (the factory's settings changed). The old ones
        stay open — runs and background tasks may still be using them — until ``aclose``."""
        for model in [m for m in self._providers if m not in self._adopted]:
            self._retired.append(self._providers.pop(model))

    async def aclose(self) -> None:
        """Close every provider made, adopted or retired (each once)."""
        providers = {id(p): p for p in (*self._providers.values(), *self._retired)}
        self._providers.clear()
        self._retired.clear()
        for provider in providers.values():
            await provider.aclose()
