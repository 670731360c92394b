"""The agent loop and what it needs: hooks, sessions, prompts, limits. No IPython here."""

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
    DenyToolsHook,
    Hook,
    HookRegistry,
    OffloadHook,
    RedactSecretsHook,
)
from .limits import Limits, RunResult
from .prompt import MAIN_SYSTEM_PROMPT, PromptBuilder, load_skill, skill_dirs
from .session import MemorySession, load_transcript

__all__ = [
    "ALLOW",
    "DEFAULT_DANGER_RULES",
    "MAIN_SYSTEM_PROMPT",
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
    "DenyToolsHook",
    "EventSink",
    "Hook",
    "HookRegistry",
    "Injector",
    "Limits",
    "MemorySession",
    "OffloadHook",
    "PromptBuilder",
    "RedactSecretsHook",
    "RunResult",
    "load_skill",
    "load_transcript",
    "skill_dirs",
]
