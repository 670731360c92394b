"""``McpTool``: one tool of an MCP server, as an ordinary harness_nb ``Tool``.

Its name is ``mcp__<server>__<tool>`` (Claude Code's form, which permission rules and agent
files use: ``mcp__github__create_issue``, ``mcp__github__*``); its description and JSON
schema are the server's. It goes through the same hooks as every tool: read-only when the
server declares ``readOnlyHint: true`` (so the permission policy lets it run), otherwise it
asks under the default policy. The server checks the arguments against its schema; its
answer becomes the tool result:

- text content → the text; an embedded text resource → its text, under its URI;
- images (PNG, JPEG, GIF, WebP) → image parts of the result, which a model that takes
  images sees (and any other reads as a placeholder); the text says where each one was;
- audio, and images of another type or not base64 → a line naming the type and size
  (``[audio/wav, 12,345 bytes]``);
- other embedded resources and resource links → a line naming them;
- ``isError`` → a tool error (``error: …``) the model reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..core import ToolError, ToolSpec
from ..core.media import IMAGE_TYPES, ImagePart
from ..tools import Tool, ToolContext, ToolOutput
from .connection import RemoteTool, ServerConnection

MAX_NAME = 64  # OpenAI's limit on a function name (Anthropic's is longer)
MAX_DESCRIPTION = 4000
MAX_SCHEMA_CHARS = 32_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpArguments(BaseModel):
    """Any JSON object: the server's own schema is the one that checks the arguments."""

    model_config = ConfigDict(extra="allow")


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``: characters a model API refuses in a tool name become ``_``
    and the whole is cut to 64 characters, as Claude Code does."""
    return f"mcp__{server}__{_UNSAFE.sub('_', tool)}"[:MAX_NAME]


class McpTool(Tool):
    """The tool ``remote`` of the server ``connection`` (see the module doc)."""

    Params = McpArguments

    def __init__(self, connection: ServerConnection, remote: RemoteTool, *, name: str | None = None) -> None:
        self.connection = connection
        self.remote = remote
        self.name = name or tool_name(connection.name, remote.name)
        self.description = f"[MCP server {connection.name}] {remote.description}"[:MAX_DESCRIPTION]
        self.read_only = remote.read_only

    def spec(self) -> ToolSpec:
        """The server's description and JSON schema (a schema too large for a prompt is
        replaced by "any object": the server still checks what it gets)."""
        if self._spec is None:
            schema = self.remote.schema
            if schema.get("type") != "object" or len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
                schema = {"type": "object", "additionalProperties": True}
            self._spec = ToolSpec(name=self.name, description=self.description, parameters=schema)
        return self._spec

    async def run(self, params: Any, ctx: ToolContext) -> str | ToolOutput:
        result = await self.connection.call(self.remote.name, params.model_dump())
        text = render_result(result)
        if result.is_error:
            raise ToolError(f"{self.name} failed: {text}")
        images = result_images(result)
        return ToolOutput(text, images=images) if images else text

    def __repr__(self) -> str:
        return f"<MCP tool {self.name}>"


def render_result(result: Any) -> str:
    """A ``CallToolResult`` as the text the model reads (see the module doc)."""
    parts = [_render(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts) or "(no output)"


def result_images(result: Any) -> tuple[ImagePart, ...]:
    """The images of a ``CallToolResult`` a model can be shown, in order (the engine bounds
    how many and how large)."""
    return tuple(image for block in result.content if (image := _image(block)) is not None)


def _image(block: Any) -> ImagePart | None:
    if getattr(block, "type", "") != "image" or block.mime_type not in IMAGE_TYPES:
        return None
    try:
        return ImagePart.from_base64(block.data, block.mime_type)
    except ValueError:
        return None


def _render(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if (image := _image(block)) is not None:
        return f"[{image.describe()}: attached]"
    if kind in ("image", "audio"):
        return f"[{block.mime_type}, {_decoded_size(block.data):,} bytes]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        blob = getattr(resource, "blob", "")
        return f"[resource {resource.uri}, {resource.mime_type or 'binary'}, {_decoded_size(blob):,} bytes]"
    if kind == "resource_link":
        return f"[resource link {block.uri}{f' ({block.name})' if getattr(block, 'name', None) else ''}]"
    return f"[{kind or 'unknown'} content]"


def _decoded_size(data: str) -> int:
    """The size of base64 ``data`` once decoded (counted, not decoded)."""
    text = data.strip()
    return max(len(text) * 3 // 4 - text[-2:].count("="), 0)
