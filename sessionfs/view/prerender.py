"""Rendering transcripts in worker processes: ``Prerenderer``.

A cold ``grep -r`` over ``transcripts/`` needs every session parsed and rendered once.
That is CPU work under the GIL, so it goes to a small process pool (both cores; ``spawn``ed
interpreters, never a ``fork`` of a process with threads; they end with the daemon). A
worker (`sessionfs.view.render_worker.render_transcript`: a module that imports only
what rendering needs, since the first read waits for the workers to start) validates
the session's cache file or renders the session with
the very renderer ``sessions/<p>/<s>/transcript.md`` uses and stores the result
(`sessionfs.view.render_cache`); it hands back a small `CachedRender`, and the
transcript's bytes only when they could not be stored. The daemon never parses these
sessions, so its memory does not grow with what ``grep`` reads. A transcript already in
the cache dir (after a remount) is validated by the daemon itself, in a thread
(`Prerenderer.validated`: one read of the cache file's head), with no worker hop.

Jobs are scheduled from trio without blocking the event loop: a job is submitted to
the pool and its completion wakes the waiting tasks through the trio token. What is
asked for now goes first; read-ahead (the next sessions in listing order) fills the
remaining worker slots, so a sequential ``grep -r`` finds them ready.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import time
from collections import OrderedDict, deque
from collections.abc import Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import trio

from core.session_stat import session_stat
from sessionfs.view.render_cache import TRANSCRIPT, CachedRender, FileIdentity, RenderCache
from sessionfs.view.render_worker import (
    RenderFailed,
    RenderOutcome,
    StreamedSibling,
    TooBigToHold,
    exit_with,
    render_transcript,
)
from sessionfs.view.streamed_files import STREAMED, STREAMED_AGENTS

__all__ = [
    "PAGE",
    "Prerenderer",
    "RenderFailed",
    "RenderOutcome",
    "TooBigToHold",
    "render_transcript",
]

log = logging.getLogger(__name__)

#: Worker processes: the machine this must run well on has two cores.
WORKERS = 2
#: A worker is replaced after this many jobs, a bound on what its heap can hold on to.
#: Not much lower: starting a worker (an interpreter and its imports) costs as much CPU
#: as rendering ~40 MB of sessions, and a first ``grep -r`` renders every session.
TASKS_PER_WORKER = 2000
#: Jobs handed to the pool per worker: one running and one waiting, so a worker starts
#: its next session without waiting for the daemon's event loop to hear of the last.
JOBS_PER_WORKER = 2
#: Records kept in memory (each is a few hundred bytes).
RECORDS_KEPT = 65536
#: How many sessions after the one asked for are rendered ahead.
READ_AHEAD = 8
#: How long read-ahead trusts its own look at a session file whose record was current
#: (seconds): a sequential ``grep -r`` then stats each file once ahead, not once per
#: session read before it. Only read-ahead trusts it: an open always looks.
AHEAD_TRUSTED_SECONDS = 1.0
#: What the pages' workers render (`Prerenderer.pages`).
PAGE = "transcript.html"


@dataclass(eq=False)
class _Job:
    path: Path
    key: str
    want_bytes: bool
    #: asked for now (not read-ahead): a streamed rendering's job writes its siblings too
    asked: bool = False
    done: trio.Event = field(default_factory=trio.Event)
    outcome: RenderOutcome | None = None
    error: BaseException | None = None


class Prerenderer:
    """Transcripts of session files, rendered and validated in worker processes
    (async API, event loop only). ``cache_root`` ``None``: no disk cache at all.

    ``what``: the rendering it makes, ``transcript.md`` (what ``transcripts/`` and
    ``grep -r`` read, rendered ahead) or ``transcript.html`` (the pages: only what is
    asked for, into a cache dir of their own, images inlined from ``blobs_dir``).
    ``pool_from``: another `Prerenderer` whose worker processes this one shares (the
    pages borrow the transcripts' two workers rather than starting two more)."""

    def __init__(
        self,
        sessions_root: Path,
        cache_root: Path | None,
        workers: int = WORKERS,
        agent: str = "xcsh",
        what: str = TRANSCRIPT,
        blobs_dir: Path | None = None,
        pool_from: Prerenderer | None = None,
        stream_over: int | None = None,
        siblings_over: int | None = None,
    ) -> None:
        self.sessions_root = sessions_root
        #: which agent's format the session files are in (`render_transcript`)
        self.agent = agent
        self.cache_root = cache_root
        self.workers = workers
        self.what = what
        self.blobs_dir = blobs_dir
        self.pool_from = pool_from
        #: session files bigger than this (bytes) are rendered a message at a time,
        #: into the cache file (`_render_streamed`): `SessionCache.largest_parsed_to_render`
        self.stream_over = stream_over
        #: a streamed job writes the other streamed renderings too only for files
        #: bigger than this (`render_transcript`): the daemon's `largest_renderable`
        self.siblings_over = siblings_over
        #: the renderings of these session files with a cache dir, of this one and of
        #: its siblings (one dict shared by them): a streamed rendering's job writes
        #: the others from the same index (`_render_streamed`)
        self._family: dict[str, StreamedSibling] = (
            pool_from._family if pool_from is not None else {}
        )
        if cache_root is not None:
            blobs = str(blobs_dir) if blobs_dir is not None else None
            self._family[what] = (what, str(cache_root), blobs)
        self._pool: ProcessPoolExecutor | None = None
        self._records: OrderedDict[Path, CachedRender] = OrderedDict()
        self._jobs: dict[Path, _Job] = {}
        self._queue: deque[_Job] = deque()
        self._running = 0
        #: where each listed session file is in its project's listing
        self._listed_at: dict[Path, tuple[_Listed, int]] = {}
        #: paths read-ahead is checking in the cache dir now (set when done)
        self._checking: dict[Path, trio.Event] = {}
        #: path -> when read-ahead last found its record current (`time.monotonic`)
        self._ahead_current: dict[Path, float] = {}
        self._closed = False
        #: sessions parsed by workers, and cache files found valid (ctl shows them)
        self.rendered_count = 0
        self.reused_count = 0

    def pages(self, cache_root: Path | None, blobs_dir: Path | None) -> Prerenderer:
        """The workers of the same session files' ``transcript.html``: this one's
        processes, their own cache dir (``cache_root``)."""
        return self.sibling(PAGE, cache_root, blobs_dir)

    def sibling(
        self, what: str, cache_root: Path | None, blobs_dir: Path | None = None
    ) -> Prerenderer:
        """The workers of another rendering ``what`` of the same session files: this
        one's processes, their own cache dir (``cache_root``). ``context.json``'s serve
        only the files too big for the daemon to render (`stream_over`)."""
        return Prerenderer(
            self.sessions_root,
            cache_root,
            self.workers,
            self.agent,
            what=what,
            blobs_dir=blobs_dir,
            pool_from=self,
            stream_over=self.stream_over,
            siblings_over=self.siblings_over,
        )

    # -- what the nodes ask --------------------------------------------------------

    def known(self, path: Path, identity: FileIdentity) -> CachedRender | None:
        """The record for ``path`` if it is for exactly ``identity`` (no work)."""
        record = self._records.get(path)
        if record is None or record.identity != identity:
            return None
        self._records.move_to_end(path)
        return record

    async def validated(self, path: Path, identity: FileIdentity) -> CachedRender | None:
        """The record for ``path`` at ``identity`` from its cache file, checked in a
        thread of the daemon (a read of the file's head: no worker hop, no parse).
        What a remount with the cache dir kept finds for every unchanged session."""
        checking = self._checking.get(path)
        if checking is not None:  # read-ahead is checking it right now: its answer
            await checking.wait()
            return self.known(path, identity)
        if self.cache_root is None or path in self._jobs:
            return None  # a worker is on it already: its outcome is the answer
        record = await trio.to_thread.run_sync(
            RenderCache(self.cache_root, self.what).validate, self._key(path), identity
        )
        if record is not None:
            self._found(path, record)
        return record

    async def outcome(self, path: Path, want_bytes: bool = False) -> RenderOutcome:
        """Validate or render ``path`` now (ahead of any read-ahead); raises
        `RenderFailed` when it is not a session (any more), `TooBigToHold` when its
        rendering has nowhere to go."""
        job = self._jobs.get(path)
        if job is None or (want_bytes and not job.want_bytes):
            job = _Job(path, self._key(path), want_bytes, asked=True)
            self._start(job, urgent=True)
        elif job in self._queue:
            self._queue.remove(job)  # asked for now: first in line
            self._queue.appendleft(job)
            job.asked = True
        await job.done.wait()
        if isinstance(job.error, TooBigToHold):
            raise TooBigToHold(str(job.error))
        if job.error is not None:
            raise RenderFailed(str(job.error)) from job.error
        assert job.outcome is not None
        return job.outcome

    def read_ahead(self, paths: Iterable[Path]) -> None:
        """Get ``paths`` ready behind what is asked for now, unless known: their cache
        files are checked in a daemon thread (after a remount most are valid), and the
        others queued for the workers, in order."""
        wanted = []
        now = time.monotonic()
        for path in paths:
            if path in self._jobs or path in self._checking:
                continue
            if now - self._ahead_current.get(path, -AHEAD_TRUSTED_SECONDS) < AHEAD_TRUSTED_SECONDS:
                continue
            record = self._records.get(path)
            if record is not None and _current(path) == record.identity:
                if len(self._ahead_current) >= RECORDS_KEPT:
                    self._ahead_current.clear()
                self._ahead_current[path] = now
                continue
            wanted.append(path)
        if not wanted:
            return
        if self.cache_root is None:
            self._queue_for_workers(wanted)
            return
        done = trio.Event()
        for path in wanted:
            self._checking[path] = done
        trio.lowlevel.spawn_system_task(self._check_ahead, wanted, done)

    async def _check_ahead(self, paths: list[Path], done: trio.Event) -> None:
        """Read-ahead's check of cache files (a system task: nothing but its own
        cancellation at unmount may leave it)."""
        assert self.cache_root is not None
        cache = RenderCache(self.cache_root, self.what)
        keys = [self._key(path) for path in paths]

        def check() -> list[CachedRender | None]:
            return [_validate_current(cache, p, k) for p, k in zip(paths, keys, strict=True)]

        try:
            found = await trio.to_thread.run_sync(check)
        except Exception:  # a bug, not a missing file (that is None): render instead
            log.exception("read-ahead check failed")
            found = [None] * len(paths)
        finally:
            for path in paths:
                if self._checking.get(path) is done:
                    del self._checking[path]
            done.set()
        missing = []
        for path, record in zip(paths, found, strict=True):
            if record is not None:
                self._found(path, record)
            else:
                missing.append(path)
        self._queue_for_workers(missing)

    def _queue_for_workers(self, paths: list[Path]) -> None:
        for path in paths:
            if path not in self._jobs:
                self._start(_Job(path, self._key(path), want_bytes=False), urgent=False)

    def _found(self, path: Path, record: CachedRender) -> None:
        self._remember(path, record)
        self.reused_count += 1

    def listed(self, paths: list[Path]) -> None:
        """A project's sessions were listed (in this order): render the first ones
        ahead, and remember the order for `read_ahead_after` (unless this very list
        is remembered already: a reused listing, opened again by each warm ``grep -r``,
        whose first sessions read-ahead then looked at lately: not again)."""
        first = self._listed_at.get(paths[0]) if paths else None
        if first is None or first[0].paths is not paths:
            listed = _Listed(paths)
            for at, path in enumerate(paths):
                self._listed_at[path] = (listed, at)
            while len(self._listed_at) > RECORDS_KEPT:
                del self._listed_at[next(iter(self._listed_at))]
        else:
            listed = first[0]
        now = time.monotonic()
        if now - listed.head_since >= AHEAD_TRUSTED_SECONDS:
            listed.head_since = now
            if now - listed.ahead_since >= AHEAD_TRUSTED_SECONDS:
                # What read-ahead asks for now is the window `read_ahead_after` would
                # ask for at the first session's open: recorded, that open asks only for
                # the one session after it. (A window trusted still is another read
                # going on in this listing: kept, it is the one its next open goes on.)
                listed.ahead_since, listed.ahead_start, listed.ahead_stop = now, 0, READ_AHEAD
            self.read_ahead(paths[:READ_AHEAD])

    def read_ahead_after(self, path: Path) -> None:
        """``path`` is being read: queue the sessions listed after it."""
        found = self._listed_at.get(path)
        if found is None:
            return
        listed, at = found
        start, stop = at + 1, at + 1 + READ_AHEAD
        now = time.monotonic()
        looked = listed.ahead_start <= start <= listed.ahead_stop
        if looked and now - listed.ahead_since < AHEAD_TRUSTED_SECONDS:
            # Read-ahead looked at the sessions from `start` up to `ahead_stop` lately
            # (a sequential read: all but the last of this window): only the others.
            start = listed.ahead_stop
            listed.ahead_stop = max(stop, listed.ahead_stop)
        else:
            listed.ahead_since, listed.ahead_start, listed.ahead_stop = now, start, stop
        if start < stop:
            self.read_ahead(listed.paths[start:stop])

    def close(self) -> None:
        """Stop the workers (at unmount); queued read-ahead is dropped."""
        log.info(
            "%s: %d rendered, %d found in the cache dir",
            "transcripts" if self.what == TRANSCRIPT else self.what,
            self.rendered_count,
            self.reused_count,
        )
        self._closed = True  # a read-ahead check finishing later starts no new pool
        self._queue.clear()
        if self._pool is not None:  # (a borrowed pool is its owner's to shut down)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # -- scheduling ----------------------------------------------------------------

    def _key(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.sessions_root))
        except ValueError:
            return str(path)

    def _start(self, job: _Job, urgent: bool) -> None:
        self._jobs[job.path] = job
        if urgent:
            self._queue.appendleft(job)
        else:
            self._queue.append(job)
        self._pump()

    def _pump(self) -> None:
        while self._running < self.workers * JOBS_PER_WORKER and self._queue:
            job = self._queue.popleft()
            self._running += 1
            self._submit(job)

    def _streamed_siblings(self) -> tuple[StreamedSibling, ...]:
        """The other renderings a streamed job writes too: `STREAMED_AGENTS`' files,
        streamed only past `stream_over` (the worker checks the file's size)."""
        if self.agent not in STREAMED_AGENTS or self.stream_over is None:
            return ()
        return tuple(
            sibling
            for what, sibling in self._family.items()
            if what != self.what and what in STREAMED
        )

    def _submit(self, job: _Job) -> None:
        token = trio.lowlevel.current_trio_token()
        cache_root = str(self.cache_root) if self.cache_root is not None else None
        blobs_dir = str(self.blobs_dir) if self.blobs_dir is not None else None
        try:
            future = self._executor().submit(
                render_transcript,
                str(job.path),
                job.key,
                cache_root,
                job.want_bytes,
                self.agent,
                self.what,
                blobs_dir,
                self.stream_over,
                self._streamed_siblings() if job.asked else (),
                self.siblings_over,
            )
        except RuntimeError as exc:  # the pool is shut down (unmounting)
            self._finish(job, None, exc)
            return

        def done(finished: Future[RenderOutcome]) -> None:
            error = finished.exception()
            outcome = finished.result() if error is None else None
            with contextlib.suppress(trio.RunFinishedError):  # the mount is gone
                token.run_sync_soon(self._finish, job, outcome, error)

        future.add_done_callback(done)

    def _finish(
        self, job: _Job, outcome: RenderOutcome | None, error: BaseException | None
    ) -> None:
        self._running -= 1
        job.outcome, job.error = outcome, error
        if self._jobs.get(job.path) is job:
            del self._jobs[job.path]
        if outcome is not None:
            self._remember(job.path, outcome.record)
            if outcome.rendered:
                self.rendered_count += 1
            else:
                self.reused_count += 1
        elif error is not None and not isinstance(error, (RenderFailed, TooBigToHold)):
            log.warning("rendering %s failed: %r", job.path, error)
        job.done.set()
        self._pump()

    def _remember(self, path: Path, record: CachedRender) -> None:
        self._records[path] = record
        self._records.move_to_end(path)
        while len(self._records) > RECORDS_KEPT:
            self._records.popitem(last=False)

    def _executor(self) -> ProcessPoolExecutor:
        if self._closed:
            raise RuntimeError("the render workers are stopped")
        if self.pool_from is not None:
            return self.pool_from._executor()
        if self._pool is None:
            # spawn: a fresh interpreter, never a fork of a process with threads
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                max_tasks_per_child=TASKS_PER_WORKER,
                initializer=exit_with,
                initargs=(os.getpid(),),
            )
        return self._pool


def _validate_current(cache: RenderCache, path: Path, key: str) -> CachedRender | None:
    """The record of ``path`` as it is now, from its cache file, if valid; the kernel
    starts reading a valid one's transcript (read-ahead: grep reads it next)."""
    identity = _current(path)
    return cache.validate(key, identity, prefetch=True) if identity is not None else None


class _Listed:
    """One listing of a project's sessions (`Prerenderer.listed`), and how far
    read-ahead went in it since when: a sequential read asks for each session once."""

    __slots__ = ("ahead_since", "ahead_start", "ahead_stop", "head_since", "paths")

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        #: when read-ahead last looked at the first sessions, at a listing
        self.head_since = -AHEAD_TRUSTED_SECONDS
        #: read-ahead looked at ``paths[ahead_start:ahead_stop]`` (asked for each)
        #: since ``ahead_since`` (`time.monotonic`)
        self.ahead_since = -AHEAD_TRUSTED_SECONDS
        self.ahead_start = self.ahead_stop = 0


def _current(path: Path) -> FileIdentity | None:
    try:
        return FileIdentity.of(session_stat(path))
    except OSError:
        return None
