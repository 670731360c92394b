"""``RetryPolicy``: how a provider retries a request that may succeed later. A module of
its own, without httpx, so that what only configures retries (``Harness.map``) does not
import the HTTP client."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a request that may succeed on a later try.

    Retry ``n`` (0-based) waits ``base_delay * 2**n`` capped at ``max_delay``, jittered into
    ``[d/2, d]`` so that many clients do not retry in lockstep. A server's ``Retry-After``
    replaces that wait, up to ``max_retry_after``. ``sleep`` is injectable for tests.
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt``."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2**attempt)
        return ceiling * (0.5 + random.random() / 2)
