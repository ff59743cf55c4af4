"""core.history read-only mode: reads the agents' database and never writes a byte.

Every test snapshots the whole directory (names, sizes, mtimes, contents) around the
read-only use: "writes nothing" means no file changes and no file appears, not even
SQLite's ``-wal``/``-shm`` side files.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import pytest
from support.file_snapshot import files_snapshot

from core import history as history_module
from core.history import HistoryStorage, HistoryStorageError


def written_history(db_path: Path, *prompts: str) -> Path:
    """A history.db as the agents leave it: written in WAL mode, then closed."""
    with HistoryStorage(db_path) as storage:
        for prompt in prompts:
            storage.add(prompt, "/work/demo")
        assert storage.flush(timeout=30)
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["history.db"]
    return db_path


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "history.db"


def test_a_closed_wal_database_is_read_without_creating_wal_or_shm(db_path: Path) -> None:
    written_history(db_path, "fix the parser", "add parser tests", "deploy")
    before = files_snapshot(db_path.parent)
    with HistoryStorage(db_path, read_only=True) as storage:
        assert [e.prompt for e in storage.recent()] == [
            "deploy",
            "add parser tests",
            "fix the parser",
        ]
        assert [e.prompt for e in storage.search("pars")] == ["add parser tests", "fix the parser"]
    assert files_snapshot(db_path.parent) == before


def test_a_missing_database_is_empty_history_and_nothing_is_created(tmp_path: Path) -> None:
    db_path = tmp_path / "agent" / "history.db"  # not even the agent dir exists
    with HistoryStorage(db_path, read_only=True) as storage:
        assert storage.recent() == []
        assert storage.search("anything") == []
    assert list(tmp_path.iterdir()) == []


def test_a_database_appearing_later_is_read(db_path: Path) -> None:
    with HistoryStorage(db_path, read_only=True) as storage:
        assert storage.recent() == []
        written_history(db_path, "late prompt")
        assert [e.prompt for e in storage.recent()] == ["late prompt"]


def test_missing_fts_index_means_no_search_and_no_rebuild(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE history (id INTEGER PRIMARY KEY, prompt TEXT, created_at INT, cwd)")
    conn.execute("INSERT INTO history VALUES (1, 'old prompt', 1771237230, NULL)")
    conn.commit()
    conn.close()
    before = files_snapshot(db_path.parent)
    with HistoryStorage(db_path, read_only=True) as storage:
        assert [e.prompt for e in storage.recent()] == ["old prompt"]
        assert storage.search("old") == []
    assert files_snapshot(db_path.parent) == before


def test_a_rollback_journal_database_keeps_its_journal_mode(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.executescript(history_module.SCHEMA_SQL)
    conn.execute("INSERT INTO history (prompt) VALUES ('plain journal')")
    conn.commit()
    conn.close()
    before = files_snapshot(db_path.parent)
    with HistoryStorage(db_path, read_only=True) as storage:
        assert [e.prompt for e in storage.search("journal")] == ["plain journal"]
    assert files_snapshot(db_path.parent) == before  # the read-write open would switch to WAL


def test_an_empty_file_is_empty_history(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    before = files_snapshot(db_path.parent)
    with HistoryStorage(db_path, read_only=True) as storage:
        assert storage.recent() == []
        assert storage.search("x") == []
    assert files_snapshot(db_path.parent) == before


def test_a_file_that_is_not_a_database_fails_at_open(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(HistoryStorageError, match="cannot read prompt history"):
        HistoryStorage(db_path, read_only=True)


@pytest.mark.timeout(10)
def test_a_fifo_in_its_place_fails_at_open_instead_of_blocking(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    os.mkfifo(db_path)
    with pytest.raises(HistoryStorageError, match="not a regular file"):
        HistoryStorage(db_path, read_only=True)


def test_prompts_an_agent_has_not_checkpointed_yet_are_seen(db_path: Path) -> None:
    """An agent keeps the database open: its -wal/-shm exist and hold the newest
    prompts. The read-only reader shares them and creates nothing else."""
    written_history(db_path, "checkpointed")
    agent = sqlite3.connect(db_path, isolation_level=None)
    try:
        agent.execute("PRAGMA wal_autocheckpoint=0")  # keep the new row in the -wal
        agent.execute("INSERT INTO history (prompt) VALUES ('only in the wal')")
        names = sorted(p.name for p in db_path.parent.iterdir())
        assert names == ["history.db", "history.db-shm", "history.db-wal"]
        main_before = files_snapshot(db_path.parent)["history.db"]
        with HistoryStorage(db_path, read_only=True) as storage:
            assert [e.prompt for e in storage.recent()] == ["only in the wal", "checkpointed"]
            assert [e.prompt for e in storage.search("wal")] == ["only in the wal"]
        assert sorted(p.name for p in db_path.parent.iterdir()) == names
        assert files_snapshot(db_path.parent)["history.db"] == main_before
    finally:
        agent.close()


def test_a_checkpoint_during_an_immutable_read_makes_it_read_again(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent opens, writes and closes (checkpointing into the main file) while a
    lock-free read is running: that read cannot be trusted and is repeated."""
    written_history(db_path, "first")
    real_connect = history_module._connect_read_only
    calls: list[bool] = []

    def connect_while_an_agent_writes(path: Path, *, immutable: bool) -> sqlite3.Connection:
        calls.append(immutable)
        if len(calls) == 1:
            written_history(db_path, "written meanwhile")
        return real_connect(path, immutable=immutable)

    with HistoryStorage(db_path, read_only=True) as storage:
        monkeypatch.setattr(history_module, "_connect_read_only", connect_while_an_agent_writes)
        assert [e.prompt for e in storage.recent()] == ["written meanwhile", "first"]
    assert calls == [True, True]


def test_a_database_rewritten_on_every_read_gives_up_with_a_logged_error(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    written_history(db_path, "first")
    real_connect = history_module._connect_read_only
    storage = HistoryStorage(db_path, read_only=True)
    count = iter(range(100))

    def connect_while_an_agent_writes(path: Path, *, immutable: bool) -> sqlite3.Connection:
        written_history(db_path, f"prompt {next(count)}")
        return real_connect(path, immutable=immutable)

    monkeypatch.setattr(history_module, "_connect_read_only", connect_while_an_agent_writes)
    with caplog.at_level(logging.ERROR, logger="core.history"):
        assert storage.recent() == []
    assert "rewritten during each of 3 reads" in caplog.text
    storage.close()


def test_add_on_a_read_only_store_records_nothing(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written_history(db_path, "kept")
    before = files_snapshot(db_path.parent)
    with (
        caplog.at_level(logging.WARNING, logger="core.history"),
        HistoryStorage(db_path, read_only=True) as storage,
    ):
        storage.add("not recorded")
        assert storage.flush(timeout=5)
        assert [e.prompt for e in storage.recent()] == ["kept"]
    assert "read-only" in caplog.text
    assert files_snapshot(db_path.parent) == before


def test_reads_after_close_return_empty(db_path: Path) -> None:
    written_history(db_path, "x")
    storage = HistoryStorage(db_path, read_only=True)
    storage.close()
    assert storage.recent() == []
    assert storage.search("x") == []
