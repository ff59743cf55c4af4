"""Qwen Code's connector (`QWEN_CODE`, registered in `core.formats.registry`).

* directory: where Qwen Code keeps its sessions: ``$QWEN_RUNTIME_DIR`` when set (its
  runtime output dir), else ``$QWEN_HOME``, else ``~/.qwen``;
* sessions (0.24): ``projects/<enc>/chats/<sessionId>.jsonl`` (``<enc>``: the cwd with
  every character but ASCII letters and digits made ``-``) and archived ones in
  ``chats/archive/``, read by `core.formats.qwen.QwenSession`; an older Qwen Code (a
  fork of Gemini CLI that kept its format) wrote ``tmp/<project hash>/chats/session-*``
  ``.json`` documents or ``.jsonl`` records, read by the Gemini readers
  (`QwenLegacySession`, `QwenLegacyDocument`: model messages ``type: "qwen"``);
* search: `QWEN_SEARCH`: a row per ``user``/``assistant``/``tool_result`` record of a
  0.24 session, named by its ``uuid`` (a later fragment of a uuid is found under the
  first: the entry its message is shown in), appended lines read as they come; an older
  version's files as Gemini's are (`core.formats.gemini_search.chat_rows`).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.base import SessionSource
from core.formats.gemini import GeminiDocumentSession, GeminiSession
from core.formats.gemini_dirs import list_chats
from core.formats.gemini_messages import KIND_UNKNOWN, ROLES, record_kind
from core.formats.gemini_search import chat_rows, message_search_text
from core.formats.prefix import read_prefix, string_field
from core.formats.qwen import QwenSession
from core.paths import home_dir
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
    MODE_NOT_SESSION,
    Row,
    parse_object,
)

__all__ = ["QWEN_CODE", "QWEN_SEARCH", "list_sessions", "open_qwen_session", "qwen_dir"]

QWEN_HOME_ENV: Final = "QWEN_HOME"
QWEN_RUNTIME_ENV: Final = "QWEN_RUNTIME_DIR"
PROJECTS_DIR: Final = "projects"
LEGACY_DIR: Final = "tmp"
CHATS_DIR: Final = "chats"
ARCHIVE_DIR: Final = "archive"
#: Qwen's own pattern for a session file's name
SESSION_FILE: Final = re.compile(r"[0-9a-fA-F-]{32,36}\.jsonl")
_ROLES: Final = {"user": "user", "assistant": "assistant", "tool_result": "toolResult"}


def qwen_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Qwen Code keeps its sessions (module docstring), existing or not."""
    environ = os.environ if env is None else env
    for variable in (QWEN_RUNTIME_ENV, QWEN_HOME_ENV):
        configured = environ.get(variable)
        if configured:
            return Path(os.path.abspath(os.path.expanduser(configured)))
    return home_dir(env) / ".qwen"


class QwenLegacySession(GeminiSession):
    """An older Qwen Code's ``tmp/<hash>/chats/session-*.jsonl`` (Gemini's records)."""

    agent = "qwen"


class QwenLegacyDocument(GeminiDocumentSession):
    """An older Qwen Code's ``tmp/<hash>/chats/session-*.json`` (Gemini's document)."""

    agent = "qwen"


def open_qwen_session(path: Path) -> SessionSource:
    """A 0.24 session as `QwenSession`; an older version's (``tmp/<hash>/chats/``) with
    the Gemini readers."""
    if path.parts[-4:-3] == (LEGACY_DIR,):
        return QwenLegacyDocument(path) if path.suffix == ".json" else QwenLegacySession(path)
    return QwenSession(path)


def _session_files(chats: Path) -> list[Path]:
    """The files of ``chats`` named as Qwen names sessions, in name order."""
    try:
        with os.scandir(chats) as found:
            names = [
                e.name
                for e in found
                if SESSION_FILE.fullmatch(e.name) and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return []
    return [chats / name for name in sorted(names)]


def list_sessions(root: Path) -> Iterator[ListedSession]:
    """0.24's sessions (active, then archived) of every project, then an older
    version's."""
    for project in dir_entries(str(root / PROJECTS_DIR)):
        chats = Path(project.path) / CHATS_DIR
        for path in _session_files(chats) + _session_files(chats / ARCHIVE_DIR):
            try:
                session_id = string_field(read_prefix(path), "sessionId")
            except OSError:
                continue
            stem = path.name.removesuffix(".jsonl")
            yield ListedSession(project.name, stem, path, {"id": session_id or stem})
    for project in dir_entries(str(root / LEGACY_DIR)):
        for chat in list_chats(Path(project.path) / CHATS_DIR):
            yield ListedSession(
                project.name, chat.stem, chat.path, {"id": chat.session_id or chat.stem}
            )


def _file_keys(root: str) -> Iterator[tuple[str, ...]]:
    """``projects/<enc>/chats/<id>.jsonl``, ``chats/archive/<id>.jsonl``, and an older
    version's ``tmp/<hash>/chats/session-*.json[l]``."""
    for project in dir_entries(f"{root}/{PROJECTS_DIR}"):
        chats = f"{project.path}/{CHATS_DIR}"
        for name in file_names(chats, ""):
            if SESSION_FILE.fullmatch(name):
                yield (PROJECTS_DIR, project.name, CHATS_DIR, name)
        for name in file_names(f"{chats}/{ARCHIVE_DIR}", ""):
            if SESSION_FILE.fullmatch(name):
                yield (PROJECTS_DIR, project.name, CHATS_DIR, ARCHIVE_DIR, name)
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
    stream = iter(lines)
    head = next(stream, None)
    if head is None:
        return MODE_NOT_SESSION, iter(())  # nothing yet: read again when it grows
    again = itertools.chain([head], stream)
    if _is_older(head[1]):
        return MODE_LEGACY, chat_rows(again)
    return MODE_APPENDABLE, _rows(again)


def _line_text(obj: dict[str, Any]) -> str | None:
    if record_kind(obj) in ROLES:  # an older version's message
        return capped_text(message_search_text(obj))
    return capped_text(_record_text(obj)) if _ROLES.get(str(obj.get("type"))) else None


QWEN_SEARCH: Final = FileFormat("qwen", _file_keys, _whole, _rows, _line_text, lambda key: None)

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
