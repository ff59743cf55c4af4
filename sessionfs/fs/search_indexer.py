"""The mount's background search indexer: keeps `SearchView`'s index current.

Started by the daemon once the mount is up. Every update runs in a worker thread (the
event loop only waits): first the full build, then an update of the files known to
have changed, and now and then a full pass (one stat per session file: appends by
other processes, new, replaced, deleted files).

How it learns of changes decides how often it needs the full pass:

- With the agent dir's inotify watch (`sessionfs.fs.session_watch`) covering every
  project dir, each change to a session file arrives as an event, and the full pass
  is only a safety net every `WATCHED_FULL_PASS_INTERVAL` seconds (a session file
  that is a symlink raises no event). Sub-agent files (in artifacts dirs, not
  watched) are looked at when their parent changes and, for `ACTIVE_SECONDS` after
  that, on every tick: a sub-agent runs while its parent waits for it.
- Without it (another agent's dir, no inotify, the watch limit reached), a full pass
  every `FULL_PASS_INTERVAL` seconds.

The full pass is cheap in CPU (about 20 ms for 1,000 sessions) but not in what it does
to requests: a Python thread making a system call per file while requests are served
holds the GIL between them, so every system call of the event loop waits for it and a
futex wake. Measured on a 2-core VM during a warm ``grep -r`` over 1,000 transcripts: an
``open`` took 1.0-1.4 ms with a pass every second, 0.3 ms without.

Trouble never ends the task: it is in the root ``ctl`` (`SearchView.progress`) and the
next pass tries again.

The indexer gives way to requests (`sessionfs.fs.foreground`): every update first
waits for the mount to be quiet for a moment (bounded), and runs in a thread of lower
CPU priority. The first build most of all: it starts as the mount comes up, exactly
when a first ``cat`` parses its session, and it parses every session.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Protocol

import trio

from core.search_index import subagent_file_keys
from sessionfs.fs.foreground import (
    STARTUP_GRACE_SECONDS,
    Foreground,
    run_in_background_thread,
)
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.search_view import SearchView

__all__ = [
    "ACTIVE_SECONDS",
    "BURST_BATCH_DELAY",
    "CHANGE_BATCH_DELAY",
    "FIRST_BUILD_WAIT_SECONDS",
    "FULL_PASS_INTERVAL",
    "WATCHED_FULL_PASS_INTERVAL",
    "SearchIndexer",
    "WatchedSessions",
    "wait_for_first_builds",
]

log = logging.getLogger(__name__)

#: Seconds between full passes when no watch reports changes.
FULL_PASS_INTERVAL = 1.0
#: Seconds between full passes when the watch covers every project dir (a safety net).
WATCHED_FULL_PASS_INTERVAL = 30.0
#: How long after its parent session last changed a session's sub-agent files are
#: looked at on every tick (they are not watched).
ACTIVE_SECONDS = 600.0
#: The longest a search waits for the first build of the index (`wait_for_first_builds`):
#: enough for an agent dir of hundreds of sessions; a bigger one answers from what is
#: indexed by then (``ctl`` shows the progress).
FIRST_BUILD_WAIT_SECONDS = 3.0
#: Seconds a change waits for more before its update runs: a burst of appends through
#: the mount then costs one update instead of one per append (each competes with the
#: appends for the CPU and the GIL).
CHANGE_BATCH_DELAY = 0.2
#: The longest changes gather while the mount keeps taking writes (`Foreground.writing`:
#: a script filling ``append/``): an update has a cost of its own besides what it
#: indexes (a thread, its checks, a transaction, the GIL it shares with the requests),
#: ~20 µs of daemon CPU a file of such a script with one update every
#: `CHANGE_BATCH_DELAY` (issue 26 point 7). A single append is indexed as soon as before.
BURST_BATCH_DELAY = 1.0


class WatchedSessions(Protocol):
    """What the indexer asks of the agent dir's watch (`SessionWatch`)."""

    def covers_every_project(self) -> bool: ...


class SearchIndexer:
    """Wakes on session changes (`session_changed`, a `SessionCache` listener, and
    `session_file_changed` / `sessions_moved`, a `SessionWatch` listener).
    ``foreground``: the mount's requests, to wait for a quiet moment before each update
    (``None``: never wait). ``watch``: the watch of the view's sessions root, when
    there is one (the module docstring says what it changes)."""

    def __init__(
        self,
        view: SearchView,
        foreground: Foreground | None = None,
        after: SearchIndexer | None = None,
        watch: WatchedSessions | None = None,
    ) -> None:
        self.view = view
        self.foreground = foreground
        #: an indexer whose first build goes first (the local agent dir's, before the
        #: other agents': two first builds at once would each take twice as long)
        self.after = after
        self.watch = watch
        #: set once the first build is done
        self.built = trio.Event()
        #: full passes run so far, the first build's included (tests, ``ctl``)
        self.full_passes = 0
        self._changed: set[str] = set()
        #: (project, stem) of watched sessions -> when they last changed (trio clock)
        self._active: dict[tuple[str, str], float] = {}
        self._full_pass_wanted = False
        self._wake = trio.Event()
        #: a search waits for the first build: it no longer waits for a quiet moment
        self._hurried = False
        self._quiet_wait: trio.CancelScope | None = None
        if foreground is not None:
            view.between_rows = self._give_way

    def _give_way(self) -> None:
        """In the indexing thread, between rows: pause while the mount serves requests
        (`Foreground.give_way`), unless a search is waiting for the first build."""
        if self.foreground is not None and not (self._hurried and not self.built.is_set()):
            self.foreground.give_way()

    def hurry(self) -> None:
        """A search is waiting for the first build: start it now, at the priority of
        requests. (Waiting for the mount to be quiet would wait for that very search's
        request to end.)"""
        if self.built.is_set():
            return
        self._hurried = True
        if self._quiet_wait is not None:
            self._quiet_wait.cancel()

    def session_changed(self, session: LoadedSession, replaced: bool) -> None:
        self._changed.add(str(session.ref.path))
        self._wake.set()

    def session_file_changed(self, project: str, stem: str) -> None:
        self._changed.add(os.path.join(self.view.sessions_root, project, stem + ".jsonl"))
        self._active[(project, stem)] = trio.current_time()
        self._wake.set()

    def sessions_moved(self) -> None:
        self._full_pass_wanted = True
        self._wake.set()

    def full_pass_interval(self) -> float:
        watched = self.watch is not None and self.watch.covers_every_project()
        return WATCHED_FULL_PASS_INTERVAL if watched else FULL_PASS_INTERVAL

    async def run(self) -> None:
        """Run until cancelled (the mount's nursery ends it at unmount)."""
        if self.foreground is not None:
            self.foreground.touch(STARTUP_GRACE_SECONDS)  # the mount just came up
        if self.after is not None:
            await self.after.built.wait()
        await self._update(None)  # the first build
        self.built.set()
        last_full = trio.current_time()
        while True:
            with trio.move_on_after(FULL_PASS_INTERVAL):
                await self._wake.wait()
                await trio.sleep(CHANGE_BATCH_DELAY)
            if self._wake.is_set():
                await self._while_written_through()
            self._wake = trio.Event()
            changed, self._changed = sorted(self._changed), set()
            # Changes coming faster than the interval must not starve the full pass.
            now = trio.current_time()
            if (
                self._full_pass_wanted
                or self.view.wants_full_pass()
                or now - last_full >= self.full_pass_interval()
            ):
                self._full_pass_wanted = False
                await self._update(None)
                last_full = trio.current_time()
                continue
            active = self._active_sessions(now)
            if changed or active:
                await self._update(changed, active)

    async def _while_written_through(self) -> None:
        """Let changes gather while the mount keeps taking writes, `BURST_BATCH_DELAY`
        at most since the first of them (`CHANGE_BATCH_DELAY` gone already)."""
        foreground = self.foreground
        waited = CHANGE_BATCH_DELAY
        while (
            foreground is not None
            and waited < BURST_BATCH_DELAY
            and foreground.writing(CHANGE_BATCH_DELAY)
        ):
            await trio.sleep(CHANGE_BATCH_DELAY)
            waited += CHANGE_BATCH_DELAY

    def _active_sessions(self, now: float) -> list[tuple[str, str]]:
        """Watched sessions that changed lately and have an artifacts dir: their
        sub-agents may be running (one stat each, on the event loop: no thread)."""
        root = self.view.sessions_root
        for key, when in list(self._active.items()):
            if now - when > ACTIVE_SECONDS:
                del self._active[key]
        return [key for key in self._active if os.path.isdir(os.path.join(root, *key))]

    async def _update(
        self, changed: list[str] | None, active: list[tuple[str, str]] | None = None
    ) -> None:
        """Index ``changed`` and the sub-agent files of the ``active`` sessions, or
        every file when ``changed`` is None."""
        awaited = self._hurried and not self.built.is_set()  # a search waits for it
        if self.foreground is not None and not awaited:
            with trio.CancelScope() as self._quiet_wait:
                await self.foreground.quiet()
            self._quiet_wait = None
            awaited = self._hurried and not self.built.is_set()  # hurried meanwhile
        if changed is None:
            self.full_passes += 1
        root = str(self.view.sessions_root)

        def refresh() -> None:
            paths = changed
            if paths is not None and active:
                paths = paths + [
                    os.path.join(root, *parts)
                    for project, stem in active
                    for parts in subagent_file_keys(root, project, stem)
                ]
                if not paths:
                    return  # artifacts dirs without sub-agent files (an empty list is "all")
            self.view.refresh(paths)

        try:
            # Cancelled (an unmount must not wait for a long first build), the thread
            # finishes its transaction on its own and the index stays consistent.
            await run_in_background_thread(
                refresh, name="search-indexer", lower_priority=not awaited
            )
        except Exception as exc:
            log.exception("search indexer: update failed")
            self.view.progress.trouble(f"{type(exc).__name__}: {exc}", clears=True)


async def wait_for_first_builds(indexers: Sequence[SearchIndexer], timeout: float) -> None:
    """Wait (at most ``timeout`` seconds) until every indexer's first build is done, so
    that a search made right after mounting sees every session of a small agent dir
    instead of an index still empty."""
    waiting = [indexer for indexer in indexers if not indexer.built.is_set()]
    if not waiting:
        return
    for indexer in waiting:
        indexer.hurry()
    with trio.move_on_after(timeout):
        for indexer in waiting:
            await indexer.built.wait()
