"""Gemini CLI's connector (`GEMINI_CLI`, registered in `core.formats.registry`).

* directory: ``$GEMINI_CLI_HOME/.gemini`` or ``~/.gemini`` (`core.formats.gemini_dirs`);
* sessions: ``tmp/<project>/chats/session-*.jsonl`` (or an older ``.json``) is a
  session of project ``<project>`` (the dir's name: the short name ``projects.json``
  gives the cwd, or an older version's hash); its sub-agents' chats
  ``chats/<session id>/<id>.jsonl`` are ``subagents/<id>/``;
* reader: `core.formats.gemini` (`open_gemini_session`);
* search: `GEMINI_SEARCH`: a row per ``user``/``gemini`` message record of a ``.jsonl``
  (its text, thoughts, tool calls and results), named as ``entries/`` names it
  (``NNNNNN-<kind>``, by line number: a changed file is read whole again). An older
  ``.json`` document has no lines to point a hit at: it is shown, not searched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.gemini import open_gemini_session
from core.formats.gemini_dirs import (
    CHATS_DIR,
    GEMINI_HOME_ENV,
    TMP_DIR,
    gemini_dir,
    list_gemini_sessions,
)
from core.formats.gemini_messages import ROLES, message_text, record_kind
from core.search_index.formats import (
    FileFormat,
    Lines,
    capped_text,
    collect_strings,
    dir_entries,
    file_names,
    numbered_lines,
    text_row,
)
from core.search_index.rows import MODE_LEGACY, Row, parse_object

__all__ = ["GEMINI_CLI", "GEMINI_SEARCH", "list_sessions"]


def list_sessions(root: Path) -> Iterator[ListedSession]:
    for project, stem, path, session_id in list_gemini_sessions(root):
        yield ListedSession(project, stem, path, {"id": session_id or stem.rpartition("/")[2]})


def _file_keys(root: str) -> Iterator[tuple[str, ...]]:
    """``tmp/<project>/chats/session-*.jsonl`` and ``chats/<session id>/*.jsonl``."""
    for project in dir_entries(f"{root}/{TMP_DIR}"):
        chats = f"{project.path}/{CHATS_DIR}"
        for name in file_names(chats, "session-"):
            yield (TMP_DIR, project.name, CHATS_DIR, name)
        for parent in dir_entries(chats):
            for name in file_names(parent.path, ""):
                yield (TMP_DIR, project.name, CHATS_DIR, parent.name, name)


def _message_text(obj: dict[str, Any]) -> list[str]:
    """What a message record says: its text parts, thoughts, tool calls (name, args)
    and results, and a user record's function responses."""
    parts: list[str] = []
    text = message_text(obj.get("content"))
    if text:
        parts.append(text)
    content = obj.get("content")
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            collect_strings(part.get("functionCall"), parts)
            collect_strings(part.get("functionResponse"), parts)
    thoughts = obj.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else ():
        if isinstance(thought, dict):
            collect_strings([thought.get("subject"), thought.get("description")], parts)
    calls = obj.get("toolCalls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict):
            collect_strings([call.get("name"), call.get("args"), call.get("result")], parts)
    return parts


def _rows(lines: Lines) -> Iterator[Row]:
    for number, at, line in numbered_lines(lines):
        obj = parse_object(line)
        kind = record_kind(obj) if obj is not None else None
        if obj is not None and kind in ROLES:
            row = text_row(f"{number:06d}-{kind}", ROLES[kind], _message_text(obj), obj, at, line)
            if row is not None:
                yield row


def _whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_LEGACY, _rows(lines)


def _appended(lines: Lines) -> Iterator[Row]:
    raise AssertionError("a Gemini session is always read whole (MODE_LEGACY)")


def _line_text(obj: dict[str, Any]) -> str | None:
    return capped_text(_message_text(obj)) if record_kind(obj) in ROLES else None


GEMINI_SEARCH: Final = FileFormat(
    "gemini",
    _file_keys,
    _whole,
    _appended,
    _line_text,
    lambda key: None,  # a sub-agent's chat is a file of its own, read as it allows
)

GEMINI_CLI: Final = AgentFormat(
    name="gemini",
    title="Gemini CLI",
    env_var=GEMINI_HOME_ENV,
    default_dir_text=f"${GEMINI_HOME_ENV}/.gemini, else ~/.gemini",
    default_dir=gemini_dir,
    list_sessions=list_sessions,
    open_session=open_gemini_session,
    search=GEMINI_SEARCH,
)
