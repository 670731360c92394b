"""Keeping API keys out of everything a person or a model reads."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD)$")
_TOKEN = re.compile(r"[^\s\"',;:=]{8,}")


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret removed, and any token sharing 8 characters in a row with
    one: servers echo keys partly masked (``sk-proj-****abcd``), so exact matching is not
    enough."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, REDACTED)
        if len(secret) < 12:
            continue
        grams = {secret[i : i + 8] for i in range(len(secret) - 7)}

        def redact(match: re.Match[str], grams: set[str] = grams) -> str:
            token = match.group(0)
            hit = any(token[i : i + 8] in grams for i in range(len(token) - 7))
            return REDACTED if hit else token

        text = _TOKEN.sub(redact, text)
    return text


def environment_secrets() -> list[str]:
    """Values of environment variables that look like credentials (``*_API_KEY``,
    ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD``), at least 8 characters long."""
    return [v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8]
