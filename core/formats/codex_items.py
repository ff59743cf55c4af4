"""Codex ``response_item`` payloads in the xcsh message shape ``transcript.md`` renders
(`core.formats.base` module docstring), and the few facts about them the context
needs (which user messages are injected context, not turns).

Pure functions over payload dicts: no session, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from core.formats.base import image_marker

__all__ = [
    "INJECTED_PREFIXES",
    "agent_message",
    "call_id_of",
    "is_injected",
    "item_text",
    "output_message",
]

#: user messages Codex writes itself at the start of a session or turn (the
#: environment, the user's and the project's instructions) or when a sub-agent it
#: spawned is done: context, not turns
INJECTED_PREFIXES: Final = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
    "<subagent_notification>",
)
#: response items that call a tool, and the tool name each shows
_CALLS: Final = {
    "function_call": None,
    "custom_tool_call": None,
    "local_shell_call": "local_shell",
    "web_search_call": "web_search",
}
_OUTPUTS: Final = frozenset({"function_call_output", "custom_tool_call_output"})


def _parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return list(content) if isinstance(content, list) else []


def item_text(item: Mapping[str, Any]) -> str:
    """All text parts of a message item joined ('' when none)."""
    texts = []
    for part in _parts(item.get("content")):
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts)


def is_injected(item: Mapping[str, Any]) -> bool:
    """A user message Codex injected (environment, instructions), not a user turn."""
    if item.get("type") != "message" or item.get("role") != "user":
        return False
    return item_text(item).lstrip().startswith(INJECTED_PREFIXES)


def _folded(item: Mapping[str, Any]) -> str:
    """Injected context (or a developer/system message) as one line."""
    text = item_text(item).strip()
    first = text.split("\n", 1)[0].strip()
    return f"[{first} … {len(text)} characters]" if first != text else f"[{text}]"


def _blocks(parts: Iterable[Any]) -> list[Any]:
    blocks: list[Any] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind in ("input_image", "image"):
            blocks.append(image_marker(None, part.get("image_url")))
        else:
            blocks.append(part)
    return blocks


def _arguments(value: Any) -> Any:
    """A call's arguments: its JSON string parsed (kept as text when it is not JSON)."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def call_id_of(item: Mapping[str, Any]) -> str | None:
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        call_id = item.get("id")
    return call_id if isinstance(call_id, str) else None


def _call(item: Mapping[str, Any], kind: str) -> dict[str, Any]:
    name = _CALLS[kind] or item.get("name")
    if kind == "function_call":
        arguments = _arguments(item.get("arguments"))
    elif kind == "custom_tool_call":
        arguments = item.get("input")
    else:
        arguments = item.get("action")
    return {
        "type": "toolCall",
        "id": call_id_of(item) or "",
        "name": name if isinstance(name, str) else "?",
        "arguments": arguments if arguments is not None else {},
    }


def agent_message(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """A response item as an xcsh message (``None``: nothing to show -- encrypted
    reasoning without a summary, a compaction, a kind not known)."""
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str) or not role:
            return None  # not a message anyone said: shown in entries only
        if role in ("developer", "system") or is_injected(item):
            return {"role": role, "content": [{"type": "text", "text": _folded(item)}]}
        return {"role": role, "content": _blocks(_parts(item.get("content")))}
    if kind == "reasoning":
        summary = item.get("summary")
        texts = [
            part["text"]
            for part in (summary if isinstance(summary, list) else [])
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        if not texts:
            return None
        return {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "\n\n".join(texts)}],
        }
    if isinstance(kind, str) and kind in _CALLS:
        return {"role": "assistant", "content": [_call(item, kind)]}
    return None


def _output_blocks(output: Any) -> tuple[list[Any], bool]:
    """An output's content blocks and whether it says it failed."""
    if isinstance(output, str):
        return [{"type": "text", "text": output}], False
    if isinstance(output, list):
        return _blocks(output), False
    if isinstance(output, dict):
        blocks, _ = _output_blocks(output.get("content"))
        return blocks, output.get("success") is False
    return [], False


def output_message(item: Mapping[str, Any], tool_name: str) -> dict[str, Any] | None:
    """A call's output item as an xcsh ``toolResult`` (``None``: not an output)."""
    if item.get("type") not in _OUTPUTS:
        return None
    content, failed = _output_blocks(item.get("output"))
    return {
        "role": "toolResult",
        "toolCallId": call_id_of(item) or "",
        "toolName": tool_name,
        "isError": failed,
        "content": content,
    }
