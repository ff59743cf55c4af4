"""The sync's local progress: what already went up, so a restart re-uploads nothing.

One SQLite file under the state dir, rows keyed by (store, machine, relative path). A row
is written right after its segment's conditional create succeeded, so a killed sync
loses at most the segment in flight, which the next run finds already created and adopts
(sync.py). A lock file per (store, machine) keeps two syncs that share one state dir out of
each other's way; syncs with different state dirs meet at the store's claim instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from core.private_files import ensure_private_file

from .private import make_private_dirs

__all__ = ["FileProgress", "StateLocked", "SyncState"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS owner (
    store TEXT NOT NULL, machine TEXT NOT NULL, token TEXT NOT NULL, epoch INTEGER NOT NULL,
    PRIMARY KEY (store, machine));
CREATE TABLE IF NOT EXISTS files (
    store TEXT NOT NULL, machine TEXT NOT NULL, rel TEXT NOT NULL,
    inode INTEGER NOT NULL, generation INTEGER NOT NULL, offset INTEGER NOT NULL,
    head_hash TEXT NOT NULL, tail_hash TEXT NOT NULL,
    source_size INTEGER NOT NULL DEFAULT -1, source_mtime_ns INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (store, machine, rel));
CREATE TABLE IF NOT EXISTS blobs (
    store TEXT NOT NULL, machine TEXT NOT NULL, sha TEXT NOT NULL,
    PRIMARY KEY (store, machine, sha));
"""


class StateLocked(RuntimeError):
    """Another sync of the same store and machine runs with this state dir."""


@dataclass(frozen=True)
class FileProgress:
    inode: int
    generation: int
    #: Bytes of the file already in the store (always just after a ``\n``).
    offset: int
    #: sha256 of the first and the last (up to) 4 KiB of ``[0, offset)``: a changed
    #: already-uploaded prefix means the file was rewritten in place.
    head_hash: str
    tail_hash: str
    #: the source file's size and mtime when this was saved (-1: not known): a file
    #: with the same inode, size and mtime is unchanged, known by one ``stat``
    source_size: int = -1
    source_mtime_ns: int = -1


class SyncState:
    """Progress of one machine name syncing to one store."""

    def __init__(self, state_dir: Path, store_id: str, machine: str) -> None:
        make_private_dirs(state_dir)
        self.store, self.machine = store_id, machine
        self._lock_file = self._take_lock(state_dir, store_id, machine)
        database = state_dir / "sync.sqlite"
        ensure_private_file(database)  # its -wal and -shm get its 0600 from SQLite
        self._db = sqlite3.connect(database, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._add_source_columns()
        self._mutex = threading.Lock()

    def _add_source_columns(self) -> None:
        """A state made before the stat columns existed gets them (-1: not known, so
        its files are checked by their bytes once, then by ``stat``)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(files)")}
        with self._db:
            for column in ("source_size", "source_mtime_ns"):
                if column not in columns:
                    self._db.execute(
                        f"ALTER TABLE files ADD COLUMN {column} INTEGER NOT NULL DEFAULT -1"
                    )

    @staticmethod
    def _take_lock(state_dir: Path, store_id: str, machine: str) -> int:
        digest = hashlib.sha256(f"{store_id}\0{machine}".encode()).hexdigest()[:16]
        lock = state_dir / f"{machine}-{digest}.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateLocked(
                f"another sync of machine {machine!r} to this store is running "
                f"with the state dir {state_dir}"
            ) from None
        return fd

    def close(self) -> None:
        self._db.close()
        os.close(self._lock_file)

    def owner(self) -> tuple[str, int]:
        """Our claim token (made once, kept) and the claim epoch we hold (0: none yet)."""
        with self._mutex:
            row = self._db.execute(
                "SELECT token, epoch FROM owner WHERE store=? AND machine=?",
                (self.store, self.machine),
            ).fetchone()
            if row is not None:
                return str(row[0]), int(row[1])
            token = secrets.token_hex(16)
            with self._db:
                self._db.execute(
                    "INSERT INTO owner VALUES (?, ?, ?, 0)", (self.store, self.machine, token)
                )
            return token, 0

    def set_epoch(self, epoch: int) -> None:
        with self._mutex, self._db:
            self._db.execute(
                "UPDATE owner SET epoch=? WHERE store=? AND machine=?",
                (epoch, self.store, self.machine),
            )

    _FIELDS = "inode, generation, offset, head_hash, tail_hash, source_size, source_mtime_ns"

    def file(self, rel: str) -> FileProgress | None:
        with self._mutex:
            row = self._db.execute(
                f"SELECT {self._FIELDS} FROM files WHERE store=? AND machine=? AND rel=?",
                (self.store, self.machine, rel),
            ).fetchone()
        return None if row is None else FileProgress(*row)

    def all_files(self) -> dict[str, FileProgress]:
        """Every file's progress at once (a pass over 10,000 files asks once, not 10,000
        times)."""
        with self._mutex:
            rows = self._db.execute(
                f"SELECT rel, {self._FIELDS} FROM files WHERE store=? AND machine=?",
                (self.store, self.machine),
            ).fetchall()
        return {str(row[0]): FileProgress(*row[1:]) for row in rows}

    def save_file(self, rel: str, progress: FileProgress) -> None:
        with self._mutex, self._db:
            self._db.execute(
                f"INSERT OR REPLACE INTO files (store, machine, rel, {self._FIELDS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.store,
                    self.machine,
                    rel,
                    progress.inode,
                    progress.generation,
                    progress.offset,
                    progress.head_hash,
                    progress.tail_hash,
                    progress.source_size,
                    progress.source_mtime_ns,
                ),
            )

    def uploaded_blobs(self) -> set[str]:
        with self._mutex:
            rows = self._db.execute(
                "SELECT sha FROM blobs WHERE store=? AND machine=?", (self.store, self.machine)
            ).fetchall()
        return {str(row[0]) for row in rows}

    def add_blob(self, sha: str) -> None:
        with self._mutex, self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO blobs VALUES (?, ?, ?)", (self.store, self.machine, sha)
            )
