"""Qwen Code's connector (`QWEN_CODE`, registered in `core.formats.registry`).

* directory, listing and readers: `core.formats.qwen_dirs` (``~/.qwen``;
  ``projects/<enc>/chats/<sessionId>.jsonl``, its sub-agents in
  ``projects/<enc>/subagents/<sessionId>/``, an older version's ``tmp/<hash>/chats/``);
* search: `QWEN_SEARCH`: a row per ``user``/``assistant``/``tool_result`` record of a
  0.24 session or sub-agent, named by its ``uuid`` (a later fragment of a uuid is found
  under the first: the entry its message is shown in), appended lines read as they
  come; an older version's files as Gemini's are (`core.formats.gemini_search`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from core.formats.agent_format import AgentFormat
from core.formats.gemini_messages import KIND_UNKNOWN, ROLES, record_kind
from core.formats.gemini_search import by_chat_name, chat_rows, message_search_text
from core.formats.qwen_dirs import (
    ARCHIVE_DIR,
    CHATS_DIR,
    LEGACY_DIR,
    PROJECTS_DIR,
    QWEN_HOME_ENV,
    QWEN_RUNTIME_ENV,
    SESSION_FILE,
    SUB_AGENT_PREFIX,
    SUBAGENTS_DIR,
    list_sessions,
    open_qwen_session,
    qwen_dir,
)
from core.search_index.formats import (
    FileFormat,
    Lines,
    capped_text,
    collect_strings,
    dir_entries,
    file_names,
    first_content_line,
    text_row,
)
from core.search_index.rows import (
    MODE_APPENDABLE,
    MODE_LEGACY,
    MODE_NOT_SESSION,
    Row,
    parse_object,
)

__all__ = ["QWEN_CODE", "QWEN_SEARCH"]

_ROLES: Final = {"user": "user", "assistant": "assistant", "tool_result": "toolResult"}


def _file_keys(root: str) -> Iterator[tuple[str, ...]]:
    """``projects/<enc>/chats/<id>.jsonl``, ``chats/archive/<id>.jsonl``,
    ``subagents/<id>/agent-*.jsonl``, and an older version's
    ``tmp/<hash>/chats/session-*.json[l]``."""
    for project in dir_entries(f"{root}/{PROJECTS_DIR}"):
        chats = f"{project.path}/{CHATS_DIR}"
        for name in file_names(chats, ""):
            if SESSION_FILE.fullmatch(name):
                yield (PROJECTS_DIR, project.name, CHATS_DIR, name)
        for name in file_names(f"{chats}/{ARCHIVE_DIR}", ""):
            if SESSION_FILE.fullmatch(name):
                yield (PROJECTS_DIR, project.name, CHATS_DIR, ARCHIVE_DIR, name)
        for session in dir_entries(f"{project.path}/{SUBAGENTS_DIR}"):
            for name in file_names(session.path, SUB_AGENT_PREFIX):
                yield (PROJECTS_DIR, project.name, SUBAGENTS_DIR, session.name, name)
    for project in dir_entries(f"{root}/{LEGACY_DIR}"):
        for suffix in (".jsonl", ".json"):
            for name in file_names(f"{project.path}/{CHATS_DIR}", "session-", suffix):
                yield (LEGACY_DIR, project.name, CHATS_DIR, name)


def _record_text(obj: dict[str, Any]) -> list[str]:
    """A record's text parts, calls (name, args) and responses."""
    message = obj.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    found: list[str] = []
    for part in parts if isinstance(parts, list) else ():
        if isinstance(part, dict) and not part.get("thought"):
            collect_strings(
                [part.get("text"), part.get("functionCall"), part.get("functionResponse")], found
            )
    return found


def _rows(lines: Lines) -> Iterator[Row]:
    for at, line in lines:
        obj = parse_object(line)
        uuid = obj.get("uuid") if obj is not None else None
        role = _ROLES.get(str(obj.get("type"))) if obj is not None else None
        if obj is not None and isinstance(uuid, str) and role is not None:
            row = text_row(uuid, role, _record_text(obj), obj, at, line)
            if row is not None:
                yield row


def _is_older(first: bytes) -> bool:
    """A file's first line is an older version's (Gemini's format): a record Gemini's
    loader knows, or the start of a pretty-printed document."""
    obj = parse_object(first)
    if obj is None:
        return first.lstrip().startswith(b"{")
    return record_kind(obj) != KIND_UNKNOWN


def _whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    head, again = first_content_line(lines)
    if head is None:
        return MODE_NOT_SESSION, iter(())  # nothing yet: read again when it grows
    if _is_older(head[1]):
        return MODE_LEGACY, chat_rows(again)
    return MODE_APPENDABLE, _rows(again)


def _line_text(obj: dict[str, Any]) -> str | None:
    if record_kind(obj) in ROLES:  # an older version's message
        return capped_text(message_search_text(obj))
    return capped_text(_record_text(obj)) if _ROLES.get(str(obj.get("type"))) else None


def _parent_key(key: bytes) -> bytes | None:
    """``projects/<enc>/subagents/<id>/agent-<a>.jsonl`` -> ``projects/<enc>/chats/<id>.jsonl``:
    who may not read a session may not read its sub-agents either."""
    parts = key.split(b"/")
    if len(parts) == 5 and parts[2] == SUBAGENTS_DIR.encode():
        return b"/".join([parts[0], parts[1], CHATS_DIR.encode(), parts[3] + b".jsonl"])
    return None


QWEN_SEARCH: Final = by_chat_name(
    FileFormat("qwen", _file_keys, _whole, _rows, _line_text, _parent_key)
)

QWEN_CODE: Final = AgentFormat(
    name="qwen",
    title="Qwen Code",
    env_var=QWEN_HOME_ENV,
    default_dir_text=f"${QWEN_RUNTIME_ENV}, else ${QWEN_HOME_ENV}, else ~/.qwen",
    default_dir=qwen_dir,
    list_sessions=list_sessions,
    open_session=open_qwen_session,
    search=QWEN_SEARCH,
)
