"""``session_stat``: the stat of a session's file, whether the session is a file or rows
of a database.

Most agents keep a file per session, and the mount tells that a session changed by
one ``stat`` of it. opencode keeps every session in one SQLite database written in
WAL mode; such a session's path is ``<database file>/<session id>`` (never a real
file: nothing can be below a regular file), and its stat is the database's: mode,
owner, device and inode of the database file; mtime the newer of the database's and
its ``-wal``'s (a write lands in the WAL until a checkpoint copies it over); size the
WAL's. Not the database's size: the mount bounds what it renders by a session's file
size, and the whole database is every session together. A write to any session of the
database changes the stat: the reader then asks the database whether its own session
changed (`core.formats.opencode.OpencodeSession.catch_up`).
"""

from __future__ import annotations

import os
import stat

from core.safe_open import PathArg

__all__ = ["row_session_path", "session_stat", "split_row_session_path"]


def row_session_path(database: PathArg, session_id: str) -> str:
    """The path of the session ``session_id`` of the database file ``database``."""
    return os.path.join(os.fspath(database), session_id)


def split_row_session_path(path: PathArg) -> tuple[str, str] | None:
    """``(database, session id)`` when ``path`` names a session of a database (its
    parent is a regular file), else ``None``."""
    database, session_id = os.path.split(os.fspath(path))
    try:
        is_file = stat.S_ISREG(os.stat(database).st_mode)
    except OSError:
        return None
    return (database, session_id) if is_file and session_id else None


def session_stat(path: PathArg) -> os.stat_result:
    """``os.stat(path)``; for a session of a database (module docstring), the
    database's stat with the WAL's size and mtime. ``OSError`` as
    ``os.stat`` raises it when neither exists."""
    try:
        return os.stat(path)
    except NotADirectoryError:
        database = os.path.dirname(os.fspath(path))
        st = os.stat(database)
        if not stat.S_ISREG(st.st_mode):
            raise
    size, mtime_ns = 0, st.st_mtime_ns
    try:
        wal = os.stat(database + "-wal")
    except OSError:
        pass
    else:
        size = wal.st_size
        mtime_ns = max(mtime_ns, wal.st_mtime_ns)
    fields = list(st[:10])
    fields[stat.ST_SIZE] = size
    fields[stat.ST_MTIME] = mtime_ns // 1_000_000_000
    return os.stat_result(
        fields,
        {"st_atime_ns": st.st_atime_ns, "st_mtime_ns": mtime_ns, "st_ctime_ns": st.st_ctime_ns},
    )
