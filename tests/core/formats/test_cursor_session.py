"""Cursor agent CLI sessions in core, from fixtures in the documented format (the CLI
cannot run offline): a chat's ``store.db`` read live (WAL, never immutable), the
``agent-transcripts`` JSONL, discovery, and bad stores."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from support.newer_agent_files import (
    CURSOR_MESSAGES,
    set_cursor_messages,
    write_cursor_store,
    write_cursor_transcript,
)

from core.formats.cursor import CursorChatSession, CursorTranscriptSession, root_fields
from core.formats.cursor_agent import CURSOR_SEARCH, list_cursor_sessions, open_cursor_session
from core.formats.cursor_dirs import list_sessions
from core.formats.sqlite_store import StoreUnreadable, read_only
from core.paths import encode_cwd

CHAT = "ac437fdf-3e7e-4a54-98a4-7bb04fd3efc6"


def _chat_dir(root: Path, cwd: str = "/home/me/app") -> Path:
    return root / "chats" / hashlib.md5(cwd.encode()).hexdigest() / CHAT


def test_store_context_transcript_header(tmp_path: Path) -> None:
    conn = write_cursor_store(
        _chat_dir(tmp_path), CURSOR_MESSAGES, name="Count", cwd="/home/me/app"
    )
    session = CursorChatSession(_chat_dir(tmp_path) / "store.db")
    assert session.context() == {
        "model": "claude-4-sonnet",
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "<user_query>count lines</user_query>"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {
                            "name": "run_terminal_cmd",
                            "arguments": '{"command":"wc -l notes.txt"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "3 notes.txt"},
            {"role": "assistant", "content": "It has 3 lines."},
        ],
    }
    shown = [(m.entry_name, m.message["role"]) for m in session.transcript_messages()]
    assert shown == [
        ("000001-system", "system"),
        ("000002-user", "user"),
        ("000003-assistant", "assistant"),
        ("000004-tool", "toolResult"),
        ("000005-assistant", "assistant"),
    ]
    thinking = session.transcript_messages()[2].message["content"][0]
    assert thinking == {"type": "thinking", "thinking": "use wc"}
    header = session.header()
    assert header["id"] == CHAT and header["cwd"] == "/home/me/app"
    assert header["workspace"] == "file:///home/me/app"
    assert session.title() == "Count"
    assert session.stats()["entries"] == 5 and session.stats()["leafId"] == "000005-assistant"
    conn.close()


def test_a_live_store_shows_what_the_wal_holds(tmp_path: Path) -> None:
    """The CLI writes in WAL mode and checkpoints when it likes: a turn not yet
    checkpointed is read (mode=ro, not immutable), and the database and its WAL are not
    changed by reading (a reader's marks in ``-shm`` are SQLite's locking protocol)."""
    chat = _chat_dir(tmp_path)
    conn = write_cursor_store(chat, CURSOR_MESSAGES[:2])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    session = CursorChatSession(chat / "store.db")
    assert len(session) == 2
    set_cursor_messages(conn, CHAT, CURSOR_MESSAGES)  # lands in the WAL only
    data = ("store.db", "store.db-wal")
    before = {name: (chat / name).read_bytes() for name in data}
    assert session.catch_up() and len(session) == 5
    assert not session.catch_up()
    assert {name: (chat / name).read_bytes() for name in data} == before
    conn.close()


def test_bad_stores_are_unreadable_with_a_reason(tmp_path: Path) -> None:
    corrupt = tmp_path / "a" / "store.db"
    corrupt.parent.mkdir()
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    with pytest.raises(StoreUnreadable, match=r"store\.db"):
        CursorChatSession(corrupt)
    locked_dir = tmp_path / "b"
    conn = write_cursor_store(locked_dir, CURSOR_MESSAGES)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    with pytest.raises(StoreUnreadable, match="locked"):
        open_cursor_session(locked_dir / "store.db")
    conn.rollback()
    conn.close()
    junk = tmp_path / "c"
    conn = write_cursor_store(junk, CURSOR_MESSAGES)
    conn.execute("INSERT INTO blobs VALUES ('x', x'00ff')")
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = '0'",
        (b'{"agentId": "c", "latestRootBlobId": "x"}'.hex(),),
    )
    conn.commit()
    with pytest.raises(StoreUnreadable, match="root blob"):
        CursorChatSession(junk / "store.db")
    conn.close()


def test_message_blobs_that_are_not_json_are_counted(tmp_path: Path) -> None:
    chat = _chat_dir(tmp_path)
    conn = write_cursor_store(chat, CURSOR_MESSAGES)
    root = conn.execute("SELECT value FROM meta").fetchone()[0]
    root_id = __import__("json").loads(bytes.fromhex(root))["latestRootBlobId"]
    ids, workspace = root_fields(
        conn.execute("SELECT data FROM blobs WHERE id = ?", (root_id,)).fetchone()[0]
    )
    assert len(ids) == 5 and workspace == "file:///home/me/app"
    conn.execute("UPDATE blobs SET data = x'7b6e6f' WHERE id = ?", (ids[1],))
    conn.commit()
    session = CursorChatSession(chat / "store.db")
    assert session.malformed_lines == 1 and len(session) == 4
    conn.close()


def test_transcripts_and_discovery(tmp_path: Path) -> None:
    root = tmp_path / ".cursor"
    write_cursor_store(_chat_dir(root), CURSOR_MESSAGES, cwd="/home/me/app").close()
    write_cursor_store(root / "chats" / ("0" * 32) / "nometa", CURSOR_MESSAGES[:2]).close()
    transcript = write_cursor_transcript(
        root / "projects" / "home-me-web" / "agent-transcripts" / "t-1.jsonl",
        [("user", "<user_query>hi</user_query>"), ("assistant", "hello")],
    )
    write_cursor_transcript(  # the same id as a store: listed once, from the store
        root / "projects" / "home-me-app" / "agent-transcripts" / f"{CHAT}.jsonl", [("user", "x")]
    )
    found = {(f.id, f.project, f.is_store) for f in list_sessions(root)}
    assert found == {
        (CHAT, encode_cwd("/home/me/app"), True),
        ("nometa", "cursor-" + "0" * 32, True),
        ("t-1", "home-me-web", False),
    }
    assert len(list(list_cursor_sessions(root))) == 3
    session = open_cursor_session(transcript)
    assert isinstance(session, CursorTranscriptSession)
    assert session.context()["messages"] == [
        {"role": "user", "content": "<user_query>hi</user_query>"},
        {"role": "assistant", "content": "hello"},
    ]
    assert [m.entry_name for m in session.transcript_messages()] == [
        "000001-user",
        "000002-assistant",
    ]
    keys = list(CURSOR_SEARCH.file_keys(str(root)))
    assert ("projects", "home-me-web", "agent-transcripts", "t-1.jsonl") in keys
    lines = [(0, transcript.read_bytes().splitlines()[0])]
    _, rows = CURSOR_SEARCH.whole_file_rows(lines)
    assert [(r.entry_id, r.role) for r in rows] == [("000001-user", "user")]


def test_read_only_connection_never_writes(tmp_path: Path) -> None:
    chat = _chat_dir(tmp_path)
    write_cursor_store(chat, CURSOR_MESSAGES).close()  # checkpointed on close
    before = (chat / "store.db").read_bytes()
    CursorChatSession(chat / "store.db")
    with read_only(chat / "store.db") as conn, pytest.raises(sqlite3.OperationalError):
        conn.execute("CREATE TABLE x (a)")
    assert (chat / "store.db").read_bytes() == before
