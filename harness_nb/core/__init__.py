"""Core models shared by every layer: messages, tool specs, events, usage and prices, errors,
ids, and the few helpers every layer needs to handle hostile input (text, files, threads).

Depends on the standard library and pydantic only.
"""

from .blocking import BLOCKING_WORKERS, run_blocking
from .error import (
    ConfigError,
    HarnessError,
    LimitExceeded,
    PathEscapeError,
    ProviderError,
    StreamCutError,
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
    RunFailed,
    RunFinished,
    RunStarted,
    SubagentUpdate,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from .fs import NotRegularFileError, file_kind, open_regular, read_regular
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
from .text import escape_surrogates, escape_surrogates_in_json, json_line, unescape_bytes
from .usage import Usage

__all__ = [
    "BLOCKING_WORKERS",
    "PRICES",
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantMessage",
    "BudgetWarning",
    "Compacted",
    "CompactionStarted",
    "ConfigError",
    "ContextMeasured",
    "DisplayData",
    "EffectsRecorded",
    "Event",
    "HarnessError",
    "ImagePart",
    "LimitExceeded",
    "Message",
    "MessagesInjected",
    "NotRegularFileError",
    "PathEscapeError",
    "Price",
    "PriceTable",
    "ProviderError",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "StreamCutError",
    "SubagentUpdate",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolError",
    "ToolResultMessage",
    "Thinking",
    "ToolSpec",
    "TurnFinished",
    "UnknownNameError",
    "Usage",
    "UserMessage",
    "escape_surrogates",
    "escape_surrogates_in_json",
    "file_kind",
    "json_line",
    "new_id",
    "open_regular",
    "price_for",
    "read_regular",
    "run_blocking",
    "unescape_bytes",
]
