"""Sessions kept as rows of another agent's SQLite database (opencode) held by the
view: listed, rendered, caught up through the database's WAL, and -- when the database
is locked past the busy timeout -- a clear ``ENOENT`` whose reason the cache keeps for
``ctl`` (never an unexpected exception, which the mount would turn into ``EIO``), read
again once the lock is gone."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
import trio
from support.newer_agent_files import write_opencode_db

from core.formats.opencode_agent import OPENCODE
from core.paths import encode_cwd
from sessionfs.view.agent_sources import RegisteredCatalog, open_agent_file
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.other_agent_index import OtherAgentIndex
from sessionfs.view.search_view import SearchView
from sessionfs.view.session_cache import NotASession, SessionCache

PROJECT = encode_cwd("/home/me/app")


def _cache(root: Path) -> SessionCache:
    index = OtherAgentIndex(RegisteredCatalog(OPENCODE, root))
    return SessionCache(
        index,
        64 << 20,
        new_session=lambda ref: LoadedSession(
            ref=ref, opener=lambda r: open_agent_file("opencode", r.path)
        ),
    )


@contextmanager
def _locked(db: Path) -> Iterator[None]:
    """Another process writes (the WAL changes) and keeps the database locked."""
    locker = sqlite3.connect(db)
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("UPDATE session SET time_updated = time_updated + 1")
    locker.commit()
    locker.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        locker.rollback()
        locker.close()


def _messages(data: bytes) -> list[dict[str, object]]:
    return list(orjson.loads(data)["messages"])


def test_a_locked_database_is_a_clear_skip_then_read_again(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    writer = write_opencode_db(db)
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    cache = _cache(tmp_path)

    async def main() -> None:
        assert [r.stem for r in cache.index.sessions_in(PROJECT)] == ["ses_a"]
        session = await cache.get(PROJECT, "ses_a")
        assert len(_messages(await cache.render(session, "context.json"))) == 4

        # A new turn lands in the WAL: the next access shows it.
        writer.execute(
            "INSERT INTO message VALUES ('ses_a_msg_09', 'ses_a', 9000, 9000, ?)",
            ('{"role": "user", "time": {"created": 9000}}',),
        )
        writer.execute(
            "INSERT INTO part VALUES ('ses_a_prt_09', 'ses_a_msg_09', 'ses_a', 9000, 9000, ?)",
            ('{"type": "text", "text": "more"}',),
        )
        writer.commit()
        await trio.sleep(0.3)  # past the freshness interval
        session = await cache.get(PROJECT, "ses_a")
        assert _messages(await cache.render(session, "context.json"))[-1]["content"] == "more"

        writer.close()  # the agent exits; another process locks the database now and then

        # Locked while the session is held and has a change to catch up with.
        with _locked(db):
            await trio.sleep(0.3)  # past the freshness interval
            with pytest.raises(NotASession):
                await cache.get(PROJECT, "ses_a")
        assert cache.last_skip is not None and "locked" in cache.last_skip

        # Locked while only its renderings are held: the reload a rendering needs.
        session = await cache.get(PROJECT, "ses_a")
        await cache.render(session, "context.json")
        session.dehydrate()
        cache.last_skip = None
        with _locked(db):
            await trio.sleep(0.3)
            session = await cache.get(PROJECT, "ses_a")  # the stat changed: renders go
            with pytest.raises(FileNotFoundError, match="locked"):
                await cache.render(session, "transcript.md")
            assert cache.last_skip is not None and "locked" in cache.last_skip
            # and not held any more: loading it again is refused the same way
            with pytest.raises(NotASession):
                await cache.get(PROJECT, "ses_a")

        session = await cache.get(PROJECT, "ses_a")
        assert "more" in (await cache.render(session, "transcript.md")).decode()

    trio.run(main)


def test_a_first_search_build_over_a_locked_database_says_why(tmp_path: Path) -> None:
    """The search view's first build cannot list a locked database: it is left out
    with the reason (``search_opencode_last_error``, with its time), not an exception,
    and indexed once the lock is gone, which clears the reason."""
    root = tmp_path / "opencode"
    write_opencode_db(root / "opencode.db").close()
    view = SearchView(tmp_path / "cache", root, root, OPENCODE.search)
    try:
        with _locked(root / "opencode.db"):
            stats = view.refresh()
        assert stats.error is None and "locked" in stats.unlisted[0], stats
        error = view.progress.last_error
        assert error is not None and error.endswith(stats.unlisted[0]), error
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: ", error), error
        assert view.search("files") == []
        assert view.refresh().error is None
        assert [h.entry_id for h in view.search("files")] == ["ses_a_prt_05", "ses_a_prt_01"]
        assert view.progress.state == "ready"
        assert view.progress.last_error is None  # the pass got through: over
    finally:
        view.close()
