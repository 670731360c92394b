"""HTTP plumbing shared by the OpenAI and Anthropic providers.

Everything that touches httpx lives here: the client and its timeouts, retries with
backoff, reading server-sent events (framed by httpx-sse), turning HTTP statuses and
transport failures into one ``ProviderError`` a person can act on, and keeping the API key
out of every message. The vendor modules only map requests and parse payloads.

Retried: connect errors, timeouts and dropped connections before the first event,
HTTP 408/409/429/5xx/529, and an overloaded or rate-limit error event that arrives first.
Never retried: any other 4xx, and anything after the first event of a stream.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import functools
import json
import logging
import os
import ssl
import sys
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, TypeVar, cast

import httpx
from httpx_sse import EventSource, ServerSentEvent, SSEError
from pydantic import SecretStr

from ..core import ProviderError, SettingFix, StreamCutError, ToolCall
from ..core.secret import SECRETS
from .base import ModelRequest, ModelResponse, Provider, StreamItem, TextChunk
from .estimate import estimated_usage
from .options import ProviderOptions
from .quirks import EMPTY_STREAM, QUIRKS, SYSTEM_FORM
from .retry import RetryPolicy
from .window import context_length_error
from .wire import encode_body

log = logging.getLogger("harness_nb.providers")

# Connect fails fast; a long generation may legitimately take minutes between bytes.
DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
KEEP_ALIVE = httpx.Limits(max_connections=100, max_keepalive_connections=100)
"""One client's connections: as many kept alive between calls as may be open at once."""
_RETRYABLE_KINDS = frozenset({"overloaded_error", "rate_limit_error", "api_error", "server_error"})
_T = TypeVar("_T")


class Assembler(Protocol):
    """Builds one answer from a stream's payloads (one per wire format)."""

    def feed(self, data: Any) -> str:
        """Take one payload's data; return the text it adds."""

    def response(self, cut: str | None) -> ModelResponse:
        """The whole answer; ``StreamCutError`` (saying ``cut``) if it never finished."""


@dataclass(slots=True)
class Payload:
    """One server-sent event: its ``event`` name and JSON ``data`` (``None`` for ``[DONE]``)."""

    event: str
    data: Any


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` given as
    seconds or as an HTTP date. ``None`` when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def stream_cut(
    provider: str, cut: str | None, text: str, calls: Sequence[ToolCall], *, missing: str
) -> StreamCutError:
    """The error for a stream that ended before the answer did, saying what had arrived.

    ``cut`` is why the connection failed mid-stream (transient: retrying may well work), or
    ``None`` when the server closed the stream cleanly without sending ``missing``: a
    protocol problem with that server that will happen again, so it is not retryable."""
    got = [f"{len(text)} characters of text" + (f" ({_snip(text)!r})" if text else "")]
    for call in calls:
        size = len(call.arguments)
        got.append(f"a call to {call.name or '?'} with {size} characters of arguments")
    received = ", ".join(got)
    if cut is not None:
        return StreamCutError(
            f"the response stream was cut ({cut}) before the answer finished; received "
            f"{received}. The partial answer was discarded; retry the request.",
            provider=provider,
            retryable=True,
        )
    error = StreamCutError(
        f"the server ended the stream without {missing}, so the answer may be incomplete; "
        f"received {received}. The partial answer was discarded. This server's streaming "
        "does not follow the protocol and will fail again.",
        provider=provider,
        retryable=False,
        # nothing arrived: the provider asks again without streaming (``quirks.py``)
        kind=None if text or calls else EMPTY_STREAM,
    )
    error.fix = SettingFix("provider_options", {"streaming": False}, "turn streaming off")
    return error


SHAPE_ERRORS = (AttributeError, TypeError, KeyError, ValueError)  # what reading a payload of the wrong shape raises


def _snip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class _BlankLineAtEOF:
    """The response as httpx-sse reads it, plus a blank line at the end of the body.

    The SSE spec drops an event that is not followed by a blank line; some servers (and
    the captured fixtures) end the last event without one. ``eof`` tells a truncated last
    event apart from a malformed one."""

    def __init__(self, response: httpx.Response) -> None:
        self.headers = response.headers
        self._response = response
        self.eof = False

    async def aiter_text(self) -> AsyncIterator[str]:
        async for text in self._response.aiter_text():
            yield text
        self.eof = True
        yield "\n\n"


class EventStream:
    """The decoded events of one streamed answer.

    ``prime()`` reads the first event while a failure can still be retried. Iteration
    then stops early with ``cut`` set to the reason when the connection fails, so that the
    caller can say what it had received; ``cut`` stays ``None`` when the server ended the
    stream cleanly."""

    def __init__(self, provider: HTTPProvider, response: httpx.Response) -> None:
        self._provider = provider
        self._response = response
        self._tail = _BlankLineAtEOF(response)
        self._events = EventSource(cast(httpx.Response, self._tail)).aiter_sse()
        self._first: Payload | None = None
        self.cut: str | None = None

    async def prime(self) -> None:
        """Read the first event (transport errors and error events propagate)."""
        async for sse in self._events:
            self._first = self._payload(sse)
            if self._first is not None or self.cut is not None:
                return

    async def __aiter__(self) -> AsyncIterator[Payload]:
        if self._first is not None:
            yield self._first
        if self.cut is not None:
            return
        # One loop over the events (not a coroutine called per event: some 20 an answer)
        try:
            async for sse in self._events:
                payload = self._payload(sse)
                if payload is not None:
                    yield payload
                elif self.cut is not None:
                    return
        except (httpx.HTTPError, SSEError) as exc:
            self.cut = self._provider.translate(exc, mid_stream=True).message

    def _payload(self, sse: ServerSentEvent) -> Payload | None:
        """The payload ``sse`` carries; ``None`` for an empty event, or (with ``cut`` set) for
        a last event the connection cut in two. A payload that is an error event raises it."""
        data = sse.data.strip()
        if not data:
            return None
        if data == "[DONE]":
            return Payload(sse.event, None)
        try:
            value = json.loads(data)
        except json.JSONDecodeError:
            if self._tail.eof:
                self.cut = "the connection closed inside an event"
                return None
            shown = self._provider.scrub(_snip(data))
            raise ProviderError(
                f"the server sent an event that is not JSON: {shown!r}",
                provider=self._provider.name,
            ) from None
        payload = Payload(sse.event, value)
        error = self._provider.event_error(payload)
        if error is not None:
            raise error
        return payload

    async def aclose(self) -> None:
        """Close the event reader and the response."""
        await self._events.aclose()
        await self._response.aclose()


def tls_context() -> ssl.SSLContext:
    """The TLS context providers verify servers with, as httpx makes it (certifi's CA
    bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set), made once for each value of
    those variables instead of once per provider: loading the bundle costs about 20 ms of
    CPU, which every harness, and every subagent on a model of its own, paid again. It loads
    them at its first connection (``TrustOnFirstUse``)."""
    return _tls_context_for(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context_for(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    if not cafile and not capath:
        import certifi  # httpx's default, as httpx.create_ssl_context

        cafile = certifi.where()
    return TrustOnFirstUse(cafile or None, None if cafile else capath)


class TrustOnFirstUse(ssl.SSLContext):
    """A client context as ``ssl.create_default_context`` makes it (server certificate and
    host name verified), whose CA certificates load as it wraps its first connection, not
    when it is made: loading certifi's bundle takes ~19 ms of CPU holding the GIL, at a
    harness's first run, though a provider whose server speaks plain HTTP (a local model
    server, the benchmarks' fake one) never uses them. anyio wraps a connection in a worker
    thread for a context of a type of its own, so that first load leaves the event loop be."""

    _locations: tuple[str | None, str | None]
    _trusted: bool
    _trusting: threading.Lock

    def __new__(cls, cafile: str | None, capath: str | None) -> Self:
        context = super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)  # verify_mode CERT_REQUIRED, check_hostname
        context._locations = (cafile, capath)
        context._trusted = False
        context._trusting = threading.Lock()
        keylog = os.environ.get("SSLKEYLOGFILE")  # as ssl.create_default_context
        if keylog and not sys.flags.ignore_environment:
            context.keylog_filename = keylog
        return context

    def trust(self) -> None:
        """Load the CA certificates, once (called before each connection is wrapped)."""
        with self._trusting:
            if not self._trusted:
                self.load_verify_locations(*self._locations)
                self._trusted = True

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self.trust()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self.trust()
        return super().wrap_socket(*args, **kwargs)


class HTTPProvider(Provider):
    """A provider reached over HTTP with one ``httpx.AsyncClient``.

    Subclasses set ``endpoint`` (the path answers are posted to), ``key_hint`` (named in
    authentication errors) and ``base_url_hint`` (named in connection and not-found
    errors), and implement ``headers()``, ``body()``, ``answer()`` and ``assembler()``; they
    may override ``event_error()`` to recognise an error sent inside a stream. With
    ``streaming`` off, ``stream()`` makes one plain request too, whoever calls it.

    ``quirks`` is what this server was found unable to do (``quirks.py``), shared by every
    provider of the process: a server found unable to stream is not streamed to
    (``streaming`` is off), and an answer whose server reported no usage gets an estimate
    (``estimate.py``)."""

    endpoint: ClassVar[str] = ""
    key_hint: ClassVar[str] = "the api_key setting"
    base_url_hint: ClassVar[str] = "the base_url setting"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
        options: ProviderOptions | None = None,
    ) -> None:
        options = options or ProviderOptions()
        super().__init__(model, options=options)
        self.options = options
        self.base_url = base_url.rstrip("/")
        self.quirks = QUIRKS.of(self.base_url, model)
        self._api_key = SecretStr(api_key) if api_key else None
        SECRETS.add(api_key)  # masked everywhere from now on, not only in this provider's errors
        policy = retry or RetryPolicy()
        if options.max_retries is not None:
            policy = dataclasses.replace(policy, max_retries=options.max_retries)
        self.retry = policy
        timeout = DEFAULT_TIMEOUT
        if options.timeout is not None:
            timeout = httpx.Timeout(options.timeout, connect=min(10.0, options.timeout))
        # The headers are the client's, fixed with the key: given per request, httpx merges
        # them into the client's on every call (~30 µs, 4 % of a call's CPU at loopback).
        # Every connection kept alive (httpx keeps 20 by default): a map at concurrency 32 would
        # otherwise close and open 12 connections a round (connect, close, a TLS handshake).
        self._client = httpx.AsyncClient(
            base_url=self.base_url, transport=transport, timeout=timeout, verify=tls_context(),
            headers={**self.headers(), "Content-Type": "application/json"}, limits=KEEP_ALIVE,
        )

    _streaming: bool = True

    @property
    def streaming(self) -> bool:
        """Whether answers are streamed: the ``streaming`` option (on by default), unless
        this server was found unable to stream (``quirks.py``)."""
        return self._streaming and self.quirks.streams

    @streaming.setter
    def streaming(self, value: bool) -> None:
        self._streaming = value

    # -- to be provided by a vendor --------------------------------------------------------

    def headers(self) -> dict[str, str]:
        """Request headers, including authentication: read once, as ``__init__`` makes the
        client, so from the key and what is set before ``HTTPProvider.__init__`` runs."""
        return {}

    def event_error(self, payload: Payload) -> ProviderError | None:
        """The error an in-stream event reports, if it is one."""
        return None

    def body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The request body for ``request``."""
        raise NotImplementedError

    def answer(self, data: Any) -> ModelResponse:
        """The answer a plain (not streamed) response's JSON holds."""
        raise NotImplementedError

    def assembler(self) -> Assembler:
        """A fresh assembler of one streamed answer."""
        raise NotImplementedError

    # -- answers ---------------------------------------------------------------------------

    def sampling(self, request: ModelRequest) -> tuple[int | None, float | None]:
        """``(max_tokens, temperature)`` for ``request``: its own, else the options'."""
        temperature = request.temperature
        if temperature is None:
            temperature = self.options.temperature
        return request.max_tokens or self.options.max_tokens, temperature

    def output_limit(self, request: ModelRequest) -> int | None:
        """The ``max_tokens`` this provider sends with ``request`` (``None``: none)."""
        return self.sampling(request)[0]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One non-streamed answer (sent once more in a form the server takes, when it
        refused the request's form: ``adapted``)."""
        notices: tuple[str, ...] = ()
        try:
            data = await self.post_json(self.endpoint, self.body(request, stream=False))
        except ProviderError as error:
            if (learnt := self.adapted(error)) is None:
                raise
            notices = learnt
            data = await self.post_json(self.endpoint, self.body(request, stream=False))
        try:  # as ``reading`` does, without a generator-made context manager on every call
            answer = self.answer(data)
        except SHAPE_ERRORS as exc:
            raise self.shape_error(data, exc) from exc
        return self.settled(request, answer, notices)

    def stream(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        """Text chunks as they arrive, then the whole answer (with ``streaming`` off: the
        plain answer's text as one chunk, then the answer). The generator returned is the
        one that reads the answer, not a generator passing on its items: each layer cost
        every event of a stream a hop (~1 µs, some 20 events an answer)."""
        if not self.streaming:
            return super().stream(request)
        return self.stream_answer(request)

    def adapted(self, error: ProviderError) -> tuple[str, ...] | None:
        """What this provider learnt from ``error`` that makes sending the request again
        worth it (the notices to give, maybe none: another call learnt it first), or
        ``None`` when it learnt nothing and the error stands."""
        if error.kind == SYSTEM_FORM:
            return self.quirks.refuses_system_blocks()
        return None

    def settled(
        self, request: ModelRequest, response: ModelResponse, notices: tuple[str, ...] = ()
    ) -> ModelResponse:
        """``response`` as the engine gets it: with ``notices`` of what was learnt, and an
        estimate of its usage when the server reported none (``estimate.py``)."""
        usage = response.usage
        if not notices and not usage.unreported_calls:
            return response
        update: dict[str, Any] = {"notices": response.notices + notices}
        if usage.unreported_calls and not usage.total_tokens:
            update["usage"] = estimated_usage(
                request.system, request.messages, request.tools, response.message, self.token_ratio
            )
        return response.model_copy(update=update)

    # -- keys ------------------------------------------------------------------------------

    def api_key(self) -> str | None:
        """The key itself, for building headers. Never put it anywhere else."""
        return self._api_key.get_secret_value() if self._api_key else None

    def scrub(self, text: str) -> str:
        """``text`` without this provider's key or any other known secret (a server may
        echo anything the request held)."""
        return SECRETS.scrub(text)

    # -- requests --------------------------------------------------------------------------

    async def post_json(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` and return the parsed JSON answer, retrying what may succeed."""
        content = encode_body(body)

        async def once() -> Any:
            response = await self._client.post(path, content=content)
            if response.status_code >= 400:
                raise self.status_error(response)
            try:
                data = response.json()
            except ValueError:
                raise ProviderError(
                    f"the server answered with something that is not JSON: "
                    f"{self.scrub(_snip(response.text))!r}",
                    provider=self.name,
                    status=response.status_code,
                ) from None
            error = self.event_error(Payload("", data))
            if error is not None:
                raise error
            return data

        return await self.with_retries(once)

    async def call(
        self, method: str, path: str, *, content: bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        """One request to another endpoint of the API (a batch's, a file's), its body read,
        retried as ``post_json``; an error answer is a ``ProviderError``."""

        async def once() -> httpx.Response:
            response = await self._client.request(method, path, content=content, headers=headers)
            if response.status_code >= 400:
                raise self.status_error(response)
            return response

        return await self.with_retries(once)

    @contextlib.asynccontextmanager
    async def download(self, path: str) -> AsyncIterator[httpx.Response]:
        """``GET path`` with its body left to read (``aiter_bytes``): a file too large to
        hold at once. Retried up to the answer's status line; closed on leaving."""

        async def once() -> httpx.Response:
            response = await self._client.send(self._client.build_request("GET", path), stream=True)
            if response.status_code >= 400:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
                raise self.status_error(response)
            return response

        response = await self.with_retries(once)
        try:
            yield response
        except httpx.HTTPError as exc:
            raise self.translate(exc, mid_stream=True) from exc
        finally:
            await response.aclose()

    async def open_stream(self, path: str, body: Mapping[str, Any]) -> EventStream:
        """POST ``body`` and return its event stream once the first event has arrived.
        Retries happen only up to that point. The caller must ``aclose()`` the stream."""
        content = encode_body(body)

        async def once() -> EventStream:
            request = self._client.build_request("POST", path, content=content)
            response = await self._client.send(request, stream=True)
            events = EventStream(self, response)
            try:
                if response.status_code >= 400:
                    await response.aread()
                    raise self.status_error(response)
                await events.prime()
            except BaseException:
                await events.aclose()
                raise
            return events

        return await self.with_retries(once)

    async def stream_answer(self, request: ModelRequest) -> AsyncGenerator[StreamItem, None]:
        """Stream the answer to ``request``: text chunks as they are assembled, then the
        whole ``ModelResponse``. A server that sends nothing (a stream ended before any
        event, or an empty answer to a request offering tools) is asked once more without
        streaming; when that answers, it is not streamed to again (``quirks.py``)."""
        notices: tuple[str, ...] = ()
        try:
            events = await self.open_stream(self.endpoint, self.body(request, stream=True))
        except ProviderError as error:
            if (learnt := self.adapted(error)) is None:
                raise
            notices = learnt
            events = await self.open_stream(self.endpoint, self.body(request, stream=True))
        answer = self.assembler()
        try:
            async for payload in events:
                try:  # not ``reading()``: a context manager per event cost ~2 µs, 20 per answer
                    text = answer.feed(payload.data)
                except SHAPE_ERRORS as exc:
                    raise self.shape_error(payload.data, exc) from exc
                if text:
                    yield TextChunk(text)
        finally:
            await events.aclose()
        try:
            response: ModelResponse | None = answer.response(events.cut)
        except StreamCutError as error:
            if error.kind != EMPTY_STREAM:
                raise
            response = None
        if response is not None and not (request.tools and _empty(response)):
            yield self.settled(request, response, notices)
            return
        # Nothing was shown of this answer: asking again without streaming answers no part twice.
        again = await self.complete(request)
        if response is None or not _empty(again):
            notices += self.quirks.cannot_stream(tools=bool(request.tools))
        if response is not None and not response.usage.unreported_calls:
            usage = response.usage.model_copy()  # the empty answer's tokens were spent too
            usage.add(again.usage)
            again = again.model_copy(update={"usage": usage})
        if again.message.content:
            yield TextChunk(again.message.content)
        yield self.settled(request, again, notices)

    @contextlib.contextmanager
    def reading(self, data: Any) -> Iterator[None]:
        """Turn a payload of an unexpected shape (valid JSON, wrong fields) into one
        ``ProviderError`` instead of an ``AttributeError`` from deep in a parser."""
        try:
            yield
        except SHAPE_ERRORS as exc:
            raise self.shape_error(data, exc) from exc

    def shape_error(self, data: Any, exc: Exception) -> ProviderError:
        """The error for a payload ``data`` whose reading raised ``exc`` (``SHAPE_ERRORS``)."""
        shown = self.scrub(_snip(json.dumps(data), 200))
        return ProviderError(
            f"the server's answer has an unexpected shape ({type(exc).__name__}: {exc}): {shown}", provider=self.name
        )

    async def with_retries(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``attempt``, retrying retryable failures as ``self.retry`` allows."""
        tries = 0
        while True:
            try:
                try:
                    return await attempt()
                except (httpx.HTTPError, SSEError) as exc:
                    raise self.translate(exc) from exc
            except ProviderError as error:
                tries += 1
                if not error.retryable or tries > self.retry.max_retries:
                    if error.retryable and tries > 1:
                        error.message += f" (gave up after {tries} attempts)"
                    raise
                delay = self.retry.delay(tries - 1, error.retry_after)
                log.warning(
                    "%s; retry %d of %d in %.2f s", error, tries, self.retry.max_retries, delay
                )
                await self.retry.sleep(delay)

    # -- errors ----------------------------------------------------------------------------

    def translate(
        self, exc: httpx.HTTPError | SSEError, *, mid_stream: bool = False
    ) -> ProviderError:
        """The one place where an httpx (or httpx-sse) failure becomes a ``ProviderError``."""
        detail = self.scrub(str(exc) or type(exc).__name__)
        if isinstance(exc, SSEError):
            return ProviderError(f"expected an event stream: {detail}", provider=self.name)
        if mid_stream:
            return ProviderError(f"{type(exc).__name__}: {detail}", provider=self.name)
        if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError):
            message = (
                f"could not connect to {self.base_url} ({detail}); is the server running? "
                f"Check {self.base_url_hint}"
            )
        elif isinstance(exc, httpx.TimeoutException):
            message = f"no answer from {self.base_url} in time ({type(exc).__name__})"
        elif isinstance(exc, httpx.TransportError):
            message = f"the connection to {self.base_url} failed ({type(exc).__name__}: {detail})"
        else:
            return ProviderError(f"{type(exc).__name__}: {detail}", provider=self.name)
        return ProviderError(message, provider=self.name, retryable=True)

    def status_error(self, response: httpx.Response) -> ProviderError:
        """The error for an HTTP error answer (the body must have been read)."""
        kind, detail = _error_detail(response)
        try:
            body = response.json()
        except ValueError:
            body = None
        return self.api_error(
            response.status_code, kind, detail, retry_after=parse_retry_after(response.headers), body=body
        )

    def api_error(
        self,
        status: int | None,
        kind: str,
        detail: str,
        *,
        retry_after: float | None = None,
        body: Any = None,
    ) -> ProviderError:
        """The error for a failure the API reported (by status, or as an error event whose
        JSON is ``body``). A request too long for the model's context is never retried
        (llama.cpp says so with a 500): it has ``kind="context_length"`` and the window the
        server stated, for the engine to compact and try again."""
        detail = self.scrub(detail)
        status_code = status or 0
        too_long, stated = context_length_error(f"{kind} {detail}", body)
        if too_long:
            return ProviderError(
                f"the request is too long for the model's context window.{' Server said: ' + detail if detail else ''}",
                provider=self.name,
                status=status,
                kind="context_length",
                context_window=stated,
            )
        overloaded = status_code == 529 or kind == "overloaded_error"
        retryable = (
            status_code in (408, 409, 429) or status_code >= 500 or kind in _RETRYABLE_KINDS
        )
        said = f" Server said: {detail}" if detail else ""
        if status_code in (401, 403):
            message = f"authentication failed: check {self.key_hint}.{said}"
        elif status_code == 404:
            message = (
                f"model {self.model!r} or endpoint not found at {self.base_url}: check the model "
                f"name and {self.base_url_hint}.{said}"
            )
        elif status_code == 429 or kind == "rate_limit_error":
            message = f"rate limited: slow down or wait, then retry.{said}"
        elif overloaded:
            message = f"the API is overloaded; try again shortly.{said}"
        elif retryable:
            message = f"the server failed ({kind or 'server error'}).{said}"
        else:
            message = f"the request was rejected: {detail or kind or 'no reason given'}"
        return ProviderError(
            message, provider=self.name, status=status, retryable=retryable, retry_after=retry_after
        )

    # -- lifetime --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client. Safe to call twice."""
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} at {self.base_url}>"



def _empty(response: ModelResponse) -> bool:
    """An answer of nothing: no text, no tool call, and not for want of room (``max_tokens``)."""
    message = response.message
    return not message.content and not message.tool_calls and response.stop_reason != "max_tokens"


def _error_detail(response: httpx.Response) -> tuple[str, str]:
    """``(kind, message)`` from an error body: both vendors send ``{"error": {"type",
    "message"}}``; anything else is shown as text."""
    try:
        body = response.json()
    except ValueError:
        return "", _snip(response.text.strip(), 500)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("type") or error.get("code") or ""), str(error.get("message") or "")
    if isinstance(error, str):
        return "", error
    return "", _snip(json.dumps(body), 500)
