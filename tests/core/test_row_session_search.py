"""Search over sessions that are rows of a database (`core.search_index.row_sessions`):
opencode's ``opencode.db`` and Cursor's chat ``store.db`` indexed through their
connectors, hits named as ``entries/`` names them and newest first, a session added
or grown while indexed, a write to another session not re-reading this one, and a
locked or corrupt database a clear skip that loses nothing indexed."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from support.newer_agent_files import (
    CURSOR_MESSAGES,
    add_opencode_session,
    add_opencode_text_part,
    set_cursor_messages,
    write_cursor_store,
    write_cursor_transcript,
    write_opencode_db,
)

from core.formats.cursor_agent import CURSOR_SEARCH
from core.formats.opencode_agent import OPENCODE_SEARCH
from core.search_index import SearchIndex


def _hits(index: SearchIndex, query: str) -> list[tuple[str, str, str]]:
    return [(h.project, h.stem, h.entry_id) for h in index.search(query)]


def test_opencode_sessions_are_searched_and_followed_live(tmp_path: Path) -> None:
    root = tmp_path / "opencode"
    writer = write_opencode_db(root / "opencode.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # the agent's writes stay in the WAL
    with SearchIndex(tmp_path / "index.db", file_format=OPENCODE_SEARCH) as index:
        stats = index.update(root)
        assert stats.error is None and stats.files_indexed == 1, stats
        # The user's text part and the reply, newest first; the tool part by its output.
        assert _hits(index, "files") == [
            ("opencode.db", "ses_a", "ses_a_prt_05"),
            ("opencode.db", "ses_a", "ses_a_prt_01"),
        ]
        (hit,) = index.search("ls")
        assert (hit.entry_id, hit.role) == ("ses_a_prt_03", "toolCall")
        assert [h.role for h in index.search("files")] == ["assistant", "user"]
        assert index.search("Two files")[0].snippet == "Two files."

        # A session added while indexed: only it is read (the other one's signature
        # did not change, though the database's stat did).
        add_opencode_session(writer, "ses_b", "/home/me/web", "Other")
        add_opencode_text_part(writer, "ses_b", "prt_09", "zanzibar later", 9000)
        stats = index.update(root)
        assert (stats.files_indexed, stats.files_unchanged) == (1, 1), stats
        assert _hits(index, "zanzibar") == [("opencode.db", "ses_b", "ses_b_prt_09")]
        # A turn of the first session: read again, its new part found first.
        add_opencode_text_part(writer, "ses_a", "prt_10", "zanzibar again", 10_000)
        stats = index.update(root)
        assert (stats.files_indexed, stats.files_unchanged) == (1, 1), stats
        assert [h[1:] for h in _hits(index, "zanzibar")] == [
            ("ses_a", "ses_a_prt_10"),
            ("ses_b", "ses_b_prt_09"),
        ]

        # Deleted: its hits go at once (the other session of its database stays
        # found, though the deleted one's newer hit is read back first), its rows with
        # the next update.
        add_opencode_text_part(writer, "ses_b", "prt_11", "zanzibar last", 11_000)
        assert index.update(root).files_indexed == 1
        writer.execute("DELETE FROM part WHERE session_id = 'ses_b'")
        writer.execute("DELETE FROM message WHERE session_id = 'ses_b'")
        writer.execute("DELETE FROM session WHERE id = 'ses_b'")
        writer.commit()
        assert [h[1:] for h in _hits(index, "zanzibar")] == [("ses_a", "ses_a_prt_10")]
        stats = index.update(root)
        assert stats.files_removed == 1, stats
        assert [h[1] for h in _hits(index, "zanzibar")] == ["ses_a"]
    writer.close()


def test_a_locked_or_corrupt_opencode_database_is_a_clear_skip(tmp_path: Path) -> None:
    """A database that cannot be listed is left out of the pass with its reason (its
    rows kept, tried again next pass); the other databases are indexed meanwhile."""
    root = tmp_path / "opencode"
    write_opencode_db(root / "opencode.db").close()
    other = write_opencode_db(root / "opencode-beta.db", "ses_b", title="Other channel")
    with SearchIndex(tmp_path / "index.db", file_format=OPENCODE_SEARCH) as index:
        assert index.update(root).error is None
        assert len(index.search("files")) == 4
        locker = sqlite3.connect(root / "opencode.db")
        locker.execute("PRAGMA locking_mode = EXCLUSIVE")
        locker.execute("UPDATE session SET time_updated = time_updated + 1")
        locker.commit()
        locker.execute("BEGIN EXCLUSIVE")
        try:
            add_opencode_text_part(other, "ses_b", "prt_09", "zanzibar meanwhile", 9000)
            stats = index.update(root)
            assert stats.error is None and stats.files_removed == 0, stats
            assert len(stats.unlisted) == 1, stats
            assert stats.unlisted[0].startswith("opencode.db: ") and "locked" in stats.unlisted[0]
            assert stats.files_indexed == 1  # the other database's change
            assert [h.project for h in index.search("zanzibar")] == ["opencode-beta.db"]
            # no text of the locked one can be read back now
            assert {h.project for h in index.search("files")} == {"opencode-beta.db"}
        finally:
            locker.rollback()
            locker.close()
        stats = index.update(root)
        assert stats.error is None and stats.files_removed == 0 and not stats.unlisted, stats
        assert len(index.search("files")) == 4  # nothing was lost meanwhile

        (root / "opencode.db").write_bytes(b"SQLite format 3\x00" + b"\xee" * 8192)
        for suffix in ("-wal", "-shm"):
            (root / f"opencode.db{suffix}").unlink(missing_ok=True)
        stats = index.update(root)
        assert stats.error is None and stats.files_removed == 0, stats
        assert "not a database" in stats.unlisted[0], stats
    other.close()


def test_cursor_chats_are_searched_beside_transcripts(tmp_path: Path) -> None:
    root = tmp_path / "cursor"
    chat = root / "chats" / hashlib.md5(b"/home/me/app").hexdigest() / "chat-1"
    writer = write_cursor_store(chat, CURSOR_MESSAGES, name="Count", cwd="/home/me/app")
    write_cursor_transcript(
        root / "projects" / "home-me-web" / "agent-transcripts" / "t-1.jsonl",
        [("user", "count the haystack lines"), ("assistant", "Found it.")],
    )
    bad = chat.parent / "chat-bad" / "store.db"
    bad.parent.mkdir()
    bad.write_bytes(b"SQLite format 3\x00" + b"\xee" * 8192)
    chat_stem = f"{chat.parent.name}/chat-1/store.db/chat-1"
    with SearchIndex(tmp_path / "index.db", file_format=CURSOR_SEARCH) as index:
        stats = index.update(root)
        # The corrupt store is skipped with its reason; the rest is indexed.
        assert stats.files_indexed == 2 and len(stats.skipped) == 1, stats
        assert str(bad) in stats.skipped[0] and "not a database" in stats.skipped[0]
        assert sorted(_hits(index, "lines")) == [
            ("chats", chat_stem, "000002-user"),
            ("chats", chat_stem, "000005-assistant"),
            ("projects", "home-me-web/agent-transcripts/t-1", "000001-user"),
        ]
        assert {h.entry_id for h in index.search("notes")} == {"000003-assistant", "000004-tool"}

        more = [{"role": "user", "content": "<user_query>and quokkas?</user_query>"}]
        set_cursor_messages(writer, "chat-1", CURSOR_MESSAGES + more, name="Count")
        stats = index.update(root)
        assert stats.files_indexed == 1, stats
        assert _hits(index, "quokkas") == [("chats", chat_stem, "000006-user")]
    writer.close()
