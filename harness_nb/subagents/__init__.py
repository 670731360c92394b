"""Subagents: definitions and agent files, the registry, tool narrowing, the runner, the
``task`` delegation tool, the task tracker and the coordination tools."""

from .coordination import MessageRouter, Route, TrackerRoute, coordination_tools
from .definition import SubAgentDefinition
from .handle import SubagentHandle
from .loader import LoadResult, load_agent_dir, load_agent_file, parse_agent_text
from .permission import COORDINATION_TOOLS, resolve_tools
from .registry import BUILTIN_AGENTS, AgentOverride, AgentRegistry
from .runner import BACKGROUND_DENIED, BackgroundApprovals, SubagentRunner, progress_line
from .task_tool import SubagentFailed, TaskParams, TaskTool
from .tracker import TaskEntry, TaskStatus, TaskTracker

__all__ = [
    "BACKGROUND_DENIED",
    "COORDINATION_TOOLS",
    "BUILTIN_AGENTS",
    "AgentOverride",
    "AgentRegistry",
    "BackgroundApprovals",
    "LoadResult",
    "MessageRouter",
    "Route",
    "SubAgentDefinition",
    "SubagentFailed",
    "SubagentHandle",
    "SubagentRunner",
    "TaskEntry",
    "TaskParams",
    "TaskStatus",
    "TaskTool",
    "TaskTracker",
    "TrackerRoute",
    "coordination_tools",
    "load_agent_dir",
    "load_agent_file",
    "parse_agent_text",
    "progress_line",
    "resolve_tools",
]
