"""opencode sessions in core, from an ``opencode.db`` with the tables and indexes the
reader uses and from the older ``storage/`` JSON layout: renderings inputs, a live
WAL writer, revert, discovery by index, and locked or corrupt databases."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.newer_agent_files import (
    add_opencode_session,
    write_opencode_db,
    write_opencode_storage,
)

from core.formats.opencode import OpencodeSession
from core.formats.opencode_dirs import list_sessions, opencode_dir
from core.formats.sqlite_store import StoreUnreadable
from core.paths import encode_cwd

EXPECTED_CONTEXT = [
    {"role": "user", "content": '"count files"'},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command":"ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a\nb\n"},
    {"role": "assistant", "content": "Two files."},
]


def test_db_session_renderings(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    write_opencode_db(db).close()
    session = OpencodeSession(db, "ses_a")
    assert session.context() == {"messages": EXPECTED_CONTEXT, "model": "p/m"}
    shown = [(m.entry_name, m.message["role"]) for m in session.transcript_messages()]
    assert shown == [
        ("ses_a_msg_01", "user"),
        ("ses_a_msg_02", "assistant"),
        ("ses_a_prt_03", "toolResult"),
        ("ses_a_msg_03", "assistant"),
    ]
    assert session.title() == "Count files"
    header = session.header()
    assert header["directory"] == "/home/me/app" and header["file"] == str(db)
    stats = session.stats()
    assert stats["entries"] == 8
    assert stats["byType"]["part-tool"] == 1 and stats["byRole"] == {"assistant": 2, "user": 1}
    assert stats["usage"] == {"input": 30, "output": 7, "cacheRead": 3, "cacheWrite": 5}
    entry = json.loads(session.raw_line(session.index_of("ses_a_prt_03") or 0))
    assert entry["kind"] == "part" and entry["data"]["tool"] == "bash"


def test_a_live_writer_and_a_revert(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = write_opencode_db(db)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    session = OpencodeSession(db, "ses_a")
    assert not session.catch_up()
    conn.execute(
        "INSERT INTO message VALUES ('ses_a_msg_04', 'ses_a', 4000, 4000, ?)",
        (json.dumps({"role": "user", "time": {"created": 4000}}),),
    )
    conn.execute(
        "INSERT INTO part VALUES ('ses_a_prt_06', 'ses_a_msg_04', 'ses_a', 4000, 4000, ?)",
        (json.dumps({"type": "text", "text": "again"}),),
    )
    conn.commit()  # in the WAL, not checkpointed
    assert session.catch_up() and session.reread
    assert session.context()["messages"][-1] == {"role": "user", "content": "again"}
    conn.execute(
        "UPDATE session SET revert = ?, time_updated = 5000 WHERE id = 'ses_a'",
        (json.dumps({"messageID": "ses_a_msg_03"}),),
    )
    conn.commit()
    assert session.catch_up()
    assert session.context()["messages"] == EXPECTED_CONTEXT[:3]
    assert len(session) == 10  # entries/ still shows every row
    conn.close()


def test_listing_by_index_sub_agents_and_older_layout(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    conn = write_opencode_db(root / "opencode.db")
    add_opencode_session(conn, "ses_child", "/home/me/app", "sub", parent_id="ses_a")
    conn.close()
    write_opencode_db(root / "opencode-beta.db", "ses_beta", "/home/me/beta").close()
    write_opencode_storage(root)
    listing = list_sessions(root)
    found = {s.id: s for s in listing.sessions}
    assert set(found) == {"ses_a", "ses_child", "ses_beta", "ses_old"}
    assert found["ses_child"].parent_id == "ses_a"
    assert found["ses_beta"].store == root / "opencode-beta.db"
    assert found["ses_old"].project == encode_cwd("/home/me/old") and not found["ses_old"].in_db
    old = OpencodeSession(found["ses_old"].store)
    assert old.context()["messages"] == EXPECTED_CONTEXT
    assert old.title() == "Old one"
    assert opencode_dir({"XDG_DATA_HOME": str(tmp_path)}) == root
    assert opencode_dir({"HOME": str(tmp_path)}) == tmp_path / ".local" / "share" / "opencode"


def test_the_reader_queries_by_index(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    write_opencode_db(db).close()
    conn = sqlite3.connect(db)
    plans = []
    for sql in (
        "SELECT id, time_created, data FROM message WHERE session_id = 'x'"
        " ORDER BY time_created, id",
        "SELECT id, message_id, time_created, data FROM part WHERE session_id = 'x' ORDER BY id",
        "SELECT * FROM session WHERE id = 'x'",
    ):
        plans.append(" ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)))
    conn.close()
    assert "USING INDEX message_session_time_created_id_idx" in plans[0], plans
    assert "USING INDEX part_session_idx" in plans[1], plans
    assert "USING INDEX sqlite_autoindex_session_1" in plans[2], plans


def test_locked_and_corrupt_databases(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    conn = write_opencode_db(db)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    with pytest.raises(StoreUnreadable, match="locked"):
        OpencodeSession(db, "ses_a")
    listing = list_sessions(tmp_path)
    assert listing.sessions == [] and "locked" in listing.skipped[db]
    conn.rollback()
    conn.close()
    with pytest.raises(StoreUnreadable, match="no session"):
        OpencodeSession(db, "ses_missing")
    bad = tmp_path / "other" / "opencode.db"
    bad.parent.mkdir()
    bad.write_bytes(b"this is not a database at all" * 200)
    assert "not a database" in list_sessions(bad.parent).skipped[bad]
    with pytest.raises(StoreUnreadable, match="not a database"):
        OpencodeSession(bad, "ses_a")
