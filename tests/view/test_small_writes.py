"""``SessionCache.write(small=True)``: an append commits on the event loop only when
nothing but an append and its fsync can happen; otherwise it goes to a worker thread."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from support.agent_messages import make_session, user, user_entry
from support.omp_files import held_open

from core import SessionManager
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_cache import INLINE_WRITE_LIMIT, SessionCache
from sessionfs.writes import session_writer
from sessionfs.writes.append_parse import parse_append


def append(text: str) -> Callable[[SessionManager], Any]:
    data = orjson.dumps(user(text))
    return lambda manager: session_writer.append_ops(manager, parse_append("m.json", data))


def new_cache(tmp_path: Path) -> tuple[Path, SessionCache]:
    """A session file in an agent dir, and a cache over that dir."""
    agent = tmp_path / "agent"
    file = make_session(agent, project="--p--")
    return file, SessionCache(AgentIndex(agent), budget_bytes=64 << 20)


async def parsed(cache: SessionCache, file: Path) -> LoadedSession:
    """The session, parsed by a first append (in a worker thread)."""
    session = await cache.get("--p--", file.stem)
    await cache.write(session, append("first"), leaf="recorded", small=True)
    return session


async def move_leaf(cache: SessionCache, session: LoadedSession, entry_id: str) -> None:
    """``ln -sfn entries/<entry_id>.json leaf``'s write: memory only."""
    await cache.write(
        session,
        lambda m: session_writer.set_leaf_from_link(m, f"entries/{entry_id}.json"),
        leaf="moved",
        memory_only=True,
    )


def thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions run in worker threads from now on, in order."""
    hops: list[str] = []
    real_run_sync = trio.to_thread.run_sync

    async def counting_run_sync(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        hops.append(getattr(fn, "__name__", "?"))
        return await real_run_sync(fn, *args, **kw)

    monkeypatch.setattr(trio.to_thread, "run_sync", counting_run_sync)
    return hops


def test_small_appends_run_inline_only_when_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file, cache = new_cache(tmp_path)
    hops = thread_hops(monkeypatch)

    def disk_texts() -> list[str]:
        manager = SessionManager.open(file, browse=True)
        return [str(e["message"]["content"]) for e in manager.get_entries() if "message" in e]

    async def scenario() -> None:
        session = await cache.get("--p--", file.stem)
        hops.clear()
        # Read so far: held compact. The first write parses it (in a worker thread)...
        await cache.write(session, append("first"), leaf="recorded", small=True)
        assert hops == ["apply"] and session.manager is not None
        # (timed too: a loaded machine's slow fsync would send the next one to a thread)
        cache.small_write_seconds = 0.0
        hops.clear()
        await cache.write(session, append("inline"), leaf="recorded", small=True)
        assert hops == []  # ...then: parsed, on disk, unchanged: no thread hop
        assert "inline" in disk_texts()[-1]
        assert cache.small_write_seconds > 0  # timed (how fast depends on the machine)

        await cache.write(session, append("big"), leaf="recorded")
        assert hops == ["apply"]  # not marked small: always a worker thread

        # Another process appended: the catch-up may be any size, so a thread does it,
        # and the new entry chains onto the other process's.
        agent_side = SessionManager.open(file)
        outside = agent_side.append_message(user("from the agent"))
        agent_side.close()
        hops.clear()
        await cache.write(session, append("after the agent"), leaf="recorded", small=True)
        assert hops == ["apply"]
        last = SessionManager.open(file, browse=True).get_entries()[-1]
        assert last["parentId"] == outside

        # Recent small writes were slow (a slow disk): back to the thread, where they
        # are timed too, so the average comes down again once the disk is fast.
        cache.small_write_seconds = INLINE_WRITE_LIMIT * 10
        hops.clear()
        await cache.write(session, append("slow disk"), leaf="recorded", small=True)
        assert hops == ["apply"]
        assert "slow disk" in disk_texts()[-1]
        assert cache.small_write_seconds < INLINE_WRITE_LIMIT * 10

    trio.run(scenario)


def test_a_small_write_into_a_file_held_open_stops_and_waits_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent holds the file open: the inline attempt finds it with its own probe and
    stops before writing (memory rolled back); the worker thread then waits for the
    writer and refuses (EBUSY), leaving the file and the session as they were."""
    file, cache = new_cache(tmp_path)
    hops = thread_hops(monkeypatch)

    async def scenario() -> None:
        session = await parsed(cache, file)
        cache.small_write_seconds = 0.0
        manager = session.hydrated
        count, before = manager.entry_count(), file.read_bytes()
        with held_open(file):
            hops.clear()
            with pytest.raises(WriteRejected) as refused:
                await cache.write(session, append("refused"), leaf="recorded", small=True)
            assert refused.value.errno == errno.EBUSY and hops == ["apply"]
        assert file.read_bytes() == before and manager.entry_count() == count
        hops.clear()
        await cache.write(session, append("later"), leaf="recorded", small=True)
        assert hops == [] and b'"later"' in file.read_bytes()

    trio.run(scenario)


def test_a_leaf_move_runs_inline_untimed_even_when_the_disk_was_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ln -sfn``'s rename over ``leaf`` changes memory only: on the event loop once
    the session is parsed and unchanged on disk, whatever the disk's speed, and it
    does not count as a (fast) write of the disk."""
    file, cache = new_cache(tmp_path)
    hops = thread_hops(monkeypatch)

    async def scenario() -> None:
        session = await parsed(cache, file)
        root = session.hydrated.get_entries()[0]["id"]
        cache.small_write_seconds = slow = INLINE_WRITE_LIMIT * 10
        hops.clear()
        await move_leaf(cache, session, root)
        assert hops == [] and session.leaf_id() == root
        assert cache.small_write_seconds == slow

    trio.run(scenario)


async def inline_append_with(
    cache: SessionCache,
    file: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    replacement: Callable[..., Any],
) -> LoadedSession:
    """The session, parsed; then one inline append ("inline") with ``os.<name>``
    replaced by ``replacement`` while it runs."""
    session = await parsed(cache, file)
    cache.small_write_seconds = 0.0
    monkeypatch.setattr(os, name, replacement)
    await cache.write(session, append("inline"), leaf="recorded", small=True)
    monkeypatch.undo()
    return session


def test_an_inline_append_stats_its_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every system call of an append is paid before ``close()`` returns. An inline one
    stats the session file once: the catch-up's look for lines of other writers (which
    also decides whether the write may stay on the event loop: there was a freshness
    check of its own before it). The after-write bookkeeping (whose size also serves
    the parsed source) takes the ``fstat`` the append made of its own descriptor right
    after its write, in place of the ``lseek`` that told where the line landed."""
    file, cache = new_cache(tmp_path)
    stats: list[str] = []
    real_stat = os.stat

    def counting_stat(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        if os.fspath(path) == str(file):
            stats.append(os.fspath(path))
        return real_stat(path, *args, **kw)

    async def scenario() -> None:
        session = await inline_append_with(cache, file, monkeypatch, "stat", counting_stat)
        assert len(stats) == 1
        assert session.unchanged_on_disk()  # and what it saw is the file as it is now
        assert session.file_state[1] == file.stat().st_size

    trio.run(scenario)


def test_a_line_another_writer_adds_during_an_append_is_not_taken_as_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state an append records is the file as its own write left it: a line another
    process appends right after it (here: during its fdatasync) is not taken as seen,
    so the next look finds the file changed and reads that line."""
    file, cache = new_cache(tmp_path)
    real_fdatasync = os.fdatasync
    other = orjson.dumps(user_entry("0ther0001", None, "other writer")) + b"\n"

    def fdatasync_then_another_writer(fd: int) -> None:
        real_fdatasync(fd)
        with open(file, "ab") as fh:  # what a running agent does, behind our back
            fh.write(other)

    async def scenario() -> None:
        session = await inline_append_with(
            cache, file, monkeypatch, "fdatasync", fdatasync_then_another_writer
        )
        assert not session.unchanged_on_disk()
        assert session.refresh() == 1  # the other writer's entry, read now
        texts = [str(e["message"]["content"]) for e in session.entries() if "message" in e]
        assert "inline" in texts[-2] and "other writer" in texts[-1]

    trio.run(scenario)


def test_a_leaf_move_after_another_writer_appended_catches_up_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No freshness stat before an inline write: the catch-up's own stat finds the
    other process's line and stops the inline attempt before anything is read or
    changed; the worker thread then catches up, and the leaf moves in the session as
    it is on disk (the other process's entry is there)."""
    file, cache = new_cache(tmp_path)
    hops = thread_hops(monkeypatch)

    async def scenario() -> None:
        session = await parsed(cache, file)
        manager = session.hydrated
        root = manager.get_entries()[0]["id"]
        agent_side = SessionManager.open(file)
        outside = agent_side.append_message(user("from the agent"))
        agent_side.close()
        hops.clear()
        await move_leaf(cache, session, root)
        assert hops == ["apply"]
        assert manager.get_entry(outside) is not None and session.leaf_id() == root
        hops.clear()  # caught up: the next one stays on the event loop
        cache.small_write_seconds = 0.0  # (however slow the disk was for the first one)
        await cache.write(session, append("inline again"), leaf="recorded", small=True)
        assert hops == []
        last = SessionManager.open(file, browse=True).get_entries()[-1]
        assert last["parentId"] == root

    trio.run(scenario)
