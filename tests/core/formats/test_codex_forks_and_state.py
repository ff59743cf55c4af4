"""What Codex 0.17x adds that the reader follows, on files written here in that format:
a fork that copies none of its parent's items (``history_base``), found in the same
Codex home by thread id; the thread title in the state database; which lines'
words the reader reads (`reads_line`)."""

from __future__ import annotations

import os
import sqlite3
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import codex_cli as cx

from core.formats.codex import MAX_FORK_DEPTH, CodexSession, reads_line
from core.formats.codex_dirs import find_rollout, home_of_rollout
from core.formats.codex_state import (
    ARCHIVED_TITLES,
    archived_titles,
    state_database,
    thread_title,
)

PARENT = "01a2470c-0000-7000-8000-00000000000a"
FORK = "01a2470c-0000-7000-8000-00000000000b"
FORK_OF_FORK = "01a2470c-0000-7000-8000-00000000000c"
UNSENT = {"internal_chat_message_metadata_passthrough": {"turn_id": "t1"}}


def _rollout(home: Path, thread_id: str, lines: list[dict[str, Any] | bytes]) -> Path:
    name = f"rollout-2026-03-02T09-00-00-{thread_id}.jsonl"
    path = home / "sessions" / "2026" / "03" / "02" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return cx.write_jsonl(path, lines)


def _forked_meta(thread_id: str, parent: Path, parent_id: str, lines: int) -> dict[str, Any]:
    """A fork's first line: the parent's first ``lines`` lines are its history."""
    offset = sum(len(line) + 1 for line in parent.read_bytes().split(b"\n")[:lines])
    base = {"thread_id": parent_id, "end_ordinal_exclusive": lines, "end_byte_offset": offset}
    return cx.session_meta(0, thread_id, forked_from_id=parent_id, history_base=base)


def _parent(home: Path) -> Path:
    return _rollout(
        home,
        PARENT,
        [
            cx.session_meta(0, PARENT),
            cx.item({**cx.message("user", "parent question"), **UNSENT}, 1),
            cx.item(cx.message("assistant", "parent answer"), 2),
            cx.line("world_state", {"full": True, "state": {}}, 3),
            # after the fork point: never the fork's
            cx.item(cx.message("user", "later parent question"), 4),
        ],
    )


def _open(path: Path) -> CodexSession:
    home = home_of_rollout(path)
    assert home is not None
    return CodexSession(path, find_thread=partial(find_rollout, home))


def test_a_fork_starts_with_its_parents_history_up_to_the_fork(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    fork = _rollout(
        tmp_path,
        FORK,
        [
            _forked_meta(FORK, parent, PARENT, 4),
            cx.item(cx.message("user", "fork question"), 5),
        ],
    )
    session = _open(fork)
    assert session.context()["messages"] == [
        cx.message("user", "parent question"),  # as sent: without Codex's own metadata
        cx.message("assistant", "parent answer"),
        cx.message("user", "fork question"),
    ]
    stem = parent.name.removesuffix(".jsonl")
    assert [m.entry_name for m in session.transcript_messages()] == [
        f"{stem}/000002-response_item-message",
        f"{stem}/000003-response_item-message",
        "000002-response_item-message",
    ]
    assert len(session) == 2  # the parent's lines are not the fork's entries

    # a fork of that fork: both parents' histories, each up to its fork point
    deeper = _rollout(
        tmp_path,
        FORK_OF_FORK,
        [
            _forked_meta(FORK_OF_FORK, fork, FORK, 2),
            cx.item(cx.message("user", "third level"), 6),
        ],
    )
    texts = [m["content"][0]["text"] for m in _open(deeper).context()["messages"]]
    assert texts == ["parent question", "parent answer", "fork question", "third level"]


def test_a_fork_without_its_parent_shows_its_own_items(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    meta = _forked_meta(FORK, parent, PARENT, 4)
    parent.unlink()
    fork = _rollout(tmp_path, FORK, [meta, cx.item(cx.message("user", "fork question"), 5)])
    assert _open(fork).context()["messages"] == [cx.message("user", "fork question")]
    # no way to find threads given: the same
    parent = _parent(tmp_path)
    assert CodexSession(fork).context()["messages"] == [cx.message("user", "fork question")]


def test_a_fork_naming_itself_or_a_cycle_ends(tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    cx.write_jsonl(first, [cx.session_meta(0, FORK)])
    # A names B as its parent, B names A: each read stops at MAX_FORK_DEPTH
    a = _rollout(tmp_path, FORK, [_forked_meta(FORK, first, PARENT, 1)])
    b = _rollout(tmp_path, PARENT, [_forked_meta(PARENT, a, FORK, 1)])
    cx.write_jsonl(a, [_forked_meta(FORK, b, PARENT, 1), cx.item(cx.message("user", "a"), 1)])
    messages = _open(a).context()["messages"]
    assert messages and len(messages) <= MAX_FORK_DEPTH + 1
    selfish = _rollout(tmp_path, FORK_OF_FORK, [_forked_meta(FORK_OF_FORK, a, FORK_OF_FORK, 1)])
    assert _open(selfish).context()["messages"] == []


def test_find_rollout_takes_thread_ids_only(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    archived = tmp_path / "archived_sessions" / f"rollout-2026-01-01T00-00-00-{FORK}.jsonl.zst"
    archived.parent.mkdir()
    cx.write_zst(archived, [cx.session_meta(0, FORK)])
    assert find_rollout(tmp_path, PARENT) == parent
    assert find_rollout(tmp_path, FORK) == archived
    assert home_of_rollout(parent) == home_of_rollout(archived) == tmp_path
    assert home_of_rollout(tmp_path / "elsewhere.jsonl") is None
    for not_an_id in ("*", "../x", f"{PARENT}/..", "", PARENT.upper() + "0"):
        assert find_rollout(tmp_path, not_an_id) is None


def _state_db(home: Path, rows: list[tuple[str, str | None, str]], wal: bool = True) -> Path:
    path = home / "state_5.sqlite"
    with sqlite3.connect(path) as conn:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, title TEXT NOT NULL)")
        conn.executemany("INSERT INTO threads VALUES (?, ?, ?)", rows)
    conn.close()
    return path


def test_thread_title_from_the_state_database(tmp_path: Path) -> None:
    assert thread_title(tmp_path, PARENT) is None  # no database
    db = _state_db(tmp_path, [(PARENT, None, "first prompt"), (FORK, "renamed", "fork prompt")])
    (tmp_path / "state_4.sqlite").write_bytes(b"an older generation: not read")
    assert state_database(tmp_path) == db
    before = sorted(os.listdir(tmp_path))
    assert thread_title(tmp_path, PARENT) == "first prompt"
    assert thread_title(tmp_path, FORK) == "renamed"  # the user's name wins
    assert thread_title(tmp_path, FORK_OF_FORK) is None
    assert sorted(os.listdir(tmp_path)) == before  # read-only: no -wal/-shm made


def test_the_titles_the_archive_keeps_of_the_state_database(tmp_path: Path) -> None:
    """A JSON line per thread with a title, oldest first; in a copy of the dir without
    the database (the archive's), `thread_title` reads them, the last line winning."""
    rows = [
        (PARENT, None, "first prompt"),
        (FORK, "renamed", "fork prompt"),
        (FORK_OF_FORK, None, " "),
    ]
    (tmp_path / "live").mkdir()
    db = _state_db(tmp_path / "live", rows)
    kept = archived_titles(db)
    assert [orjson.loads(line) for line in kept.splitlines()] == [
        {"id": PARENT, "title": "first prompt"},
        {"id": FORK, "title": "renamed"},
    ]
    copy = tmp_path / "archived"
    copy.mkdir()
    (copy / ARCHIVED_TITLES).write_bytes(
        kept + b'not json\n{"id": "%s", "title": "later"}\n' % FORK.encode()
    )
    assert thread_title(copy, PARENT) == "first prompt"
    assert thread_title(copy, FORK) == "later"
    assert thread_title(copy, FORK_OF_FORK) is None
    db.write_bytes(b"junk " * 1000)
    with pytest.raises(OSError):
        archived_titles(db)  # not now: the sync tries again next pass


def test_a_state_database_that_is_not_one_gives_no_title(tmp_path: Path) -> None:
    (tmp_path / "state_5.sqlite").write_bytes(b"junk " * 1000)
    assert thread_title(tmp_path, PARENT) is None
    (tmp_path / "state_5.sqlite").unlink()
    os.mkfifo(tmp_path / "state_5.sqlite")  # never blocks on it
    assert thread_title(tmp_path, PARENT) is None
    os.unlink(tmp_path / "state_5.sqlite")
    with sqlite3.connect(tmp_path / "state_5.sqlite") as conn:
        conn.execute("CREATE TABLE threads (id TEXT)")  # a schema without titles
    conn.close()
    assert thread_title(tmp_path, PARENT) is None


@pytest.mark.parametrize(
    ("kind", "payload", "read"),
    [
        ("response_item", cx.message("user", "hi"), True),
        ("response_item", {"type": "function_call_output", "call_id": "c", "output": "x"}, True),
        ("response_item", {"type": "image_generation_call", "result": "words"}, False),
        ("compacted", {"message": "summary"}, True),
        ("event_msg", {"type": "item_completed", "item": {"type": "UserMessage"}}, True),
        ("event_msg", {"type": "token_count", "info": None}, True),
        ("event_msg", {"type": "brand_new_event", "text": "words"}, False),
        ("world_state", {"full": True, "state": {}}, False),
        ("token_usage_record", {"usage": {}}, False),
        ("session_meta", {"id": PARENT}, True),
    ],
)
def test_reads_line(kind: str, payload: dict[str, Any], read: bool) -> None:
    assert reads_line(kind, payload) is read


def test_the_state_title_is_looked_up_when_wanted_and_after_a_change(tmp_path: Path) -> None:
    rollout = _rollout(tmp_path, PARENT, [cx.session_meta(0, PARENT)])
    titles = iter(["", "first prompt"])
    asked: list[str] = []

    def look_up() -> str | None:
        asked.append("asked")
        return next(titles)

    session = CodexSession(rollout, state_title=look_up)
    assert asked == []  # opening reads no database
    assert session.title() == "" and session.title() == ""
    assert asked == ["asked"]  # once per state of the file
    with open(rollout, "ab") as file:  # Codex goes on (and has written the title)
        file.write(orjson.dumps(cx.item(cx.message("user", "first prompt"), 1)) + b"\n")
    assert session.catch_up()
    assert session.title() == "first prompt" and asked == ["asked", "asked"]
    # a name in the file or the session index wins, and then nothing is looked up
    named = CodexSession(rollout, index_title="from the index", state_title=look_up)
    assert named.title() == "from the index" and len(asked) == 2
