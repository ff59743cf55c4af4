"""``core.session_stat``: a session kept as rows of a database is stat'ed as the
database and its WAL; any other path is ``os.stat``."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from core.session_stat import row_session_path, session_stat, split_row_session_path


def test_a_row_session_changes_with_every_write_to_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE t (a)")
    conn.commit()
    path = row_session_path(db, "ses_1")
    assert split_row_session_path(path) == (str(db), "ses_1")
    first = session_stat(path)
    assert stat.S_ISREG(first.st_mode) and first.st_ino == os.stat(db).st_ino
    assert first.st_size == os.stat(f"{db}-wal").st_size  # not the database's size
    db_before = db.read_bytes()
    conn.execute("INSERT INTO t VALUES (?)", ("x" * 5000,))
    conn.commit()
    assert db.read_bytes() == db_before  # the write is in the WAL only
    second = session_stat(path)
    assert (second.st_size, second.st_mtime_ns) != (first.st_size, first.st_mtime_ns)
    conn.close()


def test_other_paths_are_os_stat(tmp_path: Path) -> None:
    plain = tmp_path / "s.jsonl"
    plain.write_text("{}\n")
    assert session_stat(plain) == os.stat(plain)
    assert split_row_session_path(plain) is None
    with pytest.raises(FileNotFoundError):
        session_stat(tmp_path / "missing" / "x")
    with pytest.raises(NotADirectoryError):
        session_stat(tmp_path / "s.jsonl" / "x" / "y")  # below a file, but not one level
