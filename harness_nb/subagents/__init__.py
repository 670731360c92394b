"""Subagents: definitions and agent files, the registry, tool narrowing, the runner, the
``task`` delegation tool, the task tracker and the coordination tools.

May import every layer below: ``core`` to ``permissions`` (and ``mcp``, for an agent's
own servers); never ``team``, the harness or the notebook."""

from ..engine import BackgroundApprovals
from .coordination import MessageRouter, Route, TrackerRoute, coordination_tools
from .definition import SubAgentDefinition
from .handle import SubagentHandle
from .loader import LoadResult, load_agent_dir, load_agent_file, parse_agent_text
from .model import ModelResolver, describe_model, resolve_model
from .narrowing import resolve_tools
from .registry import BUILTIN_AGENTS, AgentOverride, AgentRegistry
from .render import background_completed, finished_task, running_task, task_result
from .runner import BACKGROUND_DENIED, Child, SubagentRunner, progress_line
from .task_tool import TaskParams, TaskTool
from .tracker import TaskEntry, TaskStatus, TaskTracker

__all__ = [
    "BACKGROUND_DENIED",
    "BUILTIN_AGENTS",
    "AgentOverride",
    "AgentRegistry",
    "BackgroundApprovals",
    "Child",
    "LoadResult",
    "MessageRouter",
    "ModelResolver",
    "Route",
    "SubAgentDefinition",
    "SubagentHandle",
    "SubagentRunner",
    "TaskEntry",
    "TaskParams",
    "TaskStatus",
    "TaskTool",
    "TaskTracker",
    "TrackerRoute",
    "background_completed",
    "coordination_tools",
    "describe_model",
    "finished_task",
    "load_agent_dir",
    "load_agent_file",
    "parse_agent_text",
    "progress_line",
    "resolve_model",
    "resolve_tools",
    "running_task",
    "task_result",
]
