"""Cursor agent CLI's connector (`CURSOR_AGENT`, registered in `core.formats.registry`).

* directory: ``~/.cursor`` (`core.formats.cursor_dirs`);
* sessions: each chat's ``chats/<md5>/<id>/store.db`` and each
  ``projects/<dir>/agent-transcripts/<id>.jsonl`` (`core.formats.cursor_dirs`);
* readers: `core.formats.cursor.CursorChatSession` (a ``store.db``),
  `core.formats.cursor.CursorTranscriptSession` (a transcript);
* search (`CURSOR_SEARCH`): the transcripts, a row per message line named as
  ``entries/`` names it (``NNNNNN-<role>``, by line number: a changed transcript is
  read whole again); each chat of a ``store.db`` through its reader, the same rows,
  read again when its root blob changes (`core.search_index.row_sessions`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from core.formats import cursor_dirs
from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.base import SessionSource
from core.formats.cursor import CursorChatSession, CursorTranscriptSession, read_chat_meta
from core.formats.row_search import source_rows
from core.search_index.formats import (
    FileFormat,
    Lines,
    capped_text,
    collect_strings,
    numbered_lines,
    text_row,
)
from core.search_index.row_sessions import RowSessions, version_of
from core.search_index.rows import MODE_LEGACY, Row, parse_object
from core.session_stat import row_session_path, split_row_session_path

__all__ = ["CURSOR_AGENT", "CURSOR_SEARCH", "list_cursor_sessions", "open_cursor_session"]


def list_cursor_sessions(root: Path) -> Iterator[ListedSession]:
    """Each chat's path is ``<store.db>/<id>`` (`core.session_stat`): stat'ed with its
    WAL, where the CLI's writes land until a checkpoint, so a live chat shows its new
    turns; a transcript's path is its file."""
    for found in cursor_dirs.list_sessions(root):
        path = Path(row_session_path(found.path, found.id)) if found.is_store else found.path
        yield ListedSession(found.project, found.id, path, {"id": found.id})


def open_cursor_session(path: Path) -> SessionSource:
    """A chat (``<store.db>/<id>``, or the ``store.db`` itself) or a transcript."""
    in_store = split_row_session_path(path)
    if in_store is not None:
        return CursorChatSession(in_store[0])
    if path.name == cursor_dirs.STORE_FILE:
        return CursorChatSession(path)
    return CursorTranscriptSession(path)


def _keys(root: str) -> Iterator[tuple[str, ...]]:
    """The sessions the listing shows: each chat (``chats/<md5>/<id>/store.db/<id>``)
    and each transcript."""
    for found in list_cursor_sessions(Path(root)):
        yield found.path.relative_to(root).parts


def _text(obj: dict[str, Any]) -> tuple[str, list[str]] | None:
    role = obj.get("role")
    if not isinstance(role, str):
        return None
    inner = obj.get("message")
    parts: list[str] = []
    collect_strings(inner.get("content") if isinstance(inner, dict) else obj.get("content"), parts)
    return role, parts


def _numbered_rows(lines: Lines) -> Iterator[Row]:
    """Rows named as ``entries/`` names the lines: by line number from the start (a
    blank line, skipped by the reader, still counts)."""
    for number, at, line in numbered_lines(lines):
        obj = parse_object(line)
        found = _text(obj) if obj is not None else None
        if obj is not None and found is not None:
            row = text_row(f"{number:06d}-{found[0]}", found[0], found[1], obj, at, line)
            if row is not None:
                yield row


def _whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_LEGACY, _numbered_rows(lines)


def _appended(lines: Lines) -> Iterator[Row]:
    raise AssertionError("a Cursor transcript is always read whole (MODE_LEGACY)")


def _line_text(obj: dict[str, Any]) -> str | None:
    found = _text(obj)
    return capped_text(found[1]) if found is not None else None


def _chat_rows(path: str) -> list[Row]:
    return source_rows(open_cursor_session(Path(path)), lambda chat, i: _text(chat.entry(i)))


def _chat_version(path: str) -> int:
    """The chat's root blob: a turn stores a new one listing every message."""
    return version_of(read_chat_meta(os.path.dirname(path)).get("latestRootBlobId"))


CURSOR_SEARCH: Final = FileFormat(
    "cursor",
    _keys,
    _whole,
    _appended,
    _line_text,
    lambda key: None,
    row_sessions=RowSessions(_chat_rows, _chat_version),
)

CURSOR_AGENT: Final = AgentFormat(
    name="cursor",
    title="Cursor's agent CLI",
    env_var="",
    default_dir_text="~/.cursor",
    default_dir=cursor_dirs.cursor_dir,
    list_sessions=list_cursor_sessions,
    open_session=open_cursor_session,
    search=CURSOR_SEARCH,
)
