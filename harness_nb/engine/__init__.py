"""The agent loop and what it needs: hooks, sessions, prompts, limits. No IPython here."""

from .budget import BudgetScope, CallEstimate, PromptTally
from .checkpoint_hook import CheckpointHook
from .compaction import CompactionPolicy, ContextKeeper
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
    denial_line,
    denial_result,
    person_reason,
)
from .meter import ContextMeter
from .permission import PERMISSION_MODES, POLICIES, PermissionHook, PermissionMode, Policy, remembering
from .rule import PermissionRules, Rule, parse_rule, session_rule
from .limits import BUDGET_STOPS, EARLY_STOPS, Limits, Place, RunResult, ToolSlots, require_positive, stop_label
from .prompt import MAIN_SYSTEM_PROMPT, PromptBuilder
from .session import MemorySession, load_transcript
from .skill import SKILL_MAX_BYTES, load_skill, skill_dirs, skill_name_problem
from .skill_catalog import Skill, SkillCatalog
from .skill_tool import SkillTool
from .summary import is_summary, summary_message

__all__ = [
    "ALLOW",
    "BUDGET_STOPS",
    "EARLY_STOPS",
    "MAIN_SYSTEM_PROMPT",
    "SKILL_MAX_BYTES",
    "AgentEngine",
    "Allow",
    "ApprovalChannel",
    "Approved",
    "Ask",
    "BackgroundApprovals",
    "BudgetScope",
    "CallEstimate",
    "CheckpointHook",
    "CompactionPolicy",
    "ContextKeeper",
    "ContextMeter",
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
    "MemorySession",
    "OffloadHook",
    "POLICIES",
    "ParentContext",
    "Place",
    "PermissionHook",
    "PermissionRules",
    "PERMISSION_MODES",
    "PermissionMode",
    "Policy",
    "PromptBuilder",
    "PromptTally",
    "RedactSecretsHook",
    "RunContext",
    "Rule",
    "RunResult",
    "RunTool",
    "Skill",
    "SkillCatalog",
    "SkillTool",
    "ToolSlots",
    "UsageAccount",
    "denial_line",
    "denial_result",
    "is_summary",
    "load_skill",
    "load_transcript",
    "parse_rule",
    "person_reason",
    "remembering",
    "require_positive",
    "session_rule",
    "skill_dirs",
    "skill_name_problem",
    "stop_label",
    "summary_message",
]
