"""What the map tests over real HTTP share: each row's prompt carries ``ROW<value>``, so the
fake server can answer per row and a test can count what it was asked for each."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from harness_nb.testing import FakeLLMServer

ROW = re.compile(r"ROW<(.*?)>")


def row_of(body: dict[str, Any]) -> str:
    """The row a request is for (its ``ROW<…>``)."""
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str) and (found := ROW.search(content)):
            return found.group(1)
    raise AssertionError(f"no ROW<…> in {body}")


def asked(server: FakeLLMServer) -> Counter[str]:
    """How many requests the server got for each row."""
    return Counter(row_of(r.body) for r in server.requests)


def upper(body: dict[str, Any]) -> dict[str, Any]:
    """A step answering each row with its value in capitals, 45 tokens."""
    return {"text": row_of(body).upper(), "usage": {"input_tokens": 40, "output_tokens": 5}}
