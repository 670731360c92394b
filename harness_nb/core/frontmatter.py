"""YAML frontmatter read as untrusted data: bounded in size, depth and expansion.

Agent files and skill files (``SKILL.md``) arrive with cloned repositories and can be
written by the model, so their frontmatter is parsed with limits that hold whatever the
text is:

- at most ``FRONTMATTER_MAX_BYTES`` of it (agent frontmatter is a few keys; the prompt
  itself goes in the body below the closing ``---``, which is not parsed);
- no aliases (``*name``): they are refused while the document is composed, before
  anything is expanded, so a 538-byte "billion laughs" costs a microsecond, not 15 s of
  CPU and a MemoryError. Anchors alone (``&name``) are harmless and allowed;
- nesting at most ``YAML_MAX_DEPTH`` levels deep, checked while composing, so 40 KB of
  ``[[[[`` is refused instead of raising RecursionError.

Only PyYAML's safe constructors are used (no Python objects). ``FrontmatterError``
carries a message that names the problem and the fix.
"""

from __future__ import annotations

import functools
from typing import Any

from .error import FrontmatterError

__all__ = [
    "FRONTMATTER_MAX_BYTES",
    "YAML_MAX_DEPTH",
    "FrontmatterError",
    "load_frontmatter",
    "split_frontmatter",
]

FRONTMATTER_MAX_BYTES = 64 * 1024
"""Largest frontmatter parsed (the body, the agent's prompt, has its own larger cap)."""
YAML_MAX_DEPTH = 20
"""Deepest nesting of lists and mappings accepted in frontmatter."""


@functools.cache
def _bounded_loader() -> Any:
    """PyYAML's safe loader, refusing aliases and deep nesting as it composes nodes (made
    at the first use: PyYAML is imported only when some frontmatter is read)."""
    import yaml

    class _BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str, first_line: int) -> None:
            super().__init__(stream)
            self._depth = 0
            self._first_line = first_line  # the file's line number of the stream's first line

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise FrontmatterError(
                    f"YAML alias *{event.anchor} at line {event.start_mark.line + self._first_line}: aliases are "
                    "not allowed in agent files (they can expand a few bytes into gigabytes); "
                    "write the value out in full"
                )
            self._depth += 1
            try:
                if self._depth > YAML_MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise FrontmatterError(
                        f"YAML nested more than {YAML_MAX_DEPTH} levels deep at line "
                        f"{mark.line + self._first_line}; agent frontmatter is a few flat keys "
                        "(name, description, tools, ...)"
                    )
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return _BoundedLoader


def load_frontmatter(text: str, *, first_line: int = 1) -> Any:
    """The YAML value of ``text`` (``None`` for an empty document). Raises
    ``FrontmatterError`` for text over a limit and ``yaml.YAMLError`` for invalid YAML.
    ``first_line``: the line of the file ``text`` starts on, for the refusals' line numbers
    (``yaml.YAMLError`` marks count from the text's own first line)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > FRONTMATTER_MAX_BYTES:
        raise FrontmatterError(
            f"frontmatter is {size:,} bytes; it is limited to {FRONTMATTER_MAX_BYTES // 1024} "
            "KiB — put long text (the agent's prompt) in the body, below the closing '---'"
        )
    loader = _bounded_loader()(text, first_line)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """``(frontmatter, body)`` of a Markdown file that opens with a ``---`` line (blank
    lines and a BOM before it allowed) and closes it with another; ``(None, text)`` when it
    has none or never closes it. Nothing is parsed: this is also how a preloaded skill
    loses its frontmatter without its YAML being read."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start == len(lines) or lines[start].rstrip() != "---":
        return None, text
    for end in range(start + 1, len(lines)):
        if lines[end].rstrip() == "---":
            return "\n".join(lines[start + 1 : end]), "\n".join(lines[end + 1 :])
    return None, text
