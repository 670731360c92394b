"""Harnesses a test made are closed after it: register one in ``OPEN`` and import
``close_harnesses`` (an autouse fixture) into the test module."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from harness_nb.harness import Harness

OPEN: list[Harness] = []


@pytest.fixture(autouse=True)
async def close_harnesses() -> AsyncIterator[None]:
    yield
    while OPEN:
        await OPEN.pop().aclose()
