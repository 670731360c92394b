"""Shared pieces of the provider tests: serving captured bytes and collecting a stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from harness_nb.providers import ModelRequest, ModelResponse, TextChunk, create_provider
from harness_nb.providers.base import Provider
from harness_nb.testing.fake_server import FakeLLMServer


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


class CaptureReplayer:
    """Streams captured bytes to a real provider, either through ``httpx.MockTransport`` in
    small pieces (``mode="mock_transport"``) or over loopback from the fake server
    (``mode="fake_server"``). ``api_root`` is appended to the server's URL for the base URL."""

    def __init__(self, mode: str, model: str, *, api_key: str, api_root: str = "", piece_size: int = 5) -> None:
        self.mode = mode
        self.model = model
        self.api_key = api_key
        self.api_root = api_root
        self.piece_size = piece_size
        self._servers: list[FakeLLMServer] = []
        self._providers: list[Provider] = []

    async def __call__(self, data: bytes, request: ModelRequest) -> tuple[list[str], ModelResponse]:
        if self.mode == "mock_transport":
            transport = pieces_transport(data, self.piece_size)
            provider = create_provider(self.model, api_key=self.api_key, transport=transport)
        else:
            server = FakeLLMServer([{"raw": data}])
            await server.start()
            self._servers.append(server)
            provider = create_provider(self.model, api_key=self.api_key, base_url=server.url + self.api_root)
        self._providers.append(provider)
        return await collect(provider, request)

    async def aclose(self) -> None:
        for provider in self._providers:
            await provider.aclose()
        for server in self._servers:
            await server.aclose()
