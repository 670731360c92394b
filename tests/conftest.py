"""Fixtures shared across the suite. Keep them generic: no test-specific behaviour here.
(The suite's tiers are the repository's ``conftest.py``.)"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import pytest_asyncio

if TYPE_CHECKING:
    from harness_nb.testing.kernel_driver import KernelDriver

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    """The captured real API streams, kept in the repository (see tests/fixtures/README.md)."""
    return FIXTURES


_PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_HOST",
    "HARNESS_NB_MODEL",
    "HARNESS_NB_RECORD_TO",
)


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts without provider keys, addresses or a default model, so no test can
    reach a real LLM API (or spend a developer's key) by accident; a test that needs one
    sets it itself."""
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets a home folder of its own, outside its workdir (``$HOME``, so
    ``Path.home()``): what a harness keeps there — its workdir's checkpoints, MCP trust —
    never lands in the developer's home, and no test sees another's."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def fresh_secrets() -> None:
    """Every test starts with the process's secrets knowing no keys and no folders (the
    environment is read as it is): a key one test registered cannot mask another's text."""
    from harness_nb.core.secret import SECRETS

    SECRETS.clear()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kernel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelDriver]:
    """One kernel shared by the tests of a module (starting one is most of a kernel test's
    time): each test takes a fresh harness in it with ``notebook_support.fresh_harness`` and
    runs on the module's loop (``pytest.mark.asyncio(loop_scope="module")``). A test taking it
    is in the kernel tier."""
    from notebook_support import shared_kernel

    async with shared_kernel(tmp_path_factory.mktemp(request.module.__name__)) as k:
        yield k
