"""The mount's background search indexer: keeps `SearchView`'s index current.

Started by the daemon once the mount is up. Every update runs in a worker thread (the
event loop only waits): first the full build, then an update whenever the session
cache sees a session change (that file only) and a full stat pass every
`FULL_PASS_INTERVAL` seconds (appends by other processes, new, replaced, deleted files).
Trouble never ends the task: it is in the root ``ctl`` (`SearchView.progress`) and the
next pass tries again.

The indexer gives way to requests (`sessionfs.fs.foreground`): every update first
waits for the mount to be quiet for a moment (bounded), and runs in a thread of lower
CPU priority. The first build most of all: it starts as the mount comes up, exactly
when a first ``cat`` parses its session, and it parses every session.
"""

from __future__ import annotations

import logging

import trio

from sessionfs.fs.foreground import (
    STARTUP_GRACE_SECONDS,
    Foreground,
    run_in_background_thread,
)
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.search_view import SearchView

__all__ = ["FULL_PASS_INTERVAL", "SearchIndexer"]

log = logging.getLogger(__name__)

#: Seconds between full passes (one stat per session file: cheap).
FULL_PASS_INTERVAL = 1.0
#: Seconds a change waits for more before its update runs: a burst of appends through
#: the mount then costs one update instead of one per append (each competes with the
#: appends for the CPU and the GIL).
CHANGE_BATCH_DELAY = 0.2


class SearchIndexer:
    """Wakes on session changes (`session_changed`, a `SessionCache` listener).
    ``foreground``: the mount's requests, to wait for a quiet moment before each update
    (``None``: never wait)."""

    def __init__(
        self,
        view: SearchView,
        foreground: Foreground | None = None,
        after: SearchIndexer | None = None,
    ) -> None:
        self.view = view
        self.foreground = foreground
        #: an indexer whose first build goes first (the local agent dir's, before the
        #: other agents': two first builds at once would each take twice as long)
        self.after = after
        #: set once the first build is done
        self.built = trio.Event()
        self._changed: set[str] = set()
        self._wake = trio.Event()

    def session_changed(self, session: LoadedSession, replaced: bool) -> None:
        self._changed.add(str(session.ref.path))
        self._wake.set()

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
            self._wake = trio.Event()
            changed, self._changed = sorted(self._changed), set()
            # Changes coming faster than the interval must not starve the full pass.
            if not changed or trio.current_time() - last_full >= FULL_PASS_INTERVAL:
                await self._update(None)
                last_full = trio.current_time()
            else:
                await self._update(changed)

    async def _update(self, changed: list[str] | None) -> None:
        if self.foreground is not None:
            await self.foreground.quiet()
        try:
            # Cancelled (an unmount must not wait for a long first build), the thread
            # finishes its transaction on its own and the index stays consistent.
            await run_in_background_thread(
                lambda: self.view.refresh(changed), name="search-indexer"
            )
        except Exception as exc:
            log.exception("search indexer: update failed")
            self.view.progress.last_error = f"{type(exc).__name__}: {exc}"
