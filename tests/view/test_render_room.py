"""A rendering's transient memory is reserved before it starts: the cache lets go of
other sessions first, and refuses (``EFBIG``, with its reason) a rendering that would
parse a file too big for ``--cache-mb`` + `RENDER_HEADROOM`."""

from __future__ import annotations

import errno
from pathlib import Path

import orjson
import pytest
import trio

from sessionfs.view import session_cache
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.loaded_session import TABLE_BYTES_PER_ENTRY, LoadedSession
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_cache import RENDER_PEAK_FACTOR, SessionCache
from sessionfs.view.session_ref import SessionRef


def write_session(project: Path, name: str, entries: int) -> int:
    header = {"type": "session", "version": 3, "id": name, "timestamp": "t", "cwd": "/"}
    lines = [orjson.dumps(header)]
    for i in range(entries):
        text = f"{name} {i} " + "words " * 40
        lines.append(
            orjson.dumps(
                {
                    "type": "message",
                    "id": f"{name}{i:06d}",
                    "parentId": f"{name}{i - 1:06d}" if i else None,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": {"role": "user", "content": text},
                }
            )
        )
    path = project / f"{name}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path.stat().st_size


def test_other_sessions_make_room_before_a_rendering(tmp_path: Path) -> None:
    project = tmp_path / "agent" / "sessions" / "p"
    project.mkdir(parents=True)
    size = max(write_session(project, f"s{n}", 300) for n in range(4))
    held = size + 300 * TABLE_BYTES_PER_ENTRY  # held compact, with its entries/ table
    budget = size * RENDER_PEAK_FACTOR + held * 3  # one rendering and ~2 held sessions
    cache = SessionCache(AgentIndex(tmp_path / "agent"), budget_bytes=budget)

    async def scenario() -> None:
        for n in range(3):
            session = await cache.get("p", f"s{n}")
            await cache.run(session, lambda s=session: s.table())  # held, not rendered
        assert sum(1 for s in cache.loaded() if s.is_loaded) == 3
        last = await cache.get("p", "s3")
        rendered = await cache.render(last, "context.json")
        assert b"s3 299 words" in rendered
        held = [s for s in cache.loaded() if s.is_loaded and s is not last]
        # What stayed held leaves room for the parse the rendering needed.
        assert sum(s.memory_cost() for s in held) + size * RENDER_PEAK_FACTOR <= budget
        assert len(held) < 3

    trio.run(scenario)


def test_a_rendering_too_big_for_the_budget_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "agent" / "sessions" / "p"
    project.mkdir(parents=True)
    size = write_session(project, "big", 2000)
    # A small headroom, so that a small file can be over the limit: a budget whose
    # limit, (budget + headroom) / factor, is just under the file's size.
    headroom = 1024 * 1024
    monkeypatch.setattr(session_cache, "RENDER_HEADROOM", headroom)
    budget = size * RENDER_PEAK_FACTOR - headroom - RENDER_PEAK_FACTOR
    cache = SessionCache(AgentIndex(tmp_path / "agent"), budget_bytes=budget)
    assert cache.largest_renderable() == size - 1

    async def scenario() -> None:
        session = await cache.get("p", "big")
        with pytest.raises(WriteRejected) as refused:
            await cache.render(session, "context.json")
        assert refused.value.errno == errno.EFBIG
        assert "context.json: the session file is" in (session.last_error or "")
        assert await cache.render(session, "title") == b""  # the header alone: served
        assert session.entry_count() == 2000

    trio.run(scenario)


def test_stats_json_of_a_file_over_the_limit_is_made_from_the_index_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stats.json`` needs no parse of the file (its forest and one pass over the
    entries): served over the limit, also for a session let go before it, while
    ``tree.txt`` (its text grows with the session) is still refused."""
    project = tmp_path / "agent" / "sessions" / "p"
    project.mkdir(parents=True)
    size = write_session(project, "big", 2000)
    monkeypatch.setenv(session_cache.RENDER_LIMIT_ENV, str(size // 4))
    cache = SessionCache(AgentIndex(tmp_path / "agent"), budget_bytes=64 * 1024 * 1024)
    parsed = LoadedSession(ref=SessionRef("p", "big", project / "big.jsonl", {}, 0, 0))
    parsed.load()  # no limit: from the parse
    expected = parsed.rendered("stats.json")

    async def scenario() -> None:
        session = await cache.get("p", "big")
        assert session.manager is None  # held compact, its file read where it is
        assert await cache.render(session, "stats.json") == expected
        cache.drop(session)
        again = await cache.get("p", "big")
        again.dehydrate()  # let go before anything was rendered: loaded again to make it
        assert again.source is None
        assert await cache.render(again, "stats.json") == expected
        assert again.last_error is None
        with pytest.raises(WriteRejected) as refused:
            await cache.render(again, "tree.txt")
        assert refused.value.errno == errno.EFBIG
        assert "tree.txt: the session file is" in (again.last_error or "")

    trio.run(scenario)
