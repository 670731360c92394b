"""What one turn of an agent needs: the loop (``engine.py``), the run context
(``context.py``), hooks and the approval channel (``hook.py``), ``ask_person`` and the
ask channel (``ask.py``), limits and budgets (``limits.py``, ``budget.py``), the session
and resuming it (``session.py``, ``resume.py``), the system prompt (``prompt.py``), the
context meter (``meter.py``), compaction (``compaction/``) and the checkpoint hook
(``checkpoint_hook.py``).

May import ``core``, ``providers``, ``sandbox``, ``tools`` and ``skills``; never
``permissions`` (which plugs into the hooks here), ``mcp``, or anything above them. No
IPython here: a script runs the engine without it.

Re-exported below is what a caller building an engine needs; every other name is
imported from the module that owns it.
"""

from .ask import Answer, AskChannel, AskPersonTool, Question
from .checkpoint_hook import CheckpointHook
from .compaction.keeper import CompactionPolicy
from .context import BackgroundApprovals, Delegation, ParentContext, RunContext, UsageAccount
from .engine import AgentEngine, EventSink, Injector
from .hook import (
    ALLOW,
    Allow,
    ApprovalChannel,
    Approved,
    Ask,
    Decision,
    Denied,
    Deny,
    DenyCoordinationHook,
    Hook,
    HookRegistry,
    OffloadHook,
    RedactSecretsHook,
    RunTool,
)
from .limits import Limits, RunResult
from .prompt import MainPrompt, PromptBuilder
from .session import MemorySession

__all__ = [
    "ALLOW",
    "AgentEngine",
    "Allow",
    "Answer",
    "ApprovalChannel",
    "Approved",
    "Ask",
    "AskChannel",
    "AskPersonTool",
    "BackgroundApprovals",
    "CheckpointHook",
    "CompactionPolicy",
    "Decision",
    "Delegation",
    "Denied",
    "Deny",
    "DenyCoordinationHook",
    "EventSink",
    "Hook",
    "HookRegistry",
    "Injector",
    "Limits",
    "MainPrompt",
    "MemorySession",
    "OffloadHook",
    "ParentContext",
    "PromptBuilder",
    "Question",
    "RedactSecretsHook",
    "RunContext",
    "RunResult",
    "RunTool",
    "UsageAccount",
]
