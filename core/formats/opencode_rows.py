"""One opencode session's rows, from wherever that opencode version keeps them.

* opencode >= 1.2: SQLite ``opencode.db`` (or ``opencode-<channel>.db``) -- ``session``
  (one row: title, directory, ``parent_id``, ``revert``, token totals), ``message``
  (``data``: JSON without the id), ``part`` (``data``: JSON without the ids). Read
  through `core.formats.sqlite_store` (read-only, busy timeout), every query by index:
  the session by its primary key, its messages by ``message_session_time_created_id_idx``,
  its parts by ``part_session_idx`` -- nothing grows with the other sessions.
* before: JSON files ``storage/session/<project id>/<session id>.json``,
  ``storage/message/<session id>/<message id>.json``,
  ``storage/part/<message id>/<part id>.json`` (ids sort by creation time).

Either way the answer is a `SessionRows`. Blocking I/O: callers run it in a worker
thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.formats.sqlite_store import SessionNotInStore, StoreUnreadable, read_only
from core.jsonl import loads
from core.safe_open import PathArg, open_regular

__all__ = [
    "STORAGE_DIR",
    "Row",
    "SessionRows",
    "db_signature",
    "read_db_session",
    "read_storage_session",
]

STORAGE_DIR: Final = "storage"
#: the most one JSON file of the older layout may hold (a part with a big tool output
#: is far smaller; anything bigger is not opencode's)
_JSON_FILE_LIMIT: Final = 64 * 1024 * 1024

_SESSION_SQL: Final = "SELECT * FROM session WHERE id = ?"
_MESSAGES_SQL: Final = (
    "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id"
)
_PARTS_SQL: Final = (
    "SELECT id, message_id, time_created, data FROM part WHERE session_id = ? ORDER BY id"
)
_SIGNATURE_SQL: Final = (
    "SELECT (SELECT time_updated FROM session WHERE id = ?1),"
    " (SELECT count(*) || ':' || ifnull(max(time_updated), 0) FROM message WHERE session_id = ?1),"
    " (SELECT count(*) || ':' || ifnull(max(time_updated), 0) FROM part WHERE session_id = ?1)"
)


@dataclass(slots=True)
class Row:
    """One message or part: its id, its message's id (a part), creation time (ms) and
    its ``data`` object (``None``: not a JSON object: counted, not shown)."""

    id: str
    message_id: str | None
    time_ms: int | None
    data: dict[str, Any] | None
    raw_size: int


@dataclass(slots=True)
class SessionRows:
    """A session's info (the ``session`` row, or the older ``session/…json``), its
    messages in order and each message's parts in order."""

    info: dict[str, Any]
    messages: list[Row] = field(default_factory=list)
    parts: dict[str, list[Row]] = field(default_factory=dict)
    #: what `db_signature` said when these were read (``None``: JSON files)
    signature: tuple[Any, ...] | None = None


def _object(text: Any) -> tuple[dict[str, Any] | None, int]:
    if isinstance(text, bytes):
        raw = text
    elif isinstance(text, str):
        raw = text.encode("utf-8", "surrogatepass")
    else:
        return None, 0
    try:
        value = loads(raw)
    except ValueError:
        return None, len(raw)
    return (value if isinstance(value, dict) else None), len(raw)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def db_signature(db: PathArg, session_id: str) -> tuple[Any, ...]:
    """What changes whenever the session, one of its messages or parts changes: the
    session's update time and its messages' and parts' counts and newest update times."""
    with read_only(db) as conn:
        row = conn.execute(_SIGNATURE_SQL, (session_id,)).fetchone()
    return tuple(row) if row else ()


def read_db_session(db: PathArg, session_id: str) -> SessionRows:
    """The session ``session_id`` of the database ``db`` (one read transaction);
    `StoreUnreadable` when it cannot be read, `SessionNotInStore` when it has no such
    session."""
    with read_only(db) as conn:
        conn.execute("BEGIN")  # one snapshot for all the queries
        cursor = conn.execute(_SESSION_SQL, (session_id,))
        found = cursor.fetchone()
        if found is None:
            raise SessionNotInStore(f"{os.fspath(db)}: no session {session_id}")
        info = {d[0]: value for d, value in zip(cursor.description, found, strict=True)}
        rows = SessionRows(
            info, signature=tuple(conn.execute(_SIGNATURE_SQL, (session_id,)).fetchone())
        )
        for ident, created, data in conn.execute(_MESSAGES_SQL, (session_id,)):
            obj, size = _object(data)
            rows.messages.append(Row(str(ident), None, _int(created), obj, size))
        for ident, message_id, created, data in conn.execute(_PARTS_SQL, (session_id,)):
            obj, size = _object(data)
            rows.parts.setdefault(str(message_id), []).append(
                Row(str(ident), str(message_id), _int(created), obj, size)
            )
        conn.execute("COMMIT")
    return rows


def _json_file(path: Path) -> tuple[dict[str, Any] | None, int]:
    try:
        with open_regular(path) as f:
            return _object(f.read(_JSON_FILE_LIMIT))
    except OSError:
        return None, 0


def _json_dir(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as found:
            return sorted(
                Path(e.path)
                for e in found
                if e.name.endswith(".json") and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return []


def _created(obj: dict[str, Any] | None) -> int | None:
    time = obj.get("time") if obj is not None else None
    return _int(time.get("created")) if isinstance(time, dict) else None


def read_storage_session(session_file: PathArg) -> SessionRows:
    """The older layout's session ``storage/session/<project>/<id>.json`` with its
    messages and parts; `StoreUnreadable` when the session file is not a JSON object."""
    session_file = Path(session_file)
    info, _ = _json_file(session_file)
    if info is None:
        raise StoreUnreadable(f"{session_file}: not an opencode session file")
    storage = session_file.parents[2]
    session_id = session_file.stem
    rows = SessionRows(info)
    for path in _json_dir(storage / "message" / session_id):
        obj, size = _json_file(path)
        rows.messages.append(Row(path.stem, None, _created(obj), obj, size))
    rows.messages.sort(key=lambda r: (r.time_ms or 0, r.id))
    for message in rows.messages:
        for path in _json_dir(storage / "part" / message.id):
            obj, size = _json_file(path)
            rows.parts.setdefault(message.id, []).append(
                Row(path.stem, message.id, _created(obj), obj, size)
            )
    return rows
