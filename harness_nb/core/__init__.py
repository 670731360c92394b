"""Core models shared by every layer: messages, tool specs, events, usage and prices, the
error tree (``error.py``), ids, frontmatter parsing, and the few helpers every layer needs
to handle hostile input (text, files, threads, secrets).

The lowest layer: imports no other part of harness_nb, and of the outside world only the
standard library, pydantic and PyYAML (for ``frontmatter.py``). Its names are imported from
their modules on first use, so that what needs one error or helper loads no pydantic.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .blocking import BLOCKING_WORKERS, run_blocking
    from .error import (
        BudgetSpentError,
        ConfigError,
        FrontmatterError,
        HarnessError,
        LimitExceededError,
        McpServerError,
        McpUntrustedError,
        PathEscapeError,
        ProviderError,
        RayWorkerError,
        SettingFix,
        StreamCutError,
        SubagentFailedError,
        ToolError,
        UnknownNameError,
    )
    from .event import (
        ApprovalDecided,
        ApprovalRequested,
        BudgetWarning,
        Compacted,
        CompactionStarted,
        ContextMeasured,
        EffectsRecorded,
        Event,
        MessagesInjected,
        ModelCallFinished,
        RunFailed,
        RunFinished,
        RunStarted,
        ServerAdapted,
        SubagentUpdate,
        TextDelta,
        ToolCallFinished,
        ToolCallStarted,
        TurnFinished,
    )
    from .fs import (
        NotRegularFileError,
        SymlinkError,
        file_kind,
        open_folder,
        open_regular,
        read_regular,
        replace_regular,
    )
    from .ids import new_id
    from .media import DisplayData, ImagePart
    from .message import (
        AssistantMessage,
        Message,
        SystemMessage,
        Thinking,
        ToolCall,
        ToolResultMessage,
        ToolSpec,
        UserMessage,
    )
    from .price import PRICES, Price, PriceTable, price_for
    from .text import (
        escape_name,
        escape_surrogates,
        escape_surrogates_in_json,
        json_line,
        unescape_name,
    )
    from .usage import Usage

__all__ = [
    "BLOCKING_WORKERS",
    "PRICES",
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantMessage",
    "BudgetSpentError",
    "BudgetWarning",
    "Compacted",
    "CompactionStarted",
    "ConfigError",
    "ContextMeasured",
    "DisplayData",
    "EffectsRecorded",
    "Event",
    "FrontmatterError",
    "HarnessError",
    "ImagePart",
    "LimitExceededError",
    "McpServerError",
    "McpUntrustedError",
    "Message",
    "MessagesInjected",
    "ModelCallFinished",
    "NotRegularFileError",
    "PathEscapeError",
    "Price",
    "PriceTable",
    "ProviderError",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "ServerAdapted",
    "SettingFix",
    "StreamCutError",
    "SubagentFailedError",
    "SubagentUpdate",
    "SymlinkError",
    "SystemMessage",
    "TextDelta",
    "Thinking",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolError",
    "ToolResultMessage",
    "ToolSpec",
    "TurnFinished",
    "UnknownNameError",
    "RayWorkerError",
    "Usage",
    "UserMessage",
    "escape_name",
    "escape_surrogates",
    "escape_surrogates_in_json",
    "file_kind",
    "json_line",
    "new_id",
    "open_folder",
    "open_regular",
    "price_for",
    "read_regular",
    "replace_regular",
    "run_blocking",
    "unescape_name",
]

_HOME = {  # each name of __all__: the module of core that defines it
    "BLOCKING_WORKERS": "blocking",
    "run_blocking": "blocking",
    "BudgetSpentError": "error",
    "ConfigError": "error",
    "FrontmatterError": "error",
    "HarnessError": "error",
    "LimitExceededError": "error",
    "McpServerError": "error",
    "McpUntrustedError": "error",
    "PathEscapeError": "error",
    "ProviderError": "error",
    "RayWorkerError": "error",
    "SettingFix": "error",
    "StreamCutError": "error",
    "SubagentFailedError": "error",
    "ToolError": "error",
    "UnknownNameError": "error",
    "ApprovalDecided": "event",
    "ApprovalRequested": "event",
    "BudgetWarning": "event",
    "Compacted": "event",
    "CompactionStarted": "event",
    "ContextMeasured": "event",
    "EffectsRecorded": "event",
    "Event": "event",
    "MessagesInjected": "event",
    "ModelCallFinished": "event",
    "RunFailed": "event",
    "RunFinished": "event",
    "RunStarted": "event",
    "ServerAdapted": "event",
    "SubagentUpdate": "event",
    "TextDelta": "event",
    "ToolCallFinished": "event",
    "ToolCallStarted": "event",
    "TurnFinished": "event",
    "NotRegularFileError": "fs",
    "SymlinkError": "fs",
    "file_kind": "fs",
    "open_folder": "fs",
    "open_regular": "fs",
    "read_regular": "fs",
    "replace_regular": "fs",
    "new_id": "ids",
    "DisplayData": "media",
    "ImagePart": "media",
    "AssistantMessage": "message",
    "Message": "message",
    "SystemMessage": "message",
    "Thinking": "message",
    "ToolCall": "message",
    "ToolResultMessage": "message",
    "ToolSpec": "message",
    "UserMessage": "message",
    "PRICES": "price",
    "Price": "price",
    "PriceTable": "price",
    "price_for": "price",
    "escape_name": "text",
    "escape_surrogates": "text",
    "escape_surrogates_in_json": "text",
    "json_line": "text",
    "unescape_name": "text",
    "Usage": "usage",
}


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, imported from its module on first use (then kept here): ``import
    harness_nb`` and ``from harness_nb import Harness`` load no pydantic, asyncio or models."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'harness_nb.core' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
