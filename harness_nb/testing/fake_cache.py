"""The fake server's prompt cache: which prompt prefixes it has seen, so that it reports
cache usage the way each API does.

A prompt is a sequence of pieces in the APIs' cache order — tools, then the system
prompt, then the messages — and a prefix is named by the running sha256 of its pieces
(the model's name included; ``cache_control`` markers left out, as they do not change
what is cached). A prefix's size is its characters / 4, the fake server's token count.

- **Anthropic** caches only what a request marks. Each ``cache_control`` block ends a
  prefix that is written to the cache; a later request reads the longest cached prefix
  found at one of its breakpoints or at most 20 blocks before one (the API's look-back).
  Usage: ``cache_read_input_tokens`` for the part read, ``cache_creation_input_tokens``
  for the part from there to the last breakpoint, ``input_tokens`` for the rest.
- **OpenAI** caches every prompt by itself, prefixes of 1,024 tokens or more, in steps of
  128 tokens: the longest prefix (at a message boundary) of an earlier prompt is reported
  as ``prompt_tokens_details.cached_tokens``, inside ``prompt_tokens``.

Prefixes shorter than ``min_tokens`` (1,024 by default, both APIs' minimum for their
larger models) are never cached. Entries never expire: a test or a benchmark is shorter
than the APIs' five minutes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["DEFAULT_MIN_TOKENS", "PromptCache"]

DEFAULT_MIN_TOKENS = 1024
LOOKBACK = 20
OPENAI_STEP = 128


class PromptCache:
    """The prefixes one fake server has cached (see the module doc)."""

    def __init__(self, min_tokens: int = DEFAULT_MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._seen: set[bytes] = set()

    def anthropic(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """``(read, written)`` tokens for a Messages API request ``body``."""
        digests, tokens, marked = _prefixes(body.get("model"), _anthropic_pieces(body))
        marks = [i for i, m in enumerate(marked) if m and tokens[i] >= self.min_tokens]
        if not marks:
            return 0, 0
        hit = -1
        for mark in marks:
            for i in range(mark, max(mark - LOOKBACK, -1), -1):
                if digests[i] in self._seen:
                    hit = max(hit, i)
                    break
        for mark in marks:
            self._seen.add(digests[mark])
        read = tokens[hit] if hit >= 0 else 0
        return read, max(tokens[marks[-1]] - read, 0)

    def openai(self, body: Mapping[str, Any]) -> int:
        """The ``cached_tokens`` of a Chat Completions request ``body``."""
        digests, tokens, _ = _prefixes(body.get("model"), _openai_pieces(body))
        cached = 0
        for digest, size in zip(digests, tokens, strict=True):
            if size < self.min_tokens:
                continue
            if digest in self._seen:
                cached = size - size % OPENAI_STEP
            self._seen.add(digest)
        return cached


def _prefixes(model: Any, pieces: Iterator[tuple[bytes, bool]]) -> tuple[list[bytes], list[int], list[bool]]:
    """For each piece: the digest of the prefix it ends, that prefix's tokens, whether the
    piece carries a breakpoint."""
    running = hashlib.sha256(str(model).encode())
    digests, tokens, marked = [], [], []
    chars = 0
    for data, mark in pieces:
        running.update(data)
        chars += len(data)
        digests.append(running.copy().digest())
        tokens.append(chars // 4)
        marked.append(mark)
    return digests, tokens, marked


def _encode(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode()


def _anthropic_pieces(body: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    def piece(block: Any, role: str) -> tuple[bytes, bool]:
        if not isinstance(block, dict):
            return _encode([role, block]), False
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        return _encode([role, plain]), "cache_control" in block

    for tool in body.get("tools") or ():
        yield piece(tool, "tool")
    system = body.get("system")
    if isinstance(system, str) and system:
        yield piece({"type": "text", "text": system}, "system")
    elif isinstance(system, list):
        for block in system:
            yield piece(block, "system")
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role, content = str(message.get("role")), message.get("content")
        if isinstance(content, str):
            yield piece({"type": "text", "text": content}, role)
        elif isinstance(content, list):
            for block in content:
                yield piece(block, role)


def _openai_pieces(body: Mapping[str, Any]) -> Iterator[tuple[bytes, bool]]:
    for tool in body.get("tools") or ():
        yield _encode(["tool", tool]), False
    for message in body.get("messages") or ():
        yield _encode(message), False
