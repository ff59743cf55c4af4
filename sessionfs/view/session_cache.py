"""The loaded sessions: ``SessionCache``, an LRU bounded by ``--cache-mb``.

Every access first makes sure the session is fresh (at most one stat per
``FRESH_INTERVAL``), which is what makes other processes' appends show up live.

Concurrency: all core work runs in worker threads (``trio.to_thread``) under a
per-session ``trio.Lock``, so one session's slow load or render never blocks the event
loop or any other session, and a session's state never changes under a renderer.
Writes through the mount (``SessionCache.write``) take the same lock, so writes to one
session are serialised and a reader never sees half of one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, NoReturn, TypeVar

import trio

from core import NotASessionError, SessionManager
from core.errors import GuestWriteWouldWait
from core.zstd_files import TextPastItsBound, text_size_words
from sessionfs.view.agent_index import NEEDS_IO, AgentIndex, SessionRef
from sessionfs.view.agent_notes import AgentNotes, ForkLink, LeafChoice
from sessionfs.view.cache_counts import CacheCounts
from sessionfs.view.loaded_session import (
    ENTRY_LISTING,
    FRESH_INTERVAL,
    MADE_FROM_THE_INDEX,
    STREAMED_CONTEXT_FRACTION,
    LoadedSession,
    parses_entries,
)
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.rss_bound import RssBound

log = logging.getLogger(__name__)

T = TypeVar("T")


class NotASession(Exception):
    """The path is not (or no longer) a valid session file."""


# --- the cache ------------------------------------------------------------------------

ChangeListener = Callable[[LoadedSession, bool], None]


@dataclass(eq=False)
class PendingLabel:
    """A symlink made in ``labels/`` under a name GNU ``ln -sfn`` uses for its
    temporary link: held in memory, since a rename over the real name usually follows
    at once (`sessionfs.fs.nodes.entries.LabelsDir`). ``commit`` turns it into a real label
    (a name that merely looks temporary is still a label: committed when read,
    listed, after ``PENDING_LABEL_DELAY`` (entries.py), or at unmount)."""

    entry_id: str
    #: called with this record; does nothing if the record is no longer pending
    commit: Callable[[PendingLabel], Awaitable[None]]


#: What a write that only appends entries may go through (`SessionCache.write`):
#: None, the parsed session; "index", a manager of the file's tail, the session read
#: (its index knows the ids); "scan", the same without reading the session first.
Appends = Literal["index", "scan"] | None

#: What a write does to the leaf: "moved" (branch/reset: pin it, it is not in the
#: file), "recorded" (an append wrote it down: unpin), "kept" (title, flush, fork).
LeafEffect = Literal["moved", "recorded", "kept"]


#: Writes that may run on the event loop (``small=True``) do so only while the recent
#: ones took at most this long (seconds): a slow disk (a spinning one, a network file
#: system) sends them back to a worker thread. An fsync on a busy SSD or VM disk takes
#: 1-5 ms, and a thread hop costs 0.2-0.7 ms more on top; other requests wait behind an
#: inline append no longer than a human notices.
INLINE_WRITE_LIMIT = 0.010
#: Weight of the newest duration in the running average of small writes.
_INLINE_WEIGHT = 0.2
#: Growth of the estimated cost (by jobs and writes since the last RSS read) below
#: which a look at the cache skips the RSS read.
_RSS_CHECK_GROWTH = 1024 * 1024
#: Writes look at the whole cache's size (a sum over every loaded session) only once
#: they have grown it by this much since the last look (at most 1/64 of the budget): an
#: append adds a few hundred bytes, and the cost of a write must not grow with the
#: number of sessions loaded.
_EVICT_CHECK_GROWTH = 256 * 1024
#: What parsing a session and rendering it costs at its peak, per byte of its file, on
#: top of what the cache holds of it (tracemalloc on corpus sessions: 4.8x for
#: ``context.json``, 4.3x ``transcript.md``; allocator slack on top). The cache makes
#: that much room before a rendering starts.
RENDER_PEAK_FACTOR = 6
#: Memory beyond ``--cache-mb`` one rendering may use (the daemon's bound is
#: ``--cache-mb`` + 100 MB; its own baseline and the RSS check's slack take the rest).
RENDER_HEADROOM = 64 * 1024 * 1024
_MB = 1024 * 1024
#: Sets `SessionCache.largest_renderable` (bytes) instead of the budget: the tests
#: drive the path of files too big to render in memory with files of a few MB.
RENDER_LIMIT_ENV = "SESSIONFS_RENDER_LIMIT_BYTES"


#: What a session file too big to render still shows (the refusal says it).
_STILL_SERVED = (
    "entries/ and path/ still serve it entry by entry, an xcsh file's stats.json is "
    "made from their index, and the render workers "
    "transcript.md, transcript.html (the page at its leaf) and, of an xcsh, Claude "
    "Code or Codex file, context.json; a branch page is made only in memory, so not for "
    "a file this big"
)


def _render_limit_from_env() -> int | None:
    value = os.environ.get(RENDER_LIMIT_ENV, "")
    return int(value) if value.isdigit() else None


class _Changing:
    """`SessionCache._changing`: a plain context manager rather than a generator one
    (it wraps every ``close()`` in ``append/``, where each µs counts: issue 26 point 7)."""

    __slots__ = ("_cache", "_session")

    def __init__(self, cache: SessionCache, session: LoadedSession) -> None:
        self._cache = cache
        self._session = session

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        session = self._session
        try:
            if isinstance(exc, WriteRejected):
                session.record_refusal(exc)
                if exc.reload_session:
                    self._cache.drop(session)
        finally:
            for listener in self._cache.listeners:
                listener(session, False)
        if exc is None:
            session.last_error = None


class _LoadRefused(Exception):
    """A load refused (`SessionCache._load`'s thread to the event loop): the session
    and why."""

    def __init__(self, session: LoadedSession, exc: WriteRejected) -> None:
        super().__init__(exc.reason)
        self.session, self.exc = session, exc


def _text_refusal(session: LoadedSession, exc: TextPastItsBound) -> WriteRejected:
    """A compressed file that decompresses past its bound (`core.zstd_files`),
    as a refusal naming the file."""
    return WriteRejected(errno.EFBIG, f"{session.ref.path.name}: {exc.strerror}")


class SessionCache:
    """Loaded sessions, LRU-bounded by an estimate of their memory (async API)."""

    def __init__(
        self,
        index: AgentIndex,
        budget_bytes: int,
        after_eviction: Callable[[], None] = lambda: None,
        rss_bound: RssBound | None = None,
        new_session: Callable[[SessionRef], LoadedSession] | None = None,
        notes: AgentNotes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.index = index
        #: another agent's sessions: leaves chosen and forks started through the mount,
        #: kept in the cache dir (None: an xcsh agent dir, whose files hold them)
        self.notes = notes
        #: the time as `get` notes it (``used_at``) and the RSS check reads it; the
        #: freshness checks use ``time.monotonic`` (a test's clock stands still)
        self.clock = clock
        #: a listed session not loaded yet: an xcsh file's `LoadedSession` by default;
        #: another agent's mount passes one with that agent's reader (``opener``)
        self.new_session = new_session or (
            lambda ref: LoadedSession(ref=ref, blobs_dir=index.blobs_dir)
        )
        self.budget = budget_bytes
        #: `RENDER_LIMIT_ENV`, when set
        self.render_limit = _render_limit_from_env()
        #: the process's real RSS checked after each load and job (the daemon's; None:
        #: the estimate alone bounds the cache, as in tests of other things)
        self.rss_bound = rss_bound
        #: called after the cache let go of something (the daemon gives freed heap
        #: pages back to the OS there: `sessionfs.fs.memory.release_free_memory`)
        self.after_eviction = after_eviction
        self._sessions: OrderedDict[tuple[str, str], LoadedSession] = OrderedDict()
        #: why the last session that could not be read was skipped (a corrupt or
        #: locked store of another agent, junk in place of a session), for ``ctl``
        self.last_skip: str | None = None
        self._loading: dict[tuple[str, str], trio.Lock] = {}
        #: bytes writes added to the estimate since `_evict` last looked (see
        #: `_EVICT_CHECK_GROWTH`)
        self._growth_unchecked = 0
        #: bytes grown since the RSS was last read (see `_RSS_CHECK_GROWTH`)
        self._rss_growth_unchecked = 0
        self.listeners: list[ChangeListener] = []
        #: called with a session about to be dehydrated, while its listings still exist
        self.dehydrate_listeners: list[Callable[[LoadedSession], None]] = []
        #: told of a rendering refused as too big (another agent's session has no
        #: ``ctl`` of its own: its mount shows the reason in the root's)
        self.refusal_listeners: list[Callable[[LoadedSession, WriteRejected], None]] = []
        #: pinned leaves of sessions dropped after a failed write, restored on reload
        self._dropped_pins: dict[tuple[str, str], tuple[str | None]] = {}
        #: ``ctl``'s last_result/last_error of sessions dropped after a failed write:
        #: the reloaded session still says why the write failed
        self._dropped_outcomes: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        #: temporary symlinks made in session dirs (name -> target), per session
        self._pending_links: dict[tuple[str, str], dict[str, str]] = {}
        #: temporary-looking symlinks made in labels/ (name -> record), per session
        self._pending_labels: dict[tuple[str, str], dict[str, PendingLabel]] = {}
        #: running average of how long small writes took (seconds; `INLINE_WRITE_LIMIT`)
        self.small_write_seconds = 0.0
        #: loads, evictions and reloads right after an eviction (the root ``ctl``)
        self.counts = CacheCounts(clock)

    async def ref(self, project: str, stem: str) -> SessionRef | None:
        known = self.index.session_if_known(project, stem)  # one stat, on the event loop
        if known is NEEDS_IO:
            return await trio.to_thread.run_sync(self.index.session, project, stem)
        return known if isinstance(known, SessionRef) else None

    def loaded_fresh(self, project: str, stem: str) -> LoadedSession | None:
        """The session if it is loaded and unchanged on disk (at most one stat)."""
        session = self._sessions.get((project, stem))
        if session is None:
            return None
        if time.monotonic() - session.checked_at <= FRESH_INTERVAL:
            return session
        return session if session.unchanged_on_disk() else None

    async def get(
        self, project: str, stem: str, warm: str | None = None, *, load: bool = True
    ) -> LoadedSession:
        """The session, loaded and fresh; ``NotASession`` when there is none.
        ``load=False``: a session not in the cache yet is added without reading its
        file (an append may not need it read: `LoadedSession.appender`)."""
        key = (project, stem)
        session = self._sessions.get(key)
        if session is not None and self.index.shadowed(session.ref):
            self.drop(session)  # an archived copy whose live file is back: load that one
            session = None
        if session is None:
            lock = self._loading.setdefault(key, trio.Lock())
            try:
                async with lock:
                    session = self._sessions.get(key)
                    if session is None:
                        session = await self._load(project, stem, warm, load)
            finally:
                # Also after a failed load (not a session, vanished, a FIFO...):
                # nothing about a path that is not a session may stay behind.
                if self._loading.get(key) is lock and not lock.statistics().tasks_waiting:
                    del self._loading[key]
        self._sessions.move_to_end(key)
        session.used_at = now = self.clock()
        if now - session.checked_at > FRESH_INTERVAL:
            await self._refresh(session)
        return session

    async def _load(
        self, project: str, stem: str, warm: str | None, read: bool = True
    ) -> LoadedSession:
        """Find, check, parse (and render ``warm``, the file about to be read): all in
        one thread hop, which is most of what a first access costs besides the parse."""

        limit = self.largest_renderable()
        known = self.index.session_if_known(project, stem)
        heavy = warm is not None and warm != ENTRY_LISTING and parses_entries(warm)
        # (the text's size as the listing learnt it: no header read on the event loop)
        text = (
            known.text_if_known(known.size, known.mtime_ns)
            if isinstance(known, SessionRef)
            else None
        )
        if heavy and text is not None and text.size <= limit:
            self._make_room_to_render(None, text.size)

        def load() -> LoadedSession:
            ref = self.index.session(project, stem)
            if ref is None:
                raise NotASession(f"{project}/{stem}")
            # Too big to render: loaded (compact) without it; `render` says why.
            warming = warm if ref.text_size() <= limit or not heavy else None
            session = self.new_session(ref)
            session.whole_read_limit = limit  # bigger: not renderable, nor read whole
            session.parse_budget = self.budget  # a burst of appends parses within it
            session.pinned_leaf = self._dropped_pins.pop((project, stem), None)
            self._take_notes(session)
            outcome = self._dropped_outcomes.pop((project, stem), (None, None))
            session.last_result, session.last_error = outcome
            # (A leaf pinned before a drop goes back in place with a load: `load`.)
            if not read and session.opener is None and session.pinned_leaf is None:
                try:
                    session.look()
                except OSError as exc:  # gone since it was listed
                    raise NotASession(str(ref.path)) from exc
                return session
            try:
                session.load(warming)  # compact unless it must be parsed (module docstring)
            except NotASessionError as exc:  # e.g. replaced by junk since it was listed
                self.last_skip = str(exc) or str(ref.path)
                raise NotASession(str(ref.path)) from exc
            except TextPastItsBound as exc:  # untrusted: a decompression bomb, or corrupt
                raise _LoadRefused(session, _text_refusal(session, exc)) from None
            return session

        try:
            session = await trio.to_thread.run_sync(load)
        except _LoadRefused as refused:
            self._refuse(refused.session, refused.exc)
        self._sessions[(project, stem)] = session
        if session.is_loaded:
            self.counts.loaded(session.key)
        self._evict(keep=session)
        return session

    def _take_notes(self, session: LoadedSession) -> None:
        """A session of another agent being loaded: its leaf chosen through the mount
        (unless its file grew since: the agent continued it) and its fork links."""
        notes = self.notes
        if notes is None:
            return
        key = session.key
        session.links = notes.links(key) or None
        choice = notes.leaf(key)
        if choice is None or session.pinned_leaf is not None:
            return
        try:
            size = os.stat(session.ref.path).st_size  # the file as it is, not as listed
        except OSError:
            return  # gone: the load says so
        if size > choice.size:
            notes.set_leaf(key, None)
        else:
            session.pinned_leaf = (choice.leaf,)

    def noted(self, project: str, stem: str) -> bool:
        """Whether the session is shown otherwise than its file alone says (a leaf
        chosen through the mount, fork links): then only a loaded session's renderings
        are right, never those a render worker made from the file."""
        loaded = self._sessions.get((project, stem))
        if loaded is not None and loaded.pinned_leaf is not None:
            return True
        return self.notes is not None and self.notes.has_notes((project, stem))

    async def choose_leaf(self, session: LoadedSession, name: str | None) -> None:
        """Another agent's session: show entry ``name`` as its leaf (``None``: the
        agent's own), remembered in the notes; `WriteRejected` when it cannot be."""

        def choose() -> None:
            session.choose_leaf(name)
            if self.notes is not None:
                size = session.file_state[1]
                self.notes.set_leaf(session.key, None if name is None else LeafChoice(name, size))

        async with session.lock:
            with self._changing(session):
                await trio.to_thread.run_sync(choose)

    async def record_fork(self, link: ForkLink) -> None:
        """Remember a fork the mount started; the parent and the fork show it at once."""
        notes = self.notes
        if notes is None:
            return
        await trio.to_thread.run_sync(notes.add_fork, link)
        for key in (link.parent_key, link.child_key):
            session = self._sessions.get(key)
            if session is None:
                continue
            async with session.lock:
                session.links = notes.links(key) or None
                session.after_write(entries_changed=False)
            for listener in self.listeners:
                listener(session, False)

    async def _refresh(self, session: LoadedSession) -> None:
        if not session.lock.locked() and session.unchanged_on_disk():
            return  # the common case: one stat on the event loop, no thread hop
        async with session.lock:
            if session.unchanged_on_disk():
                return  # another task refreshed it while we waited
            try:
                changed = await trio.to_thread.run_sync(session.refresh)
            except FileNotFoundError:
                self.drop(session)
                raise NotASession(str(session.ref.path)) from None
            except NotASessionError as exc:  # e.g. another agent's store locked or corrupt
                self.last_skip = str(exc) or str(session.ref.path)
                self.drop(session)  # read again at the next access
                raise NotASession(str(session.ref.path)) from exc
            notes = self.notes
            if notes is not None and session.pinned_leaf is None and notes.leaf(session.key):
                await trio.to_thread.run_sync(notes.set_leaf, session.key, None)
        if changed:
            log.debug("%s changed (%d)", session.ref.path, changed)
            for listener in self.listeners:
                listener(session, changed < 0)

    async def recheck(self, project: str, stem: str) -> None:
        """Check a loaded session against its file now, even inside `FRESH_INTERVAL`:
        for a caller that knows the file has just changed (an agent run has ended), so
        that the very next read shows the change."""
        session = self._sessions.get((project, stem))
        if session is not None:  # not loaded: its next access reads the file anyway
            await self._recheck(session)

    async def recheck_loaded(self) -> None:
        """Check every loaded session against its file now, not at its next access (the
        store mount calls it after a refresh changed files): a change reaches the
        listeners, which drop what the kernel cached of it."""
        for session in list(self._sessions.values()):
            await self._recheck(session)

    async def _recheck(self, session: LoadedSession) -> None:
        with contextlib.suppress(NotASession):  # gone from disk: dropped by _refresh
            await self._refresh(session)

    async def run(self, session: LoadedSession, fn: Callable[[], T]) -> T:
        """Run ``fn`` (core work on this session) in a worker thread under its lock."""

        def readable() -> T:
            session.ensure_readable()
            return fn()

        async with session.lock:
            reloading = not session.is_loaded
            cost_before = 0 if reloading else session.memory_cost()
            try:
                result = await trio.to_thread.run_sync(readable)
            except TextPastItsBound as exc:  # (read again since it was listed)
                self._refuse(session, _text_refusal(session, exc))
            except NotASessionError as exc:  # reloaded, and unreadable now (a locked store)
                self.last_skip = str(exc) or str(session.ref.path)
                self.drop(session)
                raise FileNotFoundError(errno.ENOENT, self.last_skip) from exc
        if reloading:
            self.counts.loaded(session.key)
            self._evict(keep=session)
        else:
            self._grew(session, session.memory_cost() - cost_before)
        return result

    async def render(self, session: LoadedSession, what: str) -> bytes:
        cached = session.cached(what)
        if cached is not None:
            return cached
        if parses_entries(what) and session.manager is None:  # a parse of the file is coming
            if (
                what in MADE_FROM_THE_INDEX
                and session.opener is None  # (only an xcsh session is held compact)
                and session.text_size > self.largest_renderable()
            ):
                # Not from a parse when the session is held compact: checked and made
                # under one hold of its lock (loaded first if it was let go). Another
                # agent's is refused at once, not reloaded (a .zst decompressed into
                # the cache dir and indexed again) only to be refused.
                made = await self.run(session, lambda: session.rendered_from_index(what))
                if made is not None:
                    return made
            self._check_renderable(session, what)
            self._make_room_to_render(session, session.text_size)
        return await self.run(session, lambda: session.rendered(what))

    def largest_renderable(self) -> int:
        """The largest session file (bytes) whose renderings this cache makes: parsing
        and rendering it fits in ``--cache-mb`` + `RENDER_HEADROOM` (53 MB with the
        default 256). A bigger one's ``transcript.md`` and ``context.json`` are
        rendered a message at a time by the render workers, into the cache dir."""
        if self.render_limit is not None:
            return self.render_limit
        return (self.budget + RENDER_HEADROOM) // RENDER_PEAK_FACTOR

    def largest_parsed_to_render(self) -> int:
        """The largest session file (bytes) a render worker renders from its whole
        parse; a bigger one's ``transcript.md``, ``transcript.html`` and
        ``context.json`` are written a message at a time (as the daemon writes
        ``context.json`` past the same size: `STREAMED_CONTEXT_FRACTION`). A parse
        costs up to 9 times a file of many short entries, a worker's own baseline
        aside (a 200,000-entry 49 MB one took a worker to 477 MB for its
        ``transcript.md``, issue 26 point 6)."""
        return self.largest_renderable() // STREAMED_CONTEXT_FRACTION

    def _check_renderable(self, session: LoadedSession, what: str) -> None:
        """`WriteRejected` (``EFBIG``, kept for ``ctl``) when rendering ``what`` would
        parse a file so big that the daemon would go past its memory bound; the
        session's entries are still served one by one (they need no rendering of the
        whole). A session held parsed (a write needed it) renders without a parse and
        is not asked. A compressed file is judged by its text's size (a small
        ``.jsonl.zst`` may hold hundreds of MB)."""
        text = session.text_info
        limit = self.largest_renderable()
        if text.size <= limit:
            return
        exc = WriteRejected(
            errno.EFBIG,
            f"{what}: {text_size_words(session.ref.path, text)}; with --cache-mb "
            f"{self.budget / _MB:.0f} a rendering parses at most {limit / _MB:.0f} MB "
            f"({_STILL_SERVED}; a bigger --cache-mb raises the limit)",
        )
        self._refuse(session, exc)

    def _refuse(self, session: LoadedSession, exc: WriteRejected) -> NoReturn:
        """Raise ``exc`` for ``session``, kept for its ``ctl`` and the listeners' (the
        root ``ctl``, for another agent's)."""
        session.record_refusal(exc)
        for listener in self.refusal_listeners:
            listener(session, exc)
        raise exc

    def _make_room_to_render(self, keep: LoadedSession | None, file_size: int) -> None:
        """Let go of least recently used sessions so that a parse and rendering of a
        ``file_size`` session fits in the budget with what stays cached."""
        need = file_size * RENDER_PEAK_FACTOR
        total = sum(s.memory_cost() for s in self._sessions.values())
        if total + need > self.budget and self._free(keep, total + need - self.budget):
            self.after_eviction()

    def pending_links(self, project: str, stem: str) -> dict[str, str]:
        """The temporary symlinks of one session dir (name -> target; read only).
        GNU ``ln -sf`` makes one and renames it over ``leaf``; they are kept apart
        from the LRU so eviction cannot lose one between the two calls."""
        return self._pending_links.get((project, stem), {})

    def set_pending_link(self, project: str, stem: str, name: str, target: str | None) -> None:
        """Add (or with ``None`` remove) a temporary symlink; empty sets are not kept."""
        key = (project, stem)
        links = self._pending_links.setdefault(key, {})
        if target is None:
            links.pop(name, None)
        else:
            links[name] = target
        if not links:
            del self._pending_links[key]

    def pending_labels(self, project: str, stem: str) -> dict[str, PendingLabel]:
        """Temporary-looking symlinks in one session's ``labels/`` (read only)."""
        return self._pending_labels.get((project, stem), {})

    def add_pending_label(self, project: str, stem: str, name: str, record: PendingLabel) -> None:
        self._pending_labels.setdefault((project, stem), {})[name] = record

    def take_pending_label(
        self, project: str, stem: str, name: str, record: PendingLabel | None = None
    ) -> PendingLabel | None:
        """Remove and return the pending label ``name`` (only if it is still ``record``,
        when given). Synchronous, so exactly one of a rename, an unlink, a reader and the
        timer gets it: the others find it gone."""
        labels = self._pending_labels.get((project, stem))
        if labels is None:
            return None
        found = labels.get(name)
        if found is None or (record is not None and found is not record):
            return None
        del labels[name]
        if not labels:
            del self._pending_labels[(project, stem)]
        return found

    async def commit_pending_labels(self) -> None:
        """Make every pending label real (at unmount: none may be lost)."""
        for labels in list(self._pending_labels.values()):
            for record in list(labels.values()):
                try:
                    await record.commit(record)
                except Exception:  # logged; the others still get their turn
                    log.exception("committing a pending label failed")

    def drop(self, session: LoadedSession) -> None:
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
            if session.pinned_leaf is not None:
                self._dropped_pins[session.key] = session.pinned_leaf
            if session.last_result is not None or session.last_error is not None:
                self._dropped_outcomes[session.key] = (session.last_result, session.last_error)

    async def write(
        self,
        session: LoadedSession,
        fn: Callable[[SessionManager], T],
        *,
        leaf: LeafEffect = "kept",
        small: bool = False,
        memory_only: bool = False,
        appends: Appends = None,
    ) -> T:
        """Apply one write through the mount: ``fn(manager)`` (a `session_writer` call)
        in a worker thread under the session's lock. Afterwards the renderings are
        stale, the kernel is told (listeners), and the outcome is kept for ``ctl``.

        ``appends`` (``fn`` only appends entries) lets ``fn`` have a manager of the
        file's tail instead of the parsed session (`LoadedSession.appender`): the cost
        of an append then grows with what it touches, not with the session (issue 26
        point 6). ``"scan"``: the appends refer to no entry, so a session not read yet
        is not read for them either (its ids are looked up in the file).

        ``small`` (an append of a few entries) may run on the event loop instead: the
        thread hop costs more than the append and its fsync (~200 us against ~150 us
        here), and a ``close()`` in ``append/`` waits for both. Only when nothing but
        that can happen (`_can_write_inline`), while recent small writes (timed
        wherever they ran) stayed under `INLINE_WRITE_LIMIT`, so a slow disk never
        stalls the other requests for long, and never waiting for an agent that holds
        the file or for omp's lock, nor catching up with what another process wrote:
        such a write stops before writing anything (`SessionManager.refusing_waits`)
        and is done again in a worker thread.
        ``memory_only`` (a leaf move: no disk I/O but the catch-up's stat) runs on the
        event loop under the same conditions except the disk's speed, and is not timed.

        A `WriteRejected` is recorded as ``last_error`` and re-raised; with
        ``reload_session`` (core latched a persistence error) the session is dropped,
        so the next access loads it from disk again and writes can work again once
        the disk has room, without remounting.
        """
        if self.index.is_archived(session.ref):  # its file is the archive's copy
            raise WriteRejected(errno.EROFS, f"{session.ref.stem}: only in the archive")

        def apply(inline: bool) -> T:
            if appends is None:
                manager = session.hydrated
            else:
                manager = session.appender(scan=appends == "scan")
            tail = manager is not session.manager
            count = manager.entry_count() if leaf == "moved" else 0
            started = time.perf_counter()
            try:
                if inline:
                    with manager.refusing_waits():
                        result = fn(manager)
                else:
                    result = fn(manager)
                if tail:
                    session.appended_through_tail()
            finally:
                # Even a refused write may have caught up with the file.
                if tail:
                    session.after_append()
                else:
                    moved_only = leaf == "moved" and manager.entry_count() == count
                    appended = manager.take_append_stat()
                    session.after_write(entries_changed=not moved_only, appended=appended)
            # (A refusal says nothing about the disk; nor does an append through the
            # tail, which reads megabytes and never runs inline.)
            if small and not tail:
                self._small_write_took(time.perf_counter() - started)
            return result

        cost_before = session.memory_cost()
        lock = session.lock
        # A write that runs inline reaches no checkpoint: while it runs no other task
        # can look at the session, so a free lock is not even taken for it (trio's
        # acquire and release cost ~10 Python calls on the path a ``close()`` in
        # ``append/`` waits for). A busy lock is waited for (a checkpoint); a write
        # that goes to a thread takes the free lock without one.
        taken = lock.locked()
        if taken:
            await lock.acquire()
        try:
            unread = not session.is_loaded  # let go since it was last used, or never read
            try:
                with _Changing(self, session):  # (`_changing`, one call less)
                    inline = (small or memory_only) and self._can_write_inline(session, disk=small)
                    if inline:
                        try:
                            result = apply(inline=True)
                        except GuestWriteWouldWait:
                            inline = False  # nothing was written: wait in a thread
                    if not inline:
                        if not taken:  # (still free: no checkpoint since it was looked at)
                            lock.acquire_nowait()
                            taken = True
                        result = await trio.to_thread.run_sync(apply, False)
            finally:
                if unread and session.is_loaded:  # read for this write
                    self.counts.loaded(session.key)
            if leaf == "moved":
                session.pinned_leaf = (session.leaf_id(),)
            elif leaf == "recorded":
                session.pinned_leaf = None
        finally:
            if taken:
                lock.release()
        self._grew(session, session.memory_cost() - cost_before)
        return result

    def _grew(self, session: LoadedSession, grown: int) -> None:
        """A job or write grew ``session``'s cost by ``grown`` bytes: look at the whole
        cache (a sum over every loaded session, and the RSS) only once such growth adds
        up to `_EVICT_CHECK_GROWTH`. Reading a listed session's entry files grows
        nothing, and a first read of each grows it by one file: the cost of serving a
        file must not grow with the number of sessions loaded (issue 26: a sum and an
        RSS read per file were 15% of a cold read of every ``entries/*.json``)."""
        self._growth_unchecked += max(grown, 0)
        self._rss_growth_unchecked += max(grown, 0)
        if self._growth_unchecked > min(_EVICT_CHECK_GROWTH, self.budget // 64):
            self._evict(keep=session, rss=self._rss_growth_unchecked > _RSS_CHECK_GROWTH)

    def _changing(self, session: LoadedSession) -> _Changing:
        """Around a change through the mount: a refusal is kept for ``ctl`` (and a
        session whose core latched a persistence error is dropped, to be read from
        disk again), the listeners are told either way, and success clears
        ``last_error``."""
        return _Changing(self, session)

    def _can_write_inline(self, session: LoadedSession, *, disk: bool) -> bool:
        """True when a small write can only append and fsync (a leaf move: change
        memory): parsed, already on disk with no migration rewrite pending, and with
        ``disk``, the disk fast lately. (A file changed since core's last look, which
        would need a catch-up or a reload, an agent holding the file and omp's lock are
        found by the write itself, which then stops: see `write`. The catch-up's own
        stat decides, so the file is not stat'ed here too: one system call fewer on a
        ``close()`` in ``append/``.) An append through a manager of the file's tail
        never runs inline: the index it leaves up to date
        (`LoadedSession.after_append`) copies a file of megabytes."""
        manager = session.manager
        return (
            manager is not None
            and manager.is_on_disk
            and not manager.needs_rewrite
            and (not disk or self.small_write_seconds <= INLINE_WRITE_LIMIT)
        )

    def _small_write_took(self, seconds: float) -> None:
        # From worker threads too: losing one update of an average does no harm.
        self.small_write_seconds += _INLINE_WEIGHT * (seconds - self.small_write_seconds)

    def loaded(self) -> list[LoadedSession]:
        return list(self._sessions.values())

    def ctl_items(self, name: str = "cache") -> list[tuple[str, object]]:
        """The root ``ctl``'s lines about this cache: what it holds against its budget,
        and its `CacheCounts`."""
        held = sum(1 for s in self._sessions.values() if s.is_loaded)
        total = sum(s.memory_cost() for s in self._sessions.values())
        summary = f"{held} sessions loaded, {total / _MB:.1f} of {self.budget / _MB:.0f} MB"
        return [(name, summary), *self.counts.ctl_items(name)]

    def peek(self, project: str, stem: str) -> LoadedSession | None:
        """The session if it is in the cache (hydrated or not), as it is: no I/O, no
        freshness check, no change to its LRU place."""
        return self._sessions.get((project, stem))

    def _evict(self, keep: LoadedSession, rss: bool = True) -> None:
        """Keep what the cache holds under the budget (its own accounting, each
        session's `LoadedSession.memory_cost`), letting go least recently used sessions
        first; ``keep`` (the session being served) always stays. Then the real RSS
        (`RssBound`) as a check on what the accounting misses: over its limit, it lets
        go only sessions idle for `RssBound.idle_seconds`. Letting go frees Python
        objects, which rarely hands pages back to the OS, so an RSS over the limit says
        little about what the sessions in use cost; evicting them for it made a cold
        read evict the very sessions it was about to read, and load each twice (issue
        26). ``rss=False`` skips the RSS read (little has grown since the last)."""
        self._growth_unchecked = 0
        total = sum(s.memory_cost() for s in self._sessions.values())
        freed = self._free(keep, total - self.budget) if total > self.budget else False
        bound = self.rss_bound if rss else None
        if bound is not None:
            self._rss_growth_unchecked = 0
        excess = bound.excess(self.budget) if bound is not None else 0
        if bound is not None and excess > 0:
            idle_since = self.clock() - bound.idle_seconds
            log.debug("RSS %d bytes over its bound: letting idle sessions go", excess)
            self._free(keep, excess, used_before=idle_since)
            bound.acted()
        elif freed:
            self.after_eviction()

    def _free(
        self, keep: LoadedSession | None, need: int, used_before: float = float("inf")
    ) -> bool:
        """Dehydrate, and if that is not enough forget, least recently used sessions
        (only those last used no later than ``used_before``) until their estimated cost freed
        reaches ``need``. True if any was let go."""
        freed = 0
        for forget in (False, True):
            for key in list(self._sessions):
                if freed >= need:
                    return freed > 0
                session = self._sessions[key]
                if session.used_at > used_before:
                    continue
                if session is keep or session.lock.locked() or session.pinned_leaf is not None:
                    continue
                if not forget and not session.is_loaded:
                    continue
                before = session.memory_cost()
                if session.is_loaded:
                    self.counts.evicted(key)
                if forget:
                    del self._sessions[key]
                else:
                    for listener in self.dehydrate_listeners:
                        listener(session)
                    session.dehydrate()
                freed += before - (0 if forget else session.memory_cost())
        return freed > 0
