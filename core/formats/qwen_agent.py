"""Qwen Code's connector (`QWEN_CODE`, registered in `core.formats.registry`).

* directory, listing and readers: `core.formats.qwen_dirs` (``~/.qwen``;
  ``projects/<enc>/chats/<sessionId>.jsonl``, its sub-agents in
  ``projects/<enc>/subagents/<sessionId>/``, an older version's ``tmp/<hash>/chats/``);
* search: `QWEN_SEARCH`: a row per ``user``/``assistant``/``tool_result`` record of a
  0.24 session or sub-agent, named by its ``uuid`` (a later fragment of a uuid is found
  under the first: the entry its message is shown in), appended lines read as they
  come; an older version's files (``tmp/``: where a file is decides, as for the
  mount, not its first line) as Gemini's are (`core.formats.gemini_search`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Final

from core.formats.agent_format import AgentFormat
from core.formats.gemini_messages import ROLES, record_kind
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
    is_older_chat,
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
    text_row,
)
from core.search_index.rows import (
    MODE_APPENDABLE,
    MODE_LEGACY,
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


def _whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_APPENDABLE, _rows(lines)


def _whole_older(lines: Lines) -> tuple[int, Iterator[Row]]:
    """An older version's chat of records, named by line number as Gemini's are."""
    return MODE_LEGACY, chat_rows(lines)


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


_CURRENT: Final = FileFormat("qwen", _file_keys, _whole, _rows, _line_text, _parent_key)
#: an older version's chats (``tmp/<hash>/chats/``), read as Gemini's are
_OLDER: Final = by_chat_name(dataclasses.replace(_CURRENT, whole_file_rows=_whole_older))


def _by_dir(key: bytes) -> FileFormat:
    """The format of the file at ``key``: where it is decides, as for the mount's
    readers (`core.formats.qwen_dirs.is_older_chat`), whatever its first line holds."""
    return _OLDER.of_file(key) if is_older_chat(key) else _CURRENT


QWEN_SEARCH: Final = dataclasses.replace(_CURRENT, by_name=_by_dir)

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
