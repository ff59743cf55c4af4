"""opencode's connector (`OPENCODE`, registered in `core.formats.registry`).

* directory: ``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``
  (`core.formats.opencode_dirs`);
* sessions: each row of the ``session`` table of ``opencode.db`` (and of other
  channels' ``opencode-<channel>.db``), its path ``<database>/<session id>``
  (`core.session_stat`: stat'ed as the database and its WAL), and each session file of
  the older ``storage/`` layout; a session whose ``parent_id`` names a listed session
  (a task tool's sub-agent) is below it, up to `MAX_SUBAGENT_DEPTH` levels;
* reader: `core.formats.opencode.OpencodeSession`;
* search (`OPENCODE_SEARCH`): each session of a database through this reader, a row
  per text, reasoning or tool part, re-read when the session's signature
  (`core.formats.opencode_rows.db_signature`) changes
  (`core.search_index.row_sessions`); the older layout is not indexed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Final

from core.formats import opencode_dirs
from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.base import SessionSource
from core.formats.opencode import OpencodeSession
from core.formats.opencode_rows import db_signature
from core.formats.row_search import source_rows
from core.formats.sqlite_store import SessionNotInStore, StoreUnreadable
from core.paths import child_stem
from core.search_index.formats import FileFormat, collect_strings
from core.search_index.row_sessions import RowSessions, version_of
from core.search_index.rows import MODE_LEGACY, Row
from core.search_index.sources import FileKeys
from core.session_stat import row_session_path, split_row_session_path

__all__ = ["MAX_SUBAGENT_DEPTH", "OPENCODE", "list_opencode_sessions", "open_opencode_session"]

log = logging.getLogger(__name__)

#: Sub-agent levels followed (a sub-agent may start its own).
MAX_SUBAGENT_DEPTH: Final = 3


def _path(info: opencode_dirs.OpencodeSessionInfo) -> Path:
    return Path(row_session_path(info.store, info.id)) if info.in_db else info.store


def list_opencode_sessions(root: Path) -> Iterator[ListedSession]:
    """Every session, each followed by its sub-agents; a store that cannot be read is
    logged and left out (its sessions' own reads say why in ``ctl``)."""
    listing = opencode_dirs.list_sessions(root)
    for store, reason in listing.skipped.items():
        log.warning("opencode: skipping %s: %s", store, reason)
    known = {info.id for info in listing.sessions}
    children: dict[str, list[opencode_dirs.OpencodeSessionInfo]] = {}
    for info in listing.sessions:
        if info.parent_id is not None and info.parent_id in known:
            children.setdefault(info.parent_id, []).append(info)
    for info in sorted(listing.sessions, key=lambda s: s.id):
        if info.parent_id is None or info.parent_id not in known:
            yield from _with_children(info, info.project, info.id, children, 0)


def _with_children(
    info: opencode_dirs.OpencodeSessionInfo,
    project: str,
    stem: str,
    children: dict[str, list[opencode_dirs.OpencodeSessionInfo]],
    depth: int,
) -> Iterator[ListedSession]:
    yield ListedSession(project, stem, _path(info), {"id": info.id})
    if depth < MAX_SUBAGENT_DEPTH:
        for child in sorted(children.get(info.id, ()), key=lambda s: s.id):
            yield from _with_children(
                child, project, child_stem(stem, child.id), children, depth + 1
            )


def open_opencode_session(path: Path) -> OpencodeSession:
    """``<database>/<session id>``, or an older layout's session file."""
    found = split_row_session_path(path)
    if found is not None:
        return OpencodeSession(found[0], found[1])
    return OpencodeSession(path)


def _search_keys(root: str) -> FileKeys:
    """``(<database>, <session id>)`` of every session of every database: the older
    layout's JSON files are not indexed (current opencode no longer writes them). A
    database that cannot be listed (locked, corrupt) is unlisted with its reason: the
    index keeps its sessions' rows and tries it again at the next pass, and the other
    databases are indexed meanwhile."""
    listing = opencode_dirs.list_sessions(root)
    unlisted = {
        store.name: reason.removeprefix(f"{store}: ")
        for store, reason in listing.skipped.items()
        if store.suffix == ".db"
    }
    keys = [(info.store.name, info.id) for info in listing.sessions if info.in_db]
    return FileKeys(keys, unlisted)


def _search_text(
    session: SessionSource, index: int, roles: dict[str, str]
) -> tuple[str, list[str]] | None:
    """A part's text: typed text and reasoning, a tool call's name, input and output
    (a message row holds no text: its role is kept in ``roles`` for its parts)."""
    entry = session.entry(index)
    data = entry.get("data") or {}
    message_id = entry.get("messageID")
    if message_id is None:
        role = data.get("role")
        roles[str(entry.get("id"))] = role if isinstance(role, str) else "message"
        return None
    parts: list[str] = []
    kind = data.get("type")
    if kind == "text" or kind == "reasoning":
        collect_strings(data.get("text"), parts)
        return ("reasoning" if kind == "reasoning" else roles.get(message_id, "message")), parts
    if kind == "tool":
        state = data.get("state")
        state = state if isinstance(state, dict) else {}
        collect_strings([data.get("tool"), state.get("input"), state.get("output")], parts)
        return "toolCall", parts
    return None


def _search_rows(path: str) -> list[Row]:
    """The session's rows; none for a session deleted since it was listed (only a
    database that cannot be read raises: `core.search_index.row_sessions`)."""
    try:
        session = open_opencode_session(Path(path))
    except SessionNotInStore:
        return []
    return source_rows(session, partial(_search_text, roles={}))


def _search_version(path: str) -> int:
    found = split_row_session_path(path)
    if found is None:
        raise StoreUnreadable(f"{path}: not a session of a database")
    return version_of(db_signature(*found))


#: sessions of the databases, read through the reader (`core.search_index.row_sessions`)
OPENCODE_SEARCH: Final = FileFormat(
    "opencode",
    _search_keys,
    whole_file_rows=lambda lines: (MODE_LEGACY, iter(())),  # nothing is read as lines
    appended_rows=lambda lines: iter(()),
    line_text=lambda obj: None,
    parent_key=lambda key: None,  # a sub-agent is a row of the same database
    row_sessions=RowSessions(_search_rows, _search_version),
)

OPENCODE: Final = AgentFormat(
    name="opencode",
    title="opencode",
    env_var="XDG_DATA_HOME",
    default_dir_text="$XDG_DATA_HOME/opencode, else ~/.local/share/opencode",
    default_dir=opencode_dirs.opencode_dir,
    list_sessions=list_opencode_sessions,
    open_session=open_opencode_session,
    search=OPENCODE_SEARCH,
)
