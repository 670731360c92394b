"""The agent loop and what it needs: hooks, sessions, prompts, limits. No IPython here."""

from .context import ParentContext, RunContext, UsageAccount
from .engine import AgentEngine, EventSink, Injector
from .hook import (
    ALLOW,
    DEFAULT_DANGER_RULES,
    Allow,
    ApprovalChannel,
    Approved,
    Ask,
    AskAllHook,
    DangerHook,
    DangerRule,
    Decision,
    Denied,
    Deny,
    DenyCoordinationHook,
    Hook,
    HookRegistry,
    OffloadHook,
    RedactSecretsHook,
)
from .limits import EARLY_STOPS, Limits, RunResult, require_positive, stop_label
from .prompt import MAIN_SYSTEM_PROMPT, PromptBuilder
from .session import MemorySession, load_transcript
from .skill import SKILL_MAX_BYTES, load_skill, skill_dirs, skill_name_problem

__all__ = [
    "ALLOW",
    "DEFAULT_DANGER_RULES",
    "EARLY_STOPS",
    "MAIN_SYSTEM_PROMPT",
    "SKILL_MAX_BYTES",
    "AgentEngine",
    "Allow",
    "ApprovalChannel",
    "Approved",
    "Ask",
    "AskAllHook",
    "DangerHook",
    "DangerRule",
    "Decision",
    "Denied",
    "Deny",
    "DenyCoordinationHook",
    "EventSink",
    "Hook",
    "HookRegistry",
    "Injector",
    "Limits",
    "MemorySession",
    "OffloadHook",
    "ParentContext",
    "PromptBuilder",
    "RedactSecretsHook",
    "RunContext",
    "RunResult",
    "UsageAccount",
    "load_skill",
    "load_transcript",
    "require_positive",
    "skill_dirs",
    "skill_name_problem",
    "stop_label",
]
