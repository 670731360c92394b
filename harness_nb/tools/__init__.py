"""Tool base, registry and the built-in tools."""

from .base import FunctionTool, Tool, ToolContext, ToolOutcome, ToolRegistry, invoke, tool

__all__ = ["FunctionTool", "Tool", "ToolContext", "ToolOutcome", "ToolRegistry", "invoke", "tool"]
