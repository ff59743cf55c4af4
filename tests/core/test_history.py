"""core.history: the prompt history store (spec section 11)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import history as history_module
from core.history import (
    FTS5UnavailableError,
    HistoryEntry,
    HistoryStorage,
    HistoryStorageError,
    format_history_line,
    history_match_query,
    unescape_history_field,
)

REPO = Path(__file__).resolve().parents[2]

# What the agents run on a new database (bun:sqlite, one script), kept here verbatim
# rather than imported so a drift in core/history.py's DDL shows up as a failure.
AGENT_SCHEMA = """
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
PRAGMA busy_timeout=5000;

CREATE TABLE IF NOT EXISTS history (
\tid INTEGER PRIMARY KEY AUTOINCREMENT,
\tprompt TEXT NOT NULL,
\tcreated_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)),
\tcwd TEXT
);
CREATE INDEX IF NOT EXISTS idx_history_created_at ON history(created_at DESC);

CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(prompt, content='history', content_rowid='id');

CREATE TRIGGER IF NOT EXISTS history_ai AFTER INSERT ON history BEGIN
\tINSERT INTO history_fts(rowid, prompt) VALUES (new.id, new.prompt);
\tEND;
"""  # noqa: E501


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "history.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[HistoryStorage]:
    storage = HistoryStorage(db_path)
    yield storage
    storage.close()


def add_all(storage: HistoryStorage, *prompts: str, cwd: str | None = None) -> None:
    for prompt in prompts:
        storage.add(prompt, cwd)
    assert storage.flush(timeout=30)


def prompts_of(entries: list[HistoryEntry]) -> list[str]:
    return [entry.prompt for entry in entries]


def raw_rows(path: Path, sql: str = "SELECT id, prompt, created_at, cwd FROM history") -> list:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def insert_raw(path: Path, rows: list[tuple[str, int, str | None]]) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany("INSERT INTO history (prompt, created_at, cwd) VALUES (?, ?, ?)", rows)
    conn.close()


# -- set-up ------------------------------------------------------------------------


def test_new_database_has_schema_wal_and_the_agents_names(db_path: Path) -> None:
    HistoryStorage(db_path).close()
    names = {row[0] for row in raw_rows(db_path, "SELECT name FROM sqlite_master")}
    assert {"history", "idx_history_created_at", "history_fts", "history_ai"} <= names
    assert raw_rows(db_path, "PRAGMA journal_mode") == [("wal",)]


def test_default_path_is_agent_dir_history_db(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agentdir"))
    with HistoryStorage() as storage:
        assert storage.path == tmp_path / "agentdir" / "history.db"
    assert (tmp_path / "agentdir" / "history.db").is_file()


def test_missing_fts5_fails_with_a_clear_message(db_path: Path, monkeypatch) -> None:
    real_connect = sqlite3.connect

    class NoFts5:
        def __init__(self) -> None:
            self.conn = real_connect(":memory:")

        def execute(self, sql: str):
            if "fts5" in sql:
                raise sqlite3.OperationalError("no such module: fts5")
            return self.conn.execute(sql)

        def close(self) -> None:
            self.conn.close()

    monkeypatch.setattr(history_module, "_fts5_checked", False)
    monkeypatch.setattr(history_module.sqlite3, "connect", lambda *a, **k: NoFts5())
    with pytest.raises(FTS5UnavailableError, match="FTS5"):
        HistoryStorage(db_path)


def test_a_file_that_is_not_a_database_raises_history_storage_error(tmp_path: Path) -> None:
    bogus = tmp_path / "history.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(HistoryStorageError, match="history"):
        HistoryStorage(bogus)


def test_opens_agent_written_database_unchanged(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.executescript(AGENT_SCHEMA)
    conn.execute("INSERT INTO history (prompt, cwd) VALUES ('written by the agent', '/w')")
    conn.commit()
    conn.close()
    schema_before = raw_rows(db_path, "SELECT type, name, sql FROM sqlite_master ORDER BY name")
    changes_before = raw_rows(db_path, "PRAGMA schema_version")

    with HistoryStorage(db_path) as storage:
        assert prompts_of(storage.search("agent")) == ["written by the agent"]
        assert storage.recent(1)[0].cwd == "/w"
        add_all(storage, "written by sessionfs")
        assert prompts_of(storage.search("written")) == [
            "written by sessionfs",
            "written by the agent",
        ]

    assert raw_rows(db_path, "SELECT type, name, sql FROM sqlite_master ORDER BY name") == (
        schema_before
    )
    assert raw_rows(db_path, "PRAGMA schema_version") == changes_before


def test_rebuilds_the_index_when_history_fts_was_dropped(db_path: Path) -> None:
    with HistoryStorage(db_path) as storage:
        add_all(storage, "alpha one", "beta two", "alpha three")
    conn = sqlite3.connect(db_path)
    conn.executescript("DROP TRIGGER history_ai; DROP TABLE history_fts;")
    conn.close()

    with HistoryStorage(db_path) as storage:
        assert prompts_of(storage.search("alpha")) == ["alpha three", "alpha one"]
        add_all(storage, "alpha four")  # the trigger is back too
        assert len(storage.search("alpha")) == 3
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO history_fts(history_fts) VALUES('integrity-check')")
    conn.close()


def test_reopen_keeps_data_and_seeds_the_duplicate_filter(db_path: Path) -> None:
    with HistoryStorage(db_path) as storage:
        add_all(storage, "first", "second", cwd="/p")
    with HistoryStorage(db_path) as storage:
        assert [(e.prompt, e.cwd) for e in storage.recent()] == [("second", "/p"), ("first", "/p")]
        add_all(storage, "second")  # same as the last stored prompt: ignored
        add_all(storage, "first")  # not consecutive: recorded
        assert prompts_of(storage.recent()) == ["first", "second", "first"]


# -- add -----------------------------------------------------------------------------


def test_add_trims_and_ignores_empty_and_consecutive_duplicates(store: HistoryStorage) -> None:
    add_all(store, "  hello  ", "hello", "\thello\n", "", "   ", "\n", "world", "hello", "hello")
    assert prompts_of(store.recent()) == ["hello", "world", "hello"]


def test_add_records_cwd_and_a_current_timestamp(store: HistoryStorage) -> None:
    import time

    before = int(time.time())
    add_all(store, "with cwd", cwd="/work/project")
    add_all(store, "without cwd")
    newest, older = store.recent()
    assert (older.prompt, older.cwd) == ("with cwd", "/work/project")
    assert newest.cwd is None
    assert before <= older.created_at <= int(time.time()) + 1


def test_many_adds_are_batched_and_all_land(store: HistoryStorage) -> None:
    add_all(store, *(f"prompt number {i}" for i in range(3000)))
    assert len(raw_rows(store.path)) == 3000
    assert prompts_of(store.recent(2)) == ["prompt number 2999", "prompt number 2998"]


def test_close_waits_for_pending_prompts(db_path: Path) -> None:
    storage = HistoryStorage(db_path)
    for i in range(500):
        storage.add(f"pending {i}")
    storage.close()
    assert len(raw_rows(db_path)) == 500
    storage.close()  # idempotent


def test_add_after_close_is_dropped_with_a_warning(db_path: Path, caplog) -> None:
    storage = HistoryStorage(db_path)
    storage.close()
    with caplog.at_level(logging.WARNING, logger="core.history"):
        storage.add("too late")
    assert "closed" in caplog.text
    assert raw_rows(db_path) == []


def test_a_failing_insert_is_logged_and_never_raised(store: HistoryStorage, caplog) -> None:
    conn = sqlite3.connect(store.path)
    conn.execute(
        "CREATE TRIGGER reject_boom BEFORE INSERT ON history WHEN new.prompt = 'boom'"
        " BEGIN SELECT RAISE(ABORT, 'rejected by test'); END"
    )
    conn.commit()
    conn.close()
    with caplog.at_level(logging.WARNING, logger="core.history"):
        store.add("before")
        store.add("boom")  # must not raise
        store.add("after")
        assert store.flush(timeout=30)
    assert "rejected by test" in caplog.text
    # The bad row failed alone: the rest of its batch was still recorded.
    assert sorted(prompts_of(store.recent())) == ["after", "before"]


def test_an_unwritable_database_does_not_raise_into_add(db_path: Path, caplog) -> None:
    storage = HistoryStorage(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute("DROP TABLE history")  # the writer's INSERT now fails
    conn.commit()
    conn.close()
    with caplog.at_level(logging.ERROR, logger="core.history"):
        storage.add("lost but harmless")
        assert storage.flush(timeout=30)
        storage.close()
    assert "could not record" in caplog.text


# -- reading -------------------------------------------------------------------------


def test_recent_is_newest_first_by_time_then_id(store: HistoryStorage) -> None:
    insert_raw(
        store.path,
        [
            ("old", 1000, None),
            ("newest", 3000, None),
            ("middle a", 2000, None),
            ("middle b", 2000, None),
        ],
    )
    assert prompts_of(store.recent()) == ["newest", "middle b", "middle a", "old"]


def test_out_of_order_clock_still_gives_newest_first(store: HistoryStorage) -> None:
    # Ids rise but one later row has an earlier time (a clock stepped back): the
    # fast id-ordered page must be rejected and the exact order used.
    rows = [(f"note {i}", 10_000 + i, None) for i in range(50)]
    rows.append(("note stepped back", 500, None))
    rows += [(f"note late {i}", 20_000 + i, None) for i in range(3)]
    insert_raw(store.path, rows)
    expected = sorted(
        ((created, i + 1, prompt) for i, (prompt, created, _) in enumerate(rows)), reverse=True
    )
    for limit in (1, 3, 4, 10, 54, 100):
        assert prompts_of(store.recent(limit)) == [p for _, _, p in expected[:limit]]
        assert prompts_of(store.search("note", limit)) == [p for _, _, p in expected[:limit]]
    # A timestamp far in the past placed among the newest ids must sink to the end.
    insert_raw(store.path, [("note ancient", 1, None)])
    assert store.recent(1)[0].prompt == "note late 2"
    assert store.search("note", 1000)[-1].prompt == "note ancient"


def test_limits_are_clamped_to_0_1000(store: HistoryStorage) -> None:
    insert_raw(store.path, [(f"entry {i}", 1000 + i, None) for i in range(1100)])
    assert store.recent(0) == []
    assert store.recent(-5) == []
    assert len(store.recent(3)) == 3
    assert len(store.recent(5000)) == 1000
    assert store.search("entry", 0) == []
    assert store.search("entry", -1) == []
    assert len(store.search("entry", 10**9)) == 1000
    assert store.search("entry", 2)[0].prompt == "entry 1099"


def test_search_matches_word_prefixes_and_requires_every_word(store: HistoryStorage) -> None:
    add_all(store, "refactor the parser", "fix parsing bug", "write parser tests", "unrelated")
    assert prompts_of(store.search("pars")) == [
        "write parser tests",
        "fix parsing bug",
        "refactor the parser",
    ]
    assert prompts_of(store.search("pars test")) == ["write parser tests"]
    assert prompts_of(store.search("PARSER  Refactor")) == ["refactor the parser"]
    assert store.search("arser") == []  # prefixes, not substrings
    assert store.search("parser nothing") == []
    assert store.search("   ") == []
    assert store.search("") == []


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        '"unbalanced',
        "*",
        "**",
        "AND",
        "OR",
        "NOT",
        "a AND",
        "NEAR(",
        "NEAR(a b",
        "-",
        "-rf",
        "^start",
        "prompt:",
        "col:value",
        "(",
        ")",
        "{a b}",
        "+",
        "a\x00b",
        "\x00",
        "日本語",
        "emoji 🎉",
        "\ud800",  # a lone surrogate cannot even be encoded
        "x" * 5000,
    ],
)
def test_hostile_queries_never_raise(store: HistoryStorage, query: str) -> None:
    add_all(store, 'rm -rf * "quoted" AND NEAR(x y) ^caret prompt:col 日本語 🎉 {a b}')
    result = store.search(query)
    assert isinstance(result, list)


def test_fts_syntax_in_user_text_is_searched_literally(store: HistoryStorage) -> None:
    add_all(
        store,
        "use AND between terms",
        "the NEAR(x, y) operator",
        'say "hello" loudly',
        "rm -rf build",
        "naïve café in 東京",
        "order more tea",
    )
    assert prompts_of(store.search("AND")) == ["use AND between terms"]
    assert prompts_of(store.search("NEAR(")) == ["the NEAR(x, y) operator"]
    assert prompts_of(store.search('"hello"')) == ['say "hello" loudly']
    assert prompts_of(store.search("-rf")) == ["rm -rf build"]
    assert prompts_of(store.search("NAÏVE")) == ["naïve café in 東京"]
    assert prompts_of(store.search("東京")) == ["naïve café in 東京"]
    assert prompts_of(store.search("OR")) == ["order more tea"]  # a word prefix, not OR


def test_history_match_query_quotes_each_token_with_a_prefix_star() -> None:
    assert history_match_query('fix "the" bug*') == '"fix"* """the"""* "bug*"*'
    assert history_match_query(" \t\n") is None
    assert history_match_query("a\x00b") == '"a"* "b"*'


def test_broken_database_read_returns_empty_and_logs(store: HistoryStorage, caplog) -> None:
    add_all(store, "something")
    conn = sqlite3.connect(store.path)
    conn.executescript("DROP TRIGGER history_ai; DROP TABLE history_fts; DROP TABLE history;")
    conn.close()
    with caplog.at_level(logging.ERROR, logger="core.history"):
        assert store.search("something") == []
        assert store.recent() == []
    assert "search failed" in caplog.text
    assert "recent failed" in caplog.text


def test_reads_after_close_return_empty(db_path: Path) -> None:
    storage = HistoryStorage(db_path)
    add_all(storage, "x")
    storage.close()
    assert storage.recent() == []
    assert storage.search("x") == []


# -- several processes ---------------------------------------------------------------

WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    from core.history import HistoryStorage
    db, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    storage = HistoryStorage(db)
    for i in range(count):
        storage.add(f"{tag} prompt {i}", cwd="/" + tag)
        if i % 25 == 24:
            storage.flush()  # many small transactions, so the two processes interleave
    storage.close()
    """
)


def test_two_writer_processes_lose_nothing(db_path: Path) -> None:
    HistoryStorage(db_path).close()  # both children open an existing file
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER_SCRIPT, str(db_path), tag, "1000"],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("alpha", "beta")
    ]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert "could not record" not in err

    rows = raw_rows(db_path)
    assert len(rows) == 2000
    assert len({prompt for _, prompt, _, _ in rows}) == 2000
    with HistoryStorage(db_path) as storage:
        assert len(storage.search("alpha", 1000)) == 1000
        assert len(storage.search("beta prompt", 1000)) == 1000
        assert {e.cwd for e in storage.search("beta", 1000)} == {"/beta"}
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO history_fts(history_fts) VALUES('integrity-check')")
    conn.close()


# -- line format ---------------------------------------------------------------------


def test_format_history_line_is_one_line_of_three_fields() -> None:
    entry = HistoryEntry(7, "line one\nline two\twith tab \\ and\r\nend", 1771237230, "/w/a\tb")
    line = format_history_line(entry)
    assert "\n" not in line and "\r" not in line
    when, cwd, prompt = line.split("\t")
    assert when == "2026-02-16T10:20:30Z"
    assert unescape_history_field(cwd) == "/w/a\tb"
    assert unescape_history_field(prompt) == entry.prompt
    assert prompt == "line one\\nline two\\twith tab \\\\ and\\r\\nend"


def test_format_history_line_without_cwd() -> None:
    assert format_history_line(HistoryEntry(1, "hi", 0, None)) == "1970-01-01T00:00:00Z\t-\thi"


def test_history_entry_is_frozen() -> None:
    entry = HistoryEntry(1, "p", 0, None)
    with pytest.raises(AttributeError):
        entry.prompt = "changed"  # type: ignore[misc]
