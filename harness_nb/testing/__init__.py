"""Public test helpers: an offline scripted model, a fake LLM server speaking the OpenAI and
Anthropic APIs over real HTTP (``FakeBatchServer``: their batch APIs too), and a kernel
driver that acts as a Jupyter frontend.

Beside the harness in the layers: may import everything but the notebook, and jupyter_client
and IPython (never ipywidgets) for the kernel driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..providers.scripted import ScriptedProvider

__all__ = ["FakeBatchServer", "FakeLLMServer", "KernelDriver", "ScriptedProvider"]

if TYPE_CHECKING:
    from .fake_batch_server import FakeBatchServer
    from .fake_server import FakeLLMServer
    from .kernel_driver import KernelDriver


def __getattr__(name: str) -> Any:
    if name == "FakeBatchServer":
        from .fake_batch_server import FakeBatchServer

        return FakeBatchServer
    if name == "FakeLLMServer":
        from .fake_server import FakeLLMServer

        return FakeLLMServer
    if name == "KernelDriver":
        from .kernel_driver import KernelDriver

        return KernelDriver
    raise AttributeError(name)
