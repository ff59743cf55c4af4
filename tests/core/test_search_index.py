"""core.search_index: the full-text index over every session's messages.

Sessions are written as JSONL by the tests themselves (the index must read what the
agents write, not what core's manager writes), appended to, torn, truncated, replaced
and deleted the way other processes do it while the index is live.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from core import search_index
from core.jsonl import load_entries_from_file
from core.migrate import migrate_session_entries
from core.paths import ms_to_iso
from core.search_index import Hit, SearchIndex, format_hit, parse_query
from core.search_index import index as index_module
from core.search_index import rows as rows_module
from core.search_index import schema as schema_module
from core.search_index import terms as terms_module

PROJECT = "--work-demo--"
_stamp = iter(range(1_760_000_000_000, 1_800_000_000_000, 1000))


def iso(ms: int) -> str:
    return ms_to_iso(ms)


def header(session_id: str = "sess-1", version: int = 3) -> dict[str, Any]:
    return {
        "type": "session",
        "version": version,
        "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/work/demo",
    }


def message(entry_id: str, role: str, content: Any, ms: int | None = None, **extra: Any) -> dict:
    ms = next(_stamp) if ms is None else ms
    return {
        "type": "message",
        "id": entry_id,
        "parentId": None,
        "timestamp": iso(ms),
        "message": {"role": role, "content": content, "timestamp": ms, **extra},
    }


def user(entry_id: str, text: str, ms: int | None = None) -> dict:
    return message(entry_id, "user", [{"type": "text", "text": text}], ms)


def lines(*objects: dict) -> bytes:
    return b"".join(orjson.dumps(obj) + b"\n" for obj in objects)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "sessions" / PROJECT).mkdir(parents=True)
    return tmp_path / "sessions"


@pytest.fixture
def index(tmp_path: Path):
    with SearchIndex(tmp_path / "cache" / "search.db") as idx:
        yield idx


def write_session(root: Path, name: str, *entries: dict, session_id: str = "sess-1") -> Path:
    path = root / PROJECT / f"{name}.jsonl"
    path.write_bytes(lines(header(session_id), *entries))
    return path


def ids(hits: list[Hit]) -> list[str]:
    return [hit.entry_id for hit in hits]


# --- indexing and searching -----------------------------------------------------------------


def test_every_kind_of_message_is_found_with_its_role_and_place(root, index):
    write_session(
        root,
        "s1",
        user("u1", "please refactor the parser"),
        message(
            "a1",
            "assistant",
            [
                {
                    "type": "thinking",
                    "thinking": "the tokenizer looks fragile",
                    "thinkingSignature": "SIGXYZ",
                },
                {"type": "text", "text": "I will read it first"},
                {
                    "type": "toolCall",
                    "id": "c1",
                    "name": "grepper",
                    "arguments": {"pattern": "needle_arg"},
                },
            ],
        ),
        message(
            "r1",
            "toolResult",
            [{"type": "text", "text": "found widgetry here"}],
            toolCallId="c1",
            toolName="grepper",
        ),
        message("b1", "bashExecution", None, command="make lintcheck", output="all cleanish"),
        message("p1", "pythonExecution", None, code="print(snakeoil)", output="oily"),
        message("i1", "user", [{"type": "image", "data": "blob:sha256:" + "a" * 64}]),
        {
            "type": "custom_message",
            "id": "m1",
            "parentId": None,
            "timestamp": iso(next(_stamp)),
            "customType": "note",
            "content": "remember the milkshake",
            "display": True,
        },
        {
            "type": "compaction",
            "id": "k1",
            "parentId": None,
            "timestamp": iso(next(_stamp)),
            "summary": "we compacted the zeppelin",
            "firstKeptEntryId": "u1",
            "tokensBefore": 5,
        },
        {
            "type": "branch_summary",
            "id": "s9",
            "parentId": None,
            "timestamp": iso(next(_stamp)),
            "fromId": "root",
            "summary": "abandoned the submarine",
        },
        {
            "type": "thinking_level_change",
            "id": "t1",
            "parentId": None,
            "timestamp": iso(next(_stamp)),
            "thinkingLevel": "parser",
        },
    )
    stats = index.update(root)
    assert stats.error is None and stats.files_indexed == 1 and stats.entries_indexed == 8
    expect = {
        "refactor": ("u1", "user"),
        "fragile": ("a1", "assistant"),
        "grepper": ("a1", "assistant"),
        "needle_arg": ("a1", "assistant"),
        "widgetry": ("r1", "toolResult"),
        "lintcheck": ("b1", "bashExecution"),
        "cleanish": ("b1", "bashExecution"),
        "snakeoil": ("p1", "pythonExecution"),
        "milkshake": ("m1", "custom_message"),
        "zeppelin": ("k1", "compaction"),
        "submarine": ("s9", "branch_summary"),
    }
    for word, (entry_id, role) in expect.items():
        hits = index.search(word)
        assert [(h.entry_id, h.role) for h in hits] == [(entry_id, role)], word
        assert hits[0].project == PROJECT and hits[0].stem == "s1"
        assert word.split("_")[0] in hits[0].snippet.lower()
    # Not text: signatures, blob refs, entry kinds without messages.
    assert index.search("SIGXYZ") == [] and index.search("sha256") == []
    assert ids(index.search("parser")) == ["u1"]


def test_hits_are_newest_first_across_files_and_limited(root, index):
    base = 1_760_000_000_000
    # Times interleave between the files and span several of the index's time buckets.
    write_session(
        root,
        "old",
        *(user(f"a{i}", f"shared word {i}", base + i * 3_600_000 * 2) for i in range(5)),
    )
    write_session(
        root,
        "new",
        *(user(f"b{i}", f"shared word {i}", base + i * 3_600_000 * 2 + 1) for i in range(5)),
        session_id="sess-2",
    )
    index.update(root)
    hits = index.search("shared")
    assert [h.timestamp_ms for h in hits] == sorted((h.timestamp_ms for h in hits), reverse=True)
    assert ids(hits) == ["b4", "a4", "b3", "a3", "b2", "a2", "b1", "a1", "b0", "a0"]
    assert ids(index.search("shared", limit=3)) == ["b4", "a4", "b3"]
    assert index.search("shared", limit=0) == []


def test_order_inside_one_time_bucket_follows_timestamps_not_file_order(root, index):
    base = 1_760_000_000_000
    write_session(root, "s", user("late", "word", base + 5000), user("early", "word", base))
    write_session(root, "t", user("mid", "word", base + 2000), session_id="s2")
    index.update(root)
    assert ids(index.search("word")) == ["late", "mid", "early"]
    assert ids(index.search("word", limit=1)) == ["late"]
    assert ids(index.search("word", limit=2)) == ["late", "mid"]


def test_words_are_anded_phrases_kept_and_the_last_word_is_a_prefix(root, index):
    write_session(
        root,
        "s",
        user("e1", "the quick brown fox"),
        user("e2", "brown quick dogs"),
        user("e3", "quickly done"),
        user("e4", "session_manager.append(entry)"),
    )
    index.update(root)
    assert set(ids(index.search("quick brown"))) == {"e1", "e2"}
    assert ids(index.search('"quick brown"')) == ["e1"]
    assert ids(index.search('"brown quick"')) == ["e2"]
    assert set(ids(index.search("quick"))) == {"e1", "e2", "e3"}  # prefix on the last word
    assert set(ids(index.search("quick dog"))) == {"e2"}
    assert ids(index.search("quick fox done")) == []
    assert ids(index.search('"quick"')) == ["e2", "e1"]  # a quoted word is exact
    assert ids(index.search("dogs brown")) == ["e2"]
    assert ids(index.search("session_manager")) == ["e4"]
    assert ids(index.search("manager.append")) == ["e4"]
    assert ids(index.search("QUICK BROWN FOX")) == ["e1"]
    assert ids(index.search("qui")) == ["e3", "e2", "e1"]
    assert ids(index.search("qu")) == []  # 1-2 characters: a whole word, not a prefix


HOSTILE = [
    "",
    " ",
    "\x00",
    "a\x00b",
    '"',
    '""',
    '"""',
    'unbalanced "quote',
    "*",
    "**",
    "^",
    "-",
    "NEAR(a b)",
    "a NEAR b",
    "a AND b",
    "a OR b",
    "NOT a",
    "a:b",
    "role:user",
    "text:x",
    "{text}: x",
    "(",
    ")",
    "a)",
    "+",
    "x" * 10_000,
    "word " * 2000,
    "!@#$%^&*()_+-=[]{};':,./<>?",
    "\ud800",
    "é",
    "日本語",
    "\t\n\r",
    "'",
    "a'b",
    "\\",
    "%",
    "_",
    "col:*",
    "NEAR/2",
    # Shapes whose cost grows with the query (see core.search_index.plan_query).
    '"' + "word " * 2000 + '"',
    '"' + "a\u00b7" * 5000 + '"',
    " ".join(f'"a{n} b{n}"' for n in range(100)),
    '"' + "the a to " * 1000 + '" wor',
    '"e\u0301' * 3000,
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_raise(root, index, query):
    write_session(root, "s", user("e1", "a b word role user text x"))
    index.update(root)
    assert isinstance(index.search(query), list)


def test_fts_syntax_is_searched_as_words(root, index):
    write_session(
        root,
        "s",
        user("e1", "alpha only"),
        user("e2", "gamma only"),
        user("e3", "alpha OR gamma spelled out"),
        user("e4", "the role user said"),
        user("e5", "role"),
    )
    index.update(root)
    assert ids(index.search("alpha OR gamma")) == ["e3"]  # not an OR
    assert ids(index.search("alpha NOT gamma")) == []  # NOT is a word here
    assert ids(index.search("role:user")) == ["e4"]  # not a column filter
    assert ids(index.search('unbalanced "role user')) == []
    assert ids(index.search('the "role user')) == ["e4"]  # an open quote runs to the end
    assert ids(index.search("*")) == [] and ids(index.search("^ $")) == []
    assert ids(index.search("alpha\x00only")) == ["e1"]  # NUL separates words
    assert set(ids(index.search("x" * 10_000))) == set()


def test_parse_query_terms():
    terms = parse_query('  fix "the parser"  bug ')
    assert [(t.text, t.phrase, t.prefix) for t in terms] == [
        ("fix", False, False),
        ("the parser", True, False),
        ("bug", False, True),
    ]
    assert parse_query('"only a phrase"')[-1].prefix is False
    assert parse_query("!!! ???") == []
    assert parse_query("fix it")[-1].prefix is False
    assert len(parse_query("w " * 500)) == 64


def test_format_hit_is_one_line_of_four_fields():
    hit = Hit(1_760_000_000_123, PROJECT, "s1", "abcd1234", "user", "a\tb\nc\r d")
    line = format_hit(hit, "sessions/--work-demo--/s1/entries/abcd1234.json")
    assert line == (
        "2025-10-09T08:53:20.123Z\tsessions/--work-demo--/s1/entries/abcd1234.json\tuser\ta b c  d"
    )
    assert "\n" not in line and line.count("\t") == 3


def test_sub_agent_session_files_are_indexed_under_their_session(root, index):
    write_session(root, "parent", user("p1", "delegate the work"))
    task_dir = root / PROJECT / "parent"
    task_dir.mkdir()
    (task_dir / "task-1.jsonl").write_bytes(
        lines(
            header("sub-1"),
            {
                "type": "session_init",
                "id": "i1",
                "parentId": None,
                "timestamp": iso(next(_stamp)),
                "systemPrompt": "secret system prompt",
                "task": "audit the hyperdrive",
                "tools": [],
            },
            user("s1", "subagent digs tunnels"),
        )
    )
    (task_dir / "output.txt").write_text("tunnels in a tool output file")
    index.update(root)
    assert [(h.stem, h.entry_id) for h in index.search("tunnels")] == [("parent/task-1", "s1")]
    assert [(h.stem, h.role) for h in index.search("hyperdrive")] == [
        ("parent/task-1", "session_init")
    ]
    assert index.search("secret") == []


# --- incremental updates ---------------------------------------------------------------------


def test_unchanged_files_are_not_read_again(root, index):
    write_session(root, "s", user("e1", "hello"))
    write_session(root, "t", user("e2", "hello"), session_id="s2")
    first = index.update(root)
    assert first.files_indexed == 2 and first.bytes_read > 0
    again = index.update(root)
    assert (again.files_seen, again.files_unchanged, again.bytes_read, again.entries_indexed) == (
        2,
        2,
        0,
        0,
    )


def test_appended_lines_are_read_alone(root, index):
    path = write_session(root, "s", user("e1", "first words"))
    index.update(root)
    extra = lines(user("e2", "second words"), user("e3", "third words"))
    with path.open("ab") as fh:
        fh.write(extra)
    stats = index.update(root)
    assert (stats.files_appended, stats.files_indexed) == (1, 0)
    assert stats.bytes_read == len(extra) and stats.entries_indexed == 2
    assert ids(index.search("words")) == ["e3", "e2", "e1"]


def test_a_torn_last_line_waits_for_its_newline(root, index):
    path = write_session(root, "s", user("e1", "complete line"))
    index.update(root)
    torn = orjson.dumps(user("e2", "torn line"))
    with path.open("ab") as fh:
        fh.write(torn[:20])
    assert index.update(root).entries_indexed == 0
    assert ids(index.search("line")) == ["e1"]
    with path.open("ab") as fh:
        fh.write(torn[20:] + b"\n")
    stats = index.update(root)
    assert stats.files_appended == 1 and stats.bytes_read == len(torn) + 1
    assert ids(index.search("torn")) == ["e2"]


def test_a_truncated_file_is_reindexed(root, index):
    path = write_session(root, "s", user("e1", "keep this"), user("e2", "drop this"))
    index.update(root)
    path.write_bytes(lines(header(), user("e1", "keep this")))
    stats = index.update(root)
    assert stats.files_indexed == 1
    assert ids(index.search("this")) == ["e1"]
    assert index.search("drop") == []


def test_a_file_rewritten_in_place_is_reindexed(root, index):
    path = write_session(root, "s", user("e1", "original start"), user("e2", "original end"))
    inode = path.stat().st_ino
    index.update(root)
    # Same inode, same head, longer: only the fingerprint of the indexed tail tells.
    path.write_bytes(
        lines(
            header(),
            user("e1", "original start"),
            user("e2", "changed ending"),
            user("e3", "and more"),
        )
    )
    assert path.stat().st_ino == inode
    stats = index.update(root)
    assert stats.files_indexed == 1 and stats.files_appended == 0
    assert index.search("original end") == []
    assert set(ids(index.search("changed"))) == {"e2"}


def test_a_file_replaced_by_rename_is_reindexed(root, index):
    path = write_session(root, "s", user("e1", "before rename"))
    index.update(root)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(lines(header(), user("e1", "before rename"), user("e9", "after rename")))
    os.replace(tmp, path)
    stats = index.update(root)
    assert stats.files_indexed == 1
    assert ids(index.search("rename")) == ["e9", "e1"]


def test_a_deleted_file_loses_its_hits(root, index):
    path = write_session(root, "s", user("e1", "ephemeral words"))
    write_session(root, "t", user("e2", "lasting words"), session_id="s2")
    index.update(root)
    path.unlink()
    stats = index.update(root)
    assert stats.files_removed == 1
    assert ids(index.search("words")) == ["e2"]


def test_update_of_named_paths_only(root, index):
    a = write_session(root, "a", user("e1", "alpha"))
    write_session(root, "b", user("e2", "bravo"), session_id="s2")
    stats = index.update(root, [a])
    assert stats.files_indexed == 1 and index.search("bravo") == []
    a.unlink()
    assert index.update(root, [a]).files_removed == 1
    assert index.search("alpha") == []
    assert index.update(root, ["/elsewhere/x.jsonl"]).skipped


def test_a_changed_line_is_not_shown_before_the_next_update(root, index):
    path = write_session(root, "s", user("e1", "stale words"), user("e2", "fresh words"))
    index.update(root)
    data = path.read_bytes().replace(b"stale words", b"stole words")
    path.write_bytes(data)
    assert ids(index.search("words")) == ["e2"]


def test_dead_rows_trigger_a_rebuild(root, index, monkeypatch):
    monkeypatch.setattr(index_module, "_MIN_DEAD_FOR_REBUILD", 2)
    path = write_session(root, "s", *(user(f"e{i}", f"word {i}") for i in range(4)))
    index.update(root)
    path.write_bytes(lines(header(), user("n1", "word new")))
    index.update(root)  # 4 dead rows, 1 live: rebuilt on the next update
    stats = index.update(root)
    assert stats.rebuilt and stats.files_indexed == 1
    assert ids(index.search("word")) == ["n1"]


# --- v1 files ----------------------------------------------------------------------------------


def test_v1_ids_are_the_ids_core_migration_derives(real_fixture_copy, index):
    root = real_fixture_copy.parent.parent
    index.update(root)
    expected = load_entries_from_file(real_fixture_copy)
    migrate_session_entries(expected)
    users = [
        e for e in expected[1:] if e.get("type") == "message" and e["message"].get("role") == "user"
    ]
    assert users
    all_ids = {e["id"] for e in expected[1:]}
    hits = index.search("the", limit=1000)
    assert hits and {h.entry_id for h in hits} <= all_ids
    for entry in users[:5]:
        text = entry["message"]["content"][0]["text"]
        words = [w for w in text.split() if w.isalpha() and len(w) > 3][:3]
        if words:
            assert entry["id"] in ids(index.search(" ".join(words), limit=1000))


def test_a_grown_v1_file_is_reindexed_whole(root, index):
    v1 = [
        {"type": "session", "id": "old", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"},
        {
            "type": "message",
            "timestamp": iso(next(_stamp)),
            "message": {"role": "user", "content": "legacy words"},
        },
    ]
    path = root / PROJECT / "v1.jsonl"
    path.write_bytes(lines(*v1))
    index.update(root)
    with path.open("ab") as fh:
        fh.write(
            lines(
                {
                    "type": "message",
                    "timestamp": iso(next(_stamp)),
                    "message": {"role": "hookMessage", "content": "hooked words"},
                }
            )
        )
    stats = index.update(root)
    assert stats.files_indexed == 1 and stats.files_appended == 0
    expected = load_entries_from_file(path)
    migrate_session_entries(expected)
    assert ids(index.search("words")) == [expected[2]["id"], expected[1]["id"]]
    assert index.search("hooked")[0].role == "custom"


# --- the cache file ------------------------------------------------------------------------------


def test_a_garbage_db_file_is_rebuilt(root, tmp_path):
    db = tmp_path / "cache" / "search.db"
    db.parent.mkdir()
    db.write_bytes(os.urandom(8192))
    write_session(root, "s", user("e1", "survives garbage"))
    with SearchIndex(db) as idx:
        assert idx.available
        assert idx.update(root).error is None
        assert ids(idx.search("garbage")) == ["e1"]


def test_a_foreign_sqlite_db_is_not_trusted(root, tmp_path):
    db = tmp_path / "search.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE files (precious TEXT)")
    conn.execute("INSERT INTO files VALUES ('x')")
    conn.commit()
    conn.close()
    write_session(root, "s", user("e1", "fresh index"))
    with SearchIndex(db) as idx:
        idx.update(root)
        assert ids(idx.search("fresh")) == ["e1"]
    with SearchIndex(db) as idx:  # ours now: reopened as is, nothing reindexed
        assert idx.update(root).files_unchanged == 1


def test_an_older_schema_version_is_rebuilt(root, tmp_path):
    db = tmp_path / "search.db"
    write_session(root, "s", user("e1", "versioned"))
    with SearchIndex(db) as idx:
        idx.update(root)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={search_index.SCHEMA_VERSION + 1}")
    conn.close()
    with SearchIndex(db) as idx:
        assert idx.update(root).files_indexed == 1
        assert ids(idx.search("versioned")) == ["e1"]


def test_an_index_corrupted_while_open_recovers_on_update(root, tmp_path):
    db = tmp_path / "search.db"
    write_session(root, "s", *(user(f"e{i}", f"padding words {i} " * 200) for i in range(50)))
    with SearchIndex(db) as idx:
        idx.update(root)
        with open(db, "r+b") as fh:  # wreck every page after the first
            fh.seek(4096)
            fh.write(os.urandom(os.path.getsize(db) - 4096))
        assert isinstance(idx.search("padding"), list)
        write_session(root, "s", user("n1", "after corruption"))
        idx.update(root)
        idx.update(root)
        assert idx.available
        assert ids(idx.search("corruption")) == ["n1"]


def test_an_unwritable_cache_dir_makes_the_index_unavailable(root, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache dir should be")
    write_session(root, "s", user("e1", "hello"))
    idx = SearchIndex(blocker / "search.db")
    assert not idx.available and idx.unavailable_reason
    assert idx.search("hello") == []
    assert idx.update(root).error
    idx.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_a_read_only_cache_dir_makes_the_index_unavailable(root, tmp_path):
    cache = tmp_path / "ro"
    cache.mkdir(mode=0o555)
    try:
        idx = SearchIndex(cache / "search.db")
        assert not idx.available and idx.search("x") == []
        idx.close()
    finally:
        cache.chmod(0o755)


def test_read_only_mode_searches_and_never_writes(root, tmp_path):
    db = tmp_path / "search.db"
    missing = SearchIndex(tmp_path / "none.db", read_only=True)
    assert not missing.available and missing.search("x") == []
    assert not (tmp_path / "none.db").exists()
    missing.close()
    write_session(root, "s", user("e1", "readable"))
    with SearchIndex(db) as idx:
        idx.update(root)
    with SearchIndex(db, read_only=True) as ro:
        assert ids(ro.search("readable")) == ["e1"]
        assert ro.update(root).error


def test_a_full_disk_makes_the_index_unavailable_not_crash(root, tmp_path, monkeypatch):
    db = tmp_path / "search.db"
    real_connect = SearchIndex._connect

    def tiny_connect(self: SearchIndex) -> sqlite3.Connection:
        conn = real_connect(self)
        conn.execute("PRAGMA max_page_count=12")  # SQLITE_FULL past 48 KiB
        return conn

    monkeypatch.setattr(SearchIndex, "_connect", tiny_connect)
    write_session(root, "s", *(user(f"e{i}", f"filler {i} " * 300) for i in range(100)))
    with SearchIndex(db) as idx:
        stats = idx.update(root)
        assert stats.error and "full" in stats.error
        assert not idx.available and "full" in (idx.unavailable_reason or "")
        assert idx.search("filler") == []
        monkeypatch.setattr(SearchIndex, "_connect", real_connect)  # space freed
        assert idx.update(root).error is None
        assert idx.available and len(idx.search("filler")) == 100


def test_a_reader_and_an_indexer_in_other_threads(root, tmp_path):
    db = tmp_path / "search.db"
    for n in range(20):
        write_session(
            root,
            f"s{n}",
            *(user(f"e{n}x{i}", f"common words {i}") for i in range(30)),
            session_id=f"id{n}",
        )
    errors: list[BaseException] = []
    with SearchIndex(db) as writer, SearchIndex(db) as reader:

        def search_loop() -> None:
            try:
                for _ in range(50):
                    reader.search("common")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        thread = threading.Thread(target=search_loop)
        thread.start()
        stats = writer.update(root)
        thread.join(timeout=30)
        assert not errors and stats.error is None
        assert len(reader.search("common", limit=1000)) == 600


def test_files_are_read_and_inserted_in_slices(root, index, monkeypatch):
    # Tiny slices: lines straddle every read boundary; hits only appear when each
    # line's offset and length are exactly right (the snippet re-reads the line).
    monkeypatch.setattr(rows_module, "_READ_CHUNK", 7)
    monkeypatch.setattr(schema_module, "_INSERT_CHARS", 10)
    entries = [user(f"e{i}", f"sliced word number{i} " + "pad " * i) for i in range(30)]
    path = write_session(root, "s", *entries)
    stats = index.update(root)
    assert stats.bytes_read == path.stat().st_size and stats.entries_indexed == 30
    hits = index.search("sliced", limit=100)
    assert ids(hits) == [f"e{i}" for i in reversed(range(30))]
    assert all(f"number{hit.entry_id[1:]}" in hit.snippet for hit in hits)
    with path.open("ab") as fh:
        fh.write(lines(user("late", "sliced late")))
    assert index.update(root).entries_indexed == 1
    assert ids(index.search("sliced", limit=1)) == ["late"]


# --- queries too costly for the index alone (core.search_index.plan_query) -------------

LONG_TEXT = (
    "the build failed because the parser could not read the session header and the"
    " retry loop gave up after three attempts so we fixed the header reader first"
)


def _full_query_hits(index: SearchIndex, query: str, monkeypatch) -> list[str]:
    """What the query finds when FTS5 evaluates all of it on the index."""
    with monkeypatch.context() as patch:
        patch.setattr(
            index_module,
            "plan_query",
            lambda terms: search_index.QueryPlan(search_index.build_match_query(terms) or ""),
        )
        return ids(index.search(query))


def test_long_and_many_phrase_queries_find_exactly_what_the_full_query_finds(
    root, index, monkeypatch
):
    words = LONG_TEXT.split()
    write_session(
        root,
        "s",
        user("whole", LONG_TEXT),
        user("twice", LONG_TEXT + " " + LONG_TEXT),
        user("changed", LONG_TEXT.replace("three", "four")),
        user("accents", LONG_TEXT.replace("parser", "pársér").replace("header", "HEADER")),
        user("dotted", "\u00b7".join(words)),
        user("start", " ".join(words[:6])),
    )
    index.update(root)
    queries = [
        f'"{LONG_TEXT}"',
        f'"{LONG_TEXT.replace("three", "four")}"',
        f'"{LONG_TEXT} {LONG_TEXT}"',
        f'"{LONG_TEXT.replace(" ", ".")}"',
        f'"{"·".join(words)}"',
        " ".join(f'"{a} {b}"' for a, b in itertools.pairwise(words)),
        " ".join(f'"{a} {b}"' for a, b in zip(words, words[2:], strict=False)),
        f'"{LONG_TEXT}" hea',  # a prefix after a long phrase
        f'"{" ".join(words[:20])} hea',  # an open quote: a phrase, no prefix
        " ".join(words) + " " + " ".join(f'"{w} {w}"' for w in words[:8]),
    ]
    for query in queries:
        expected = _full_query_hits(index, query, monkeypatch)
        assert ids(index.search(query)) == expected, query
    assert set(ids(index.search(f'"{LONG_TEXT}"'))) == {"whole", "twice", "accents", "dotted"}
    assert ids(index.search(f'"{LONG_TEXT} {LONG_TEXT}"')) == ["twice"]


def test_a_long_phrase_query_runs_a_short_part_on_the_index():
    plan = search_index.plan_query(parse_query('"' + "the a to " * 1000 + '"'))
    assert plan is not None and plan.checks
    assert plan.match.count(" ") < 4  # one run of at most 4 words on the index
    assert plan.checks[-1] == search_index.build_match_query(
        parse_query('"' + "the a to " * 1000 + '"')
    )


def test_repeated_terms_are_searched_once():
    query = search_index.build_match_query(parse_query('fix "a b" fix "a b" fix'))
    assert query == '"fix" "a b" "fix"*'  # the last word is a prefix, not a repeat


def test_a_short_query_runs_whole_on_the_index():
    for query in ("fix the parser", '"the a to and of"', '"a b" "c d" "e f" "g h" word'):
        plan = search_index.plan_query(parse_query(query))
        assert plan is not None and plan.checks == ()


# --- a prefix looked up in the term list (core.search_index.terms) -----------------------

PREFIX_TEXTS = [
    "session sessions sessionfs",
    "the then there therefore",
    "Über alles",
    "uberwald ubiquitous",
    "sés résumé",
    "fix the session cache",
    "a b c",
]
PREFIX_QUERIES = ["ses", "sess", "SESSIONS", "the", "fix the", "übe", "UBE", "sés", "rés", "zzz"]


def _fts5_expansion_hits(index: SearchIndex, query: str, monkeypatch) -> list[str]:
    """What the query finds when FTS5 expands the prefix itself (the term list unused)."""
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "expand_prefix", lambda *args: None)
        return ids(index.search(query, limit=1000))


def _expansions_used(index: SearchIndex, query: str, monkeypatch) -> tuple[str, ...] | None:
    """The expansions of the last term that the search handed to the query planner."""
    seen: list[list[search_index.QueryTerm]] = []
    real = index_module.plan_query
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "plan_query", lambda terms: seen.append(terms) or real(terms))
        index.search(query)
    return seen[-1][-1].expansions if seen else None


def _terms_in_db(index: SearchIndex) -> list[str]:
    conn = sqlite3.connect(index.path)
    try:
        return [row[0] for row in conn.execute("SELECT term FROM terms")]
    finally:
        conn.close()


def test_a_prefix_finds_what_fts5s_own_expansion_finds(root, index, monkeypatch):
    write_session(root, "s", *(user(f"e{i}", text) for i, text in enumerate(PREFIX_TEXTS)))
    index.update(root)
    for query in PREFIX_QUERIES:
        expected = _fts5_expansion_hits(index, query, monkeypatch)
        assert ids(index.search(query, limit=1000)) == expected, query
    assert set(ids(index.search("ses"))) == {"e0", "e4", "e5"}
    assert set(ids(index.search("übe"))) == {"e2", "e3"}  # folded like the index: "ube"


def test_a_prefix_is_looked_up_in_the_term_list_not_left_to_fts5(root, index, monkeypatch):
    write_session(root, "s", *(user(f"e{i}", text) for i, text in enumerate(PREFIX_TEXTS)))
    index.update(root)
    assert _expansions_used(index, "Sess", monkeypatch) == ("session", "sessionfs", "sessions")
    assert _expansions_used(index, "fix the", monkeypatch) == (
        "the",
        "then",
        "there",
        "therefore",
    )
    assert _expansions_used(index, "zzz", monkeypatch) is None  # nothing to plan: no hits
    assert ids(index.search("zzz")) == []


def test_appended_lines_add_their_terms(root, index, monkeypatch):
    path = write_session(root, "s", user("e1", "alpha"))
    index.update(root)
    with path.open("ab") as fh:
        fh.write(lines(user("e2", "alphabet soup")))
    stats = index.update(root)
    assert stats.files_appended == 1
    assert _expansions_used(index, "alph", monkeypatch) == ("alpha", "alphabet")
    assert ids(index.search("alph")) == ["e2", "e1"]
    assert {"alpha", "alphabet", "soup"} <= set(_terms_in_db(index))


def test_a_big_update_rebuilds_the_term_list_at_its_end(root, index, monkeypatch):
    write_session(root, "s1", user("e1", "first words"))
    index.update(root)
    monkeypatch.setattr(index_module, "_BIG_UPDATE_BYTES", 1)
    write_session(root, "s2", user("e2", "second wordsmith"))
    index.update(root)
    assert {"first", "second", "words", "wordsmith"} <= set(_terms_in_db(index))
    assert _expansions_used(index, "word", monkeypatch) == ("words", "wordsmith")
    assert set(ids(index.search("word"))) == {"e1", "e2"}


def test_an_update_stopped_before_the_term_list_is_whole_falls_back_then_recovers(
    root, index, monkeypatch
):
    write_session(root, "s1", user("e1", "first words"))
    index.update(root)
    monkeypatch.setattr(index_module, "_BIG_UPDATE_BYTES", 1)

    def stopped(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O stopped here")

    with monkeypatch.context() as patch:
        patch.setattr(index_module, "rebuild_terms", stopped)
        write_session(root, "s2", user("e2", "second wordsmith"))
        assert index.update(root).error is not None
    # The rows are in, their terms are not: FTS5 expands the prefix meanwhile.
    assert _expansions_used(index, "word", monkeypatch) is None
    assert set(ids(index.search("word"))) == {"e1", "e2"}
    monkeypatch.setattr(index_module, "_BIG_UPDATE_BYTES", 1 << 40)
    index.update(root)  # nothing changed, but the list is made whole
    assert _expansions_used(index, "word", monkeypatch) == ("words", "wordsmith")


def test_a_prefix_with_more_terms_than_the_bound_is_left_to_fts5(root, index, monkeypatch):
    write_session(root, "s", *(user(f"e{i}", f"stem{i:02d}") for i in range(6)))
    index.update(root)
    monkeypatch.setattr(terms_module, "MAX_EXPANSIONS", 5)
    assert _expansions_used(index, "stem", monkeypatch) is None
    assert len(index.search("stem")) == 6
    monkeypatch.setattr(terms_module, "MAX_EXPANSIONS", 6)
    assert len(_expansions_used(index, "stem", monkeypatch) or ()) == 6


def test_a_rebuild_drops_the_terms_of_dropped_rows(root, index, monkeypatch):
    monkeypatch.setattr(index_module, "_MIN_DEAD_FOR_REBUILD", 2)
    path = write_session(root, "s", *(user(f"e{i}", f"gone{i} word") for i in range(4)))
    index.update(root)
    path.write_bytes(lines(header(), user("n1", "word new")))
    index.update(root)
    assert index.update(root).rebuilt
    assert "gone1" not in _terms_in_db(index)
    assert _expansions_used(index, "gon", monkeypatch) is None
    assert ids(index.search("gon")) == []
    assert ids(index.search("wor")) == ["n1"]


def test_read_only_mode_uses_the_term_list(root, tmp_path, monkeypatch):
    db = tmp_path / "search.db"
    write_session(root, "s", *(user(f"e{i}", text) for i, text in enumerate(PREFIX_TEXTS)))
    with SearchIndex(db) as writer:
        writer.update(root)
    with SearchIndex(db, read_only=True) as reader:
        assert _expansions_used(reader, "sess", monkeypatch) == (
            "session",
            "sessionfs",
            "sessions",
        )
        assert set(ids(reader.search("sess"))) == {"e0", "e5"}


def test_the_snippet_starts_near_the_term_when_lowering_changes_the_texts_length(root, index):
    # "İ".lower() is two characters: offsets in the lowered text would be 300 too far.
    write_session(root, "s", user("e1", "İ" * 300 + " the needle is here"))
    index.update(root)
    (hit,) = index.search("needle")
    assert "needle" in hit.snippet and hit.snippet.startswith("…")


def test_the_snippet_starts_near_the_first_term_found(root, index):
    write_session(root, "s", user("e1", "x " * 200 + "Second thing " + "y " * 200 + "FIRST"))
    index.update(root)
    (hit,) = index.search("first second")
    assert hit.snippet.startswith("…") and "Second thing" in hit.snippet


def test_a_build_in_slices_reads_the_term_list_once_at_its_end(root, index, monkeypatch):
    first = write_session(root, "s1", user("e1", "first words"))
    second = write_session(root, "s2", user("e2", "second wordsmith"))
    index.update(root, [first], defer_terms=True)
    index.update(root, [second], defer_terms=True)
    assert _expansions_used(index, "word", monkeypatch) is None  # left to FTS5 meanwhile
    assert set(ids(index.search("word"))) == {"e1", "e2"}
    index.update(root)
    assert _expansions_used(index, "word", monkeypatch) == ("words", "wordsmith")
