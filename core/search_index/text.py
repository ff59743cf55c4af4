"""What text an entry is indexed under (`entry_search_text`).

User and assistant messages (text, **thinking included**: "why did it decide that" is
a question people search for, and tool calls as name + argument values), tool results,
bash/python executions (command/code + output), custom messages, compaction and branch
summaries, labels, and a sub-agent's ``session_init`` task. Image data and blob refs are
not text and are skipped. Capping the text at `MAX_INDEXED_CHARS` keeps a 500 kB tool
output (a log, a generated file) from dominating the index; what lies beyond the cap is
still found by ``grep`` over ``transcripts/``.
"""

from __future__ import annotations

from typing import Any, Final

from core.blobs import BLOB_REF_PREFIX

MAX_INDEXED_CHARS: Final = 64 * 1024


def _strings(value: Any, out: list[str], depth: int = 0) -> None:
    """Every string leaf of a JSON value (tool call arguments), blob refs excluded."""
    if isinstance(value, str):
        if value and not value.startswith(BLOB_REF_PREFIX):
            out.append(value)
    elif depth < 32:
        if isinstance(value, dict):
            for item in value.values():
                _strings(item, out, depth + 1)
        elif isinstance(value, list):
            for item in value:
                _strings(item, out, depth + 1)


def _content_strings(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        if not content.startswith(BLOB_REF_PREFIX):
            out.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, str):
            out.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "toolCall":
                name = block.get("name")
                if isinstance(name, str):
                    out.append(name)
                _strings(block.get("arguments"), out)
                continue
            text = block.get("thinking") if kind == "thinking" else block.get("text")
            if isinstance(text, str) and not text.startswith(BLOB_REF_PREFIX):
                out.append(text)


def _message_strings(message: dict[str, Any], out: list[str]) -> None:
    if message.get("role") in ("bashExecution", "pythonExecution"):
        for key in ("command", "code", "output"):
            value = message.get(key)
            if isinstance(value, str):
                out.append(value)
        return
    _content_strings(message.get("content"), out)


def _entry_strings(entry: dict[str, Any], out: list[str]) -> str | None:
    """Append the entry's searchable strings to ``out``; return its role, or None when
    the entry is not a kind that is searched."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return None
        _message_strings(message, out)
        role = message.get("role")
        return role if isinstance(role, str) else "message"
    if kind in ("compaction", "branch_summary"):
        for key in ("summary", "shortSummary"):
            value = entry.get(key)
            if isinstance(value, str):
                out.append(value)
    elif kind == "custom_message":
        _content_strings(entry.get("content"), out)
    elif kind == "label":
        value = entry.get("label")
        if isinstance(value, str):
            out.append(value)
    elif kind == "session_init":
        value = entry.get("task")
        if isinstance(value, str):
            out.append(value)
    else:
        return None
    return str(kind)


def entry_search_text(entry: dict[str, Any]) -> tuple[str, str] | None:
    """``(role, text)`` an entry is indexed under, or None when it has no text.

    ``role`` is the message role for ``message`` entries, else the entry type
    (``compaction``, ``branch_summary``, ``custom_message``, ``label``,
    ``session_init``). The text is capped at `MAX_INDEXED_CHARS`.
    """
    parts: list[str] = []
    role = _entry_strings(entry, parts)
    if role is None or not parts:
        return None
    text = "\n".join(parts)
    if len(text) > MAX_INDEXED_CHARS:
        text = text[:MAX_INDEXED_CHARS]
    return (role, text) if text and not text.isspace() else None


def rename_hook_message(entry: dict[str, Any]) -> None:
    """The v2 -> v3 step for one entry read on its own (an appended line of a v2 file,
    a line read back for a snippet): ``hookMessage`` is now ``custom``."""
    message = entry.get("message")
    if isinstance(message, dict) and message.get("role") == "hookMessage":
        message["role"] = "custom"


def clean_text(text: str) -> str:
    """Lone surrogates (from odd JSON escapes) cannot be bound as SQLite text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text
