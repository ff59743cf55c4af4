"""Claude Code's message content (Anthropic Messages blocks) in the xcsh message shape
``transcript.md`` renders (`core.formats.base` module docstring).

Pure functions over one line's ``message.content``: no session, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.formats.base import image_marker

__all__ = ["agent_blocks", "content_blocks", "first_text", "tool_result_message"]

Block = dict[str, Any]


def content_blocks(content: Any) -> list[Any]:
    """A message's ``content`` as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _image(block: Block) -> Block:
    source = block.get("source")
    if isinstance(source, dict):
        return image_marker(source.get("media_type"), source.get("data") or source.get("url"))
    return image_marker(None, None)


def _agent_block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.get("thinking", "")}
    if kind == "redacted_thinking":
        return {"type": "thinking", "thinking": "[redacted thinking]"}
    if kind == "tool_use":
        return {
            "type": "toolCall",
            "id": block.get("id", ""),
            "name": block.get("name", "?"),
            "arguments": block.get("input", {}),
        }
    if kind == "image":
        return _image(block)
    return block  # unknown: the renderer shows it as JSON


def agent_blocks(blocks: Iterable[Any]) -> list[Any]:
    """Anthropic blocks as xcsh blocks: ``tool_use`` -> ``toolCall``, images -> their
    marker, thinking kept (redacted thinking says so), anything else as it is."""
    return [_agent_block(b) for b in blocks]


def tool_result_message(block: Block, tool_name: str) -> dict[str, Any]:
    """A ``tool_result`` block as an xcsh ``toolResult`` message."""
    return {
        "role": "toolResult",
        "toolCallId": block.get("tool_use_id", ""),
        "toolName": tool_name,
        "isError": block.get("is_error") is True,
        "content": agent_blocks(content_blocks(block.get("content"))),
    }


def first_text(content: Any) -> str:
    """The first text, thinking or tool name of a message's content ('' when none)."""
    if isinstance(content, str):
        return content
    for block in content_blocks(content):
        if isinstance(block, dict):
            for key in ("text", "thinking", "name"):
                value = block.get(key)
                if isinstance(value, str) and value:
                    return value
            if block.get("type") == "tool_result":
                return first_text(block.get("content"))
    return ""
