"""Core models shared by every layer: messages, tool specs, events, usage and prices, the
error tree (``error.py``), ids, frontmatter parsing, and the few helpers every layer needs
to handle hostile input (text, files, threads, secrets).

The lowest layer: imports no other part of harness_nb, and of the outside world only the
standard library, pydantic and PyYAML (for ``frontmatter.py``).
"""

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
    RunFailed,
    RunFinished,
    RunStarted,
    SubagentUpdate,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from .fs import NotRegularFileError, SymlinkError, file_kind, open_folder, open_regular, read_regular, replace_regular
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
from .text import escape_name, escape_surrogates, escape_surrogates_in_json, json_line, unescape_name
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
    "FrontmatterError",
    "Event",
    "HarnessError",
    "ImagePart",
    "LimitExceededError",
    "McpServerError",
    "McpUntrustedError",
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
    "SubagentFailedError",
    "SubagentUpdate",
    "SymlinkError",
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
