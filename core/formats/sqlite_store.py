"""Another agent's SQLite store, opened the one safe way: read-only, never immutable.

opencode (``opencode.db``) and Cursor's agent CLI (``store.db``) keep sessions in SQLite
databases in WAL mode that the agent writes while it runs. So a reader opens them with
a ``file:…?mode=ro`` URI -- never ``immutable=1``, which would have SQLite skip the
WAL and the locks and read torn pages of a live database -- with a busy timeout, and
turns every SQLite failure (locked past the timeout, not a database, corrupt pages)
into `StoreUnreadable` with the reason, which callers show as a skip.

Callers run this in worker threads: a busy timeout may block for `BUSY_TIMEOUT_S`.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from core.errors import NotASessionError
from core.safe_open import PathArg

__all__ = ["BUSY_TIMEOUT_S", "SessionNotInStore", "StoreUnreadable", "read_only", "wal_state"]

#: how long a read waits for a writer's lock before the store is reported locked
BUSY_TIMEOUT_S: Final = 2.0


class StoreUnreadable(NotASessionError):
    """The store could not be read now (locked, corrupt, not SQLite, gone): the
    message says which and why. A `NotASessionError`, so the mount skips the session
    and says why rather than failing the rest."""


class SessionNotInStore(StoreUnreadable):
    """The store was read, and holds no such session (deleted since it was listed)."""


def _uri(path: PathArg) -> str:
    return "file:" + urllib.parse.quote(os.fspath(path)) + "?mode=ro"


@contextmanager
def read_only(path: PathArg, timeout: float = BUSY_TIMEOUT_S) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the SQLite file ``path``, closed after the block;
    `StoreUnreadable` for any SQLite failure inside it."""
    if not os.path.isfile(path):
        raise StoreUnreadable(f"{os.fspath(path)}: no such database")
    try:
        conn = sqlite3.connect(_uri(path), uri=True, timeout=timeout, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreUnreadable(f"{os.fspath(path)}: {exc}") from None
    try:
        conn.execute("PRAGMA query_only = 1")
        yield conn
    except sqlite3.Error as exc:
        raise StoreUnreadable(f"{os.fspath(path)}: {exc}") from None
    finally:
        conn.close()


def wal_state(path: PathArg) -> tuple[int, int, int, int]:
    """What changes when the database is written: the size and mtime of the file and
    of its ``-wal`` (a WAL database's writes land in the WAL until a checkpoint)."""
    state = []
    for name in (os.fspath(path), os.fspath(path) + "-wal"):
        try:
            st = os.stat(name)
        except OSError:
            state += [0, 0]
        else:
            state += [st.st_size, st.st_mtime_ns]
    return state[0], state[1], state[2], state[3]
