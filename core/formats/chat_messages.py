"""Messages in the two shapes the newer agents' readers produce, built one way.

* ``context.json`` of GitHub Copilot CLI, opencode and Cursor sessions is what the
  agent sends an OpenAI chat-completions model: ``{"role", "content"}`` messages, an
  assistant's calls as ``tool_calls`` (``{"id", "type": "function", "function": {"name",
  "arguments": <JSON text>}}``), each result a ``{"role": "tool", "tool_call_id",
  "content"}`` message (`chat_assistant`, `chat_tool_result`);
* ``transcript.md`` reads the xcsh ``AgentMessage`` shape (`core.formats.base`):
  ``toolCall`` blocks and ``toolResult`` messages (`tool_call_block`,
  `tool_result_message`).

Pure functions: no session, no I/O.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

__all__ = [
    "chat_assistant",
    "chat_tool_call",
    "chat_tool_result",
    "text_of",
    "tool_call_block",
    "tool_result_message",
]

Message = dict[str, Any]


def text_of(value: Any) -> str:
    """A string as it is; the text parts of a list of parts joined; else ''."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(part.get("text", "")) for part in value if isinstance(part, dict))
    return ""


def _arguments_text(arguments: Any) -> str:
    """Arguments as the JSON text a chat-completions call carries (a string stays)."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, separators=(",", ":"))


def chat_tool_call(call_id: Any, name: Any, arguments: Any) -> Message:
    return {
        "id": str(call_id or ""),
        "type": "function",
        "function": {"name": str(name or "?"), "arguments": _arguments_text(arguments)},
    }


def chat_assistant(text: str, calls: list[Message], no_text: str | None = None) -> Message:
    """An assistant message: its text (``no_text`` when it only calls tools: Copilot
    sends ``null``, opencode ``""``) and its calls."""
    message: Message = {"role": "assistant", "content": text if text or not calls else no_text}
    if calls:
        message["tool_calls"] = calls
    return message


def chat_tool_result(call_id: Any, output: Any) -> Message:
    return {"role": "tool", "tool_call_id": str(call_id or ""), "content": text_of(output)}


def tool_call_block(call_id: Any, name: Any, arguments: Any) -> Message:
    """An xcsh ``toolCall`` block (arguments as an object when they are JSON text)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return {
        "type": "toolCall",
        "id": str(call_id or ""),
        "name": str(name or "?"),
        "arguments": arguments if arguments is not None else {},
    }


def tool_result_message(call_id: Any, name: Any, output: Any, is_error: bool) -> Message:
    """An xcsh ``toolResult`` message with one text block."""
    return {
        "role": "toolResult",
        "toolCallId": str(call_id or ""),
        "toolName": str(name or "?"),
        "isError": is_error,
        "content": [{"type": "text", "text": text_of(output)}],
    }
