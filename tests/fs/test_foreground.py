"""Background work gives way to requests: `Foreground` (what the ops layer notes of every
request), the search indexer's wait for a quiet moment, and its lower CPU priority.

No mount here: the ops layer is driven directly and the indexer gets a recording view.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path
from typing import Any

import pyfuse3
import pytest
import trio
from support.agent_messages import write_header_session

from core.search_index.index import SearchIndex
from sessionfs.fs.foreground import Foreground, run_in_background_thread
from sessionfs.fs.nodes.base import DirNode, Node, OpenFile
from sessionfs.fs.ops import SessionFsOperations
from sessionfs.fs.search_indexer import (
    BURST_BATCH_DELAY,
    CHANGE_BATCH_DELAY,
    FULL_PASS_INTERVAL,
    SearchIndexer,
    wait_for_first_builds,
)
from sessionfs.view.search_view import SearchView

pytestmark = pytest.mark.timeout(30)

QUIET = 0.1


class RecordingView:
    """A `SearchView` stand-in: when each refresh ran, in which thread, how nice."""

    def __init__(self) -> None:
        self.sessions_root = Path("/nonexistent-sessions")
        self.calls: list[tuple[float, int, int]] = []
        self.refreshed = threading.Event()

    def wants_full_pass(self) -> bool:
        return False

    def refresh(self, changed: Any = None) -> None:
        thread = threading.get_native_id()
        self.calls.append((time.monotonic(), thread, os.getpriority(os.PRIO_PROCESS, thread)))
        self.refreshed.set()


class SlowDir(DirNode):
    """A root whose lookups wait for ``release`` (then find nothing)."""

    def __init__(self) -> None:
        super().__init__(None, ())  # type: ignore[arg-type]  # no MountContext needed
        self.release = trio.Event()

    async def lookup(self, name: str) -> Node | None:
        await self.release.wait()
        return None


def test_quiet_waits_for_requests_in_flight_and_a_pause_after_them() -> None:
    foreground = Foreground(quiet_seconds=QUIET, max_defer=10)

    async def scenario() -> None:
        foreground.started()
        started = time.monotonic()
        async with trio.open_nursery() as nursery:

            async def end_request() -> None:
                await trio.sleep(0.3)
                foreground.finished()

            nursery.start_soon(end_request)
            assert await foreground.quiet()
        waited = time.monotonic() - started
        assert waited >= 0.3 + QUIET - 0.01
        assert waited < 0.3 + QUIET + 2  # generous: a loaded machine
        assert foreground.served == 1 and foreground.in_flight == 0

    trio.run(scenario)


def test_quiet_gives_up_after_max_defer_when_requests_never_stop() -> None:
    foreground = Foreground(quiet_seconds=QUIET, max_defer=0.3)

    async def scenario() -> None:
        foreground.started()  # never finished: a client that never pauses
        started = time.monotonic()
        assert not await foreground.quiet()
        assert 0.3 - 0.01 <= time.monotonic() - started < 2.3

    trio.run(scenario)


def test_touch_ahead_counts_as_activity_until_then() -> None:
    foreground = Foreground(quiet_seconds=QUIET, max_defer=10)
    foreground.touch(0.3)
    assert foreground.idle_for() == 0.0
    foreground.started()
    foreground.finished()  # a quick request must not cut the grace short
    assert foreground.idle_for() == 0.0

    async def scenario() -> None:
        started = time.monotonic()
        await foreground.quiet()
        assert time.monotonic() - started >= 0.3 + QUIET - 0.05

    trio.run(scenario)


def test_every_request_through_the_ops_layer_is_noted_even_a_failing_one() -> None:
    root = SlowDir()
    ops = SessionFsOperations(root, read_only=True)
    errors: list[int] = []

    async def scenario() -> None:
        async def request() -> None:
            try:
                await ops.lookup(pyfuse3.ROOT_INODE, b"missing", None)  # type: ignore[arg-type]
            except pyfuse3.FUSEError as exc:
                errors.append(exc.errno)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(request)
            await trio.sleep(0.05)
            assert ops.foreground.in_flight == 1
            assert ops.foreground.idle_for() == 0.0
            root.release.set()
        assert ops.foreground.in_flight == 0 and ops.foreground.served == 1
        await ops.statfs(None)  # type: ignore[arg-type]
        assert ops.foreground.served == 2

    trio.run(scenario)
    assert errors == [errno.ENOENT]


class Collected(OpenFile):
    """A handle open for writing that keeps what it is given."""

    def __init__(self) -> None:
        self.data = b""

    async def write(self, offset: int, data: bytes) -> int:
        self.data += data
        return len(data)


def test_a_write_through_the_ops_layer_is_noted_as_one_and_a_read_is_not() -> None:
    ops = SessionFsOperations(SlowDir(), read_only=False)
    handle = Collected()
    fh = ops._add_handle(handle)
    assert not ops.foreground.writing(60.0)  # nothing written since the mount came up

    async def scenario() -> None:
        await ops.statfs(None)  # type: ignore[arg-type]
        assert not ops.foreground.writing(60.0)
        assert await ops.write(fh, 0, b"line\n") == 5
        assert ops.foreground.writing(60.0)
        await trio.sleep(0.05)
        assert not ops.foreground.writing(0.01)  # only for as long as asked

    trio.run(scenario)
    assert handle.data == b"line\n"


def test_the_indexer_first_build_waits_while_requests_are_served() -> None:
    view = RecordingView()
    foreground = Foreground(quiet_seconds=QUIET, max_defer=10)
    indexer = SearchIndexer(view, foreground)  # type: ignore[arg-type]

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            foreground.started()  # a first `cat` as the mount comes up
            nursery.start_soon(indexer.run)
            await trio.sleep(0.4)
            assert view.calls == [], "the first build ran while a request was served"
            foreground.finished()
            ended = time.monotonic()
            with trio.fail_after(5):
                while not view.calls:
                    await trio.sleep(0.01)
            assert view.calls[0][0] >= ended + QUIET - 0.01
            nursery.cancel_scope.cancel()

    trio.run(scenario)


class ChangesView(RecordingView):
    """A `RecordingView` that also keeps which files each refresh was given (None: all)."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[list[str] | None] = []

    def refresh(self, changed: Any = None) -> None:
        self.given.append(None if changed is None else list(changed))
        super().refresh(changed)


def test_while_the_mount_takes_writes_the_indexer_gathers_changes_for_longer() -> None:
    """A script filling ``append/`` makes one change per file: while the mount keeps
    taking writes the indexer runs an update per `BURST_BATCH_DELAY`, not per
    `CHANGE_BATCH_DELAY`, and every change is indexed."""
    view = ChangesView()
    foreground = Foreground(quiet_seconds=0.01, max_defer=0.05)
    indexer = SearchIndexer(view, foreground)  # type: ignore[arg-type]
    files = [str(view.sessions_root / "p" / f"s{n}.jsonl") for n in range(30)]

    def indexed() -> set[str]:
        return {path for given in view.given if given is not None for path in given}

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(indexer.run)
            with trio.fail_after(5):
                while not view.calls:  # the first build
                    await trio.sleep(0.01)
            before = len(view.calls)
            started = trio.current_time()
            for n in range(len(files)):  # appends through the mount, 50 ms apart
                foreground.wrote()
                indexer.session_file_changed("p", f"s{n}")
                await trio.sleep(0.05)
            took = trio.current_time() - started
            end = len(view.calls)
            updates = end - before
            # (a full pass every FULL_PASS_INTERVAL comes on top, without a watch)
            most = took / BURST_BATCH_DELAY + took / FULL_PASS_INTERVAL + 2
            assert updates <= most, f"{updates} updates in {took:.2f} s of writes"
            assert updates < took / CHANGE_BATCH_DELAY - 1
            with trio.fail_after(5):
                while not (indexed() >= set(files) or None in view.given[end:]):
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_a_search_waiting_for_the_first_build_starts_it_at_once() -> None:
    """The search's own request keeps the mount from being quiet: waiting for a quiet
    moment would cost the search the whole ``max_defer``."""
    view = RecordingView()
    foreground = Foreground(quiet_seconds=QUIET, max_defer=10)
    indexer = SearchIndexer(view, foreground)  # type: ignore[arg-type]

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            foreground.started()  # the search's lookup, in flight while it waits
            nursery.start_soon(indexer.run)
            await trio.sleep(0.3)
            assert view.calls == []
            started = time.monotonic()
            await wait_for_first_builds([indexer], timeout=5)
            assert indexer.built.is_set() and len(view.calls) == 1
            assert time.monotonic() - started < 3  # not the 10 s of max_defer
            nursery.cancel_scope.cancel()

    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    trio.run(scenario)
    # a request waits for it: not at the lower priority of background work
    assert view.calls[0][2] == own


def test_a_search_waits_for_a_long_first_build_only_so_long() -> None:
    view = RecordingView()
    gate = threading.Event()  # the build goes on until the test lets it end
    recorded = view.refresh
    view.refresh = lambda changed=None: (recorded(changed), gate.wait(20))  # type: ignore[method-assign]
    indexer = SearchIndexer(view, Foreground(quiet_seconds=QUIET, max_defer=10))  # type: ignore[arg-type]

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(indexer.run)
            started = time.monotonic()
            await wait_for_first_builds([indexer], timeout=0.3)
            waited = time.monotonic() - started
            assert 0.3 - 0.01 <= waited < 2.3 and not indexer.built.is_set()
            assert view.calls  # it was started, and still runs
            gate.set()
            with trio.fail_after(5):
                await indexer.built.wait()
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_the_indexer_runs_in_a_nicer_thread_and_leaves_the_others_alone() -> None:
    view = RecordingView()
    indexer = SearchIndexer(view, Foreground(quiet_seconds=0.0, max_defer=0.0))  # type: ignore[arg-type]
    mine = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, mine)

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(indexer.run)
            with trio.fail_after(5):
                await trio.to_thread.run_sync(view.refreshed.wait)
            nursery.cancel_scope.cancel()
        # trio's cached worker threads (foreground work) keep their priority
        assert (
            await trio.to_thread.run_sync(
                lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            )
            == before
        )

    trio.run(scenario)
    _, thread, niceness = view.calls[0]
    assert thread != mine
    assert niceness > before or before == 19
    assert os.getpriority(os.PRIO_PROCESS, mine) == before


def test_a_background_thread_hands_back_its_result_and_its_error() -> None:
    async def scenario() -> None:
        assert await run_in_background_thread(lambda: 42) == 42
        with pytest.raises(ZeroDivisionError):
            await run_in_background_thread(lambda: 1 // 0)

    trio.run(scenario)


def test_give_way_sleeps_in_a_background_thread_while_requests_are_served() -> None:
    """Mid-work (the indexer between rows): a request in flight holds the thread until
    it ended and the mount was quiet for a moment; a quiet mount does not hold it."""
    foreground = Foreground(quiet_seconds=QUIET, max_defer=10)
    foreground.last_active = time.monotonic() - 1  # long quiet
    gave_way = threading.Event()
    thread = threading.Thread(target=lambda: (foreground.give_way(), gave_way.set()))
    thread.start()
    assert gave_way.wait(5)  # quiet: straight through
    thread.join(5)
    foreground.started()
    gave_way.clear()
    thread = threading.Thread(target=lambda: (foreground.give_way(), gave_way.set()))
    thread.start()
    assert not gave_way.wait(0.3)  # the request is still being served
    ended = time.monotonic()
    foreground.finished()
    assert gave_way.wait(5)
    assert time.monotonic() - ended >= QUIET - 0.01
    thread.join(5)


def test_give_way_to_a_mount_never_quiet_waits_at_most_max_defer_then_works_as_long() -> None:
    foreground = Foreground(quiet_seconds=QUIET, max_defer=0.3)
    foreground.started()  # a client that never pauses
    started = time.monotonic()
    foreground.give_way()
    assert time.monotonic() - started >= 0.3 - 0.01
    again = time.monotonic()
    foreground.give_way()  # within the next max_defer of work: no wait
    assert time.monotonic() - again < 0.3


def test_the_index_calls_between_rows_while_it_indexes_and_the_indexer_hooks_it(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "agent" / "sessions"
    write_header_session(sessions / "p", "s", "s-id")
    path = sessions / "p" / "s.jsonl"
    lines = [
        f'{{"type":"message","id":"m{i}","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",'
        f'"message":{{"role":"user","content":"word{i}"}}}}\n'
        for i in range(300)
    ]
    with open(path, "a") as out:
        out.writelines(lines)
    calls: list[int] = []
    index = SearchIndex(tmp_path / "index.db")
    index.between_rows = lambda: calls.append(1)
    stats = index.update(sessions)
    index.close()
    assert stats.entries_indexed >= 300
    assert len(calls) >= 300 // 64  # every 64 rows, in the indexing thread
    view = SearchView(tmp_path / "cache", tmp_path / "agent")
    try:
        assert view.between_rows is None
        indexer = SearchIndexer(view, Foreground())
        assert view.between_rows == indexer._give_way
    finally:
        view.close()
