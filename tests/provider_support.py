"""Shared pieces of the provider tests: serving captured bytes and collecting a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from harness_nb.providers import ModelRequest, ModelResponse, TextChunk
from harness_nb.providers.base import Provider


def pieces_transport(data: bytes, size: int) -> httpx.MockTransport:
    """Serve ``data`` byte for byte as an event stream, in ``size``-byte pieces (so events
    and even JSON values arrive split, as they can over a real network)."""

    async def body() -> AsyncIterator[bytes]:
        for i in range(0, len(data), size):
            yield data[i : i + size]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return httpx.MockTransport(handler)


async def collect(provider: Provider, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    """The text chunks a stream yielded, and its final response."""
    chunks: list[str] = []
    response = None
    async for item in provider.stream(request):
        if isinstance(item, TextChunk):
            chunks.append(item.text)
        else:
            response = item
    assert isinstance(response, ModelResponse)
    return chunks, response
