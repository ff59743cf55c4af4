"""What an xcsh session entry is, in a few words: its kind (a message's role, else its
type) and its text, summary or setting. ``tree.txt`` shows both for every entry; the
xcsh reader (`core.formats.xcsh`) answers ``entry_kind``/``entry_text`` with them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["describe_entry", "kind_of", "one_line"]


def _first_block_text(blocks: list[Any]) -> str | None:
    for block in blocks:
        if isinstance(block, dict):
            text = block.get("text") or block.get("thinking") or block.get("name")
            if isinstance(text, str) and text:
                return text
    return None


#: Entry types whose text is one field (omp 18's included: spec section 14).
_ONE_FIELD = {
    "mode_change": "mode",
    "title_change": "title",
    "session_init": "task",
    "credential_pin": "provider",
}


def describe_entry(entry: Mapping[str, Any]) -> str:
    """An entry's text, summary or setting, as stored ('' when it has none)."""
    kind = entry.get("type")
    value: Any = None
    if kind == "message":
        message = entry.get("message")
        if isinstance(message, dict):
            value = message.get("content")
            if message.get("role") in ("bashExecution", "pythonExecution"):
                value = message.get("command") or message.get("code")
            if isinstance(value, list):
                value = _first_block_text(value)
    elif kind in ("compaction", "branch_summary"):
        value = entry.get("shortSummary") or entry.get("summary")
    elif kind == "custom_message":
        content = entry.get("content")
        value = content if isinstance(content, str) else entry.get("customType")
    elif kind == "thinking_level_change":
        value = entry.get("thinkingLevel")
    elif kind == "model_change":
        value = entry.get("model") or entry.get("modelId")
    elif kind == "label":
        value = f"{entry.get('targetId')} = {entry.get('label', '')}"
    elif kind == "custom":
        value = entry.get("customType")
    elif kind in _ONE_FIELD:
        value = entry.get(_ONE_FIELD[kind])
    elif kind == "model_usage":  # omp 18: a side call (title, summary) and its model
        value = f"{entry.get('purpose')} {entry.get('provider')}/{entry.get('model')}"
    elif kind == "ttsr_injection":
        rules = entry.get("injectedRules")
        value = ", ".join(map(str, rules)) if isinstance(rules, list) else rules
    if not isinstance(value, str):
        value = "" if value is None else str(value)
    return value


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs made one space), at most ``limit`` chars."""
    return " ".join(text.split())[:limit]


def kind_of(entry: Mapping[str, Any]) -> str:
    """``<type or role>``: messages show their role, everything else its type."""
    message = entry.get("message")
    if entry.get("type") == "message" and isinstance(message, dict):
        return str(message.get("role", "message"))
    return str(entry.get("type", "?"))
