"""GitHub Copilot CLI's connector (`COPILOT_CLI`, registered in `core.formats.registry`).

* directory: ``$COPILOT_HOME`` or ``~/.copilot`` (`core.formats.copilot_dirs`);
* sessions: ``session-state/<uuid>/events.jsonl`` (or an older bare
  ``session-state/<uuid>.jsonl``) is a session of the project its cwd names;
* reader: `core.formats.copilot.CopilotSession`;
* search (`COPILOT_SEARCH`): a row per ``user.message``, ``assistant.message`` (its
  text and tool requests) and ``tool.execution_complete`` (its output), the event
  ``id`` the entry id -- ids are in the file, so a growing session is read from where
  the index stopped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from core.formats import copilot_dirs
from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.copilot import CopilotSession
from core.search_index.formats import (
    FileFormat,
    Lines,
    capped_text,
    collect_strings,
    dir_entries,
    text_row,
)
from core.search_index.rows import MODE_APPENDABLE, Row, parse_object

__all__ = ["COPILOT_CLI", "COPILOT_SEARCH", "list_copilot_sessions"]

_ROLES: Final = {
    "user.message": "user",
    "assistant.message": "assistant",
    "tool.execution_complete": "toolResult",
}


def list_copilot_sessions(root: Path) -> Iterator[ListedSession]:
    for session in copilot_dirs.list_sessions(root):
        yield ListedSession(session.project, session.id, session.path, {"id": session.id})


def _keys(root: str) -> Iterator[tuple[str, ...]]:
    state = os.path.join(root, copilot_dirs.SESSION_STATE_DIR)
    for session in dir_entries(state):
        if os.path.isfile(os.path.join(session.path, copilot_dirs.EVENTS_FILE)):
            yield (copilot_dirs.SESSION_STATE_DIR, session.name, copilot_dirs.EVENTS_FILE)
    try:
        with os.scandir(state) as found:
            bare = [e.name for e in found if e.name.endswith(".jsonl") and e.is_file()]
    except OSError:
        bare = []
    for name in sorted(bare):
        yield (copilot_dirs.SESSION_STATE_DIR, name)


def _text(obj: dict[str, Any]) -> tuple[str, list[str]] | None:
    role = _ROLES.get(str(obj.get("type")))
    data = obj.get("data")
    if role is None or not isinstance(data, dict):
        return None
    parts: list[str] = []
    if role == "toolResult":
        collect_strings(data.get("result"), parts)
    else:
        collect_strings(data.get("content"), parts)
        collect_strings(data.get("toolRequests"), parts)
    return role, parts


def _rows(lines: Lines) -> Iterator[Row]:
    for at, line in lines:
        obj = parse_object(line)
        ident = obj.get("id") if obj is not None else None
        found = _text(obj) if obj is not None and isinstance(ident, str) else None
        if obj is not None and found is not None and isinstance(ident, str):
            row = text_row(ident, found[0], found[1], obj, at, line)
            if row is not None:
                yield row


def _whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_APPENDABLE, _rows(lines)


def _line_text(obj: dict[str, Any]) -> str | None:
    found = _text(obj)
    return capped_text(found[1]) if found is not None else None


COPILOT_SEARCH: Final = FileFormat("copilot", _keys, _whole, _rows, _line_text, lambda key: None)

COPILOT_CLI: Final = AgentFormat(
    name="copilot",
    title="GitHub Copilot CLI",
    env_var=copilot_dirs.COPILOT_DIR_ENV,
    default_dir_text=f"${copilot_dirs.COPILOT_DIR_ENV}, else ~/.copilot",
    default_dir=copilot_dirs.copilot_dir,
    list_sessions=list_copilot_sessions,
    open_session=CopilotSession,
    search=COPILOT_SEARCH,
)
