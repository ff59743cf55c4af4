"""What the mount knows about the agent dir right now.

* ``AgentIndex``: the session files on disk. Listing reads one stat per file and the
  first 4 KiB of files it has not seen (the header is all a listing needs); headers are
  cached per inode, so an append never causes a re-read and a rewrite (new inode) does.
* ``LoadedSession``: one session loaded with ``SessionManager.open(browse=True,
  resolve_blobs=False)`` plus everything rendered from it, cached per *version*. The
  version goes up whenever ``catch_up()`` finds new lines or a replaced file.
* ``SessionCache``: the loaded sessions in an LRU bounded by ``--cache-mb``. Every
  access first makes sure the session is fresh (at most one stat per
  ``FRESH_INTERVAL``), which is what makes other processes' appends show up live.

Concurrency: all core work runs in worker threads (``trio.to_thread``) under a
per-session ``trio.Lock``, so one session's slow load or render never blocks the event
loop or any other session, and a session's state never changes under a renderer.
Writes through the mount (``SessionCache.write``) take the same lock, so writes to one
session are serialised and a reader never sees half of one.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import trio

from core import NotASessionError, SessionManager, jsonl, paths
from core.context import build_session_context, context_sources
from core.persist import blob_refs_in
from core.safe_open import open_regular
from sessionfs import render
from sessionfs.memory import release_free_memory
from sessionfs.names import entry_file_names
from sessionfs.write_errors import WriteRejected

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How old a freshness check may be before the next access repeats it (one stat).
FRESH_INTERVAL = 0.2
#: Header prefix read by listings (the spec's "first 4 KiB").
HEADER_PREFIX = 4096
#: In-memory size of a parsed session relative to its file size, for the LRU budget
#: (tracemalloc on fixture-shaped sessions: ~2.4 for the manager; plus our own
#: indexes and allocator slack, rounded up so RSS stays near the budget).
PARSED_SIZE_FACTOR = 4
#: Headers remembered by `AgentIndex` (LRU): enough for every session of a heavy
#: user's agent dir to list from memory, bounded so a huge dir cannot grow it for ever.
HEADER_CACHE_SIZE = 8192
#: Paths already logged as skipped (so a hostile file is logged once, not per listing).
SKIP_LOG_SIZE = 1024


#: ``AgentIndex.session_if_known``: the header has to be read first (a thread's job).
NEEDS_IO = object()


#: "not known without work" (see `LoadedSession.cached_leaf_name`)
UNKNOWN = object()


class NotASession(Exception):
    """The path is not (or no longer) a valid session file."""


# --- the files on disk ----------------------------------------------------------------


@dataclass(frozen=True)
class SessionRef:
    """A valid session file as a listing sees it (no full load)."""

    project: str
    stem: str
    path: Path
    header: dict[str, Any]
    mtime_ns: int
    size: int
    #: the file's permission bits: the session dir shows no more than these allow
    mode: int = 0o644

    @property
    def session_id(self) -> str:
        return str(self.header.get("id", ""))


def read_header(path: Path, prefix: int = HEADER_PREFIX) -> dict[str, Any] | None:
    """The header of a session file from its first ``prefix`` bytes, else ``None``.

    Like the loader: lines that are not JSON objects are skipped, and the first object
    must be a header. Only complete lines count, unless the file ends inside the prefix.
    """
    with open_regular(path) as f:  # a FIFO or a directory named *.jsonl raises, never blocks
        data = f.read(prefix)
        at_eof = len(data) < prefix
        if not at_eof and b"\n" not in data:
            data += f.read(16 * prefix)  # a very long header line: read a little more
            at_eof = len(data) < 17 * prefix
    usable = data if at_eof else data[: jsonl.complete_prefix_length(data)]
    objects = jsonl.parse_jsonl_lenient(usable)
    if objects and jsonl.is_header(objects[0]):
        return objects[0]
    return None


class AgentIndex:
    """Projects and session files under ``<agent>/sessions`` (thread-safe, sync)."""

    def __init__(self, agent_dir: Path) -> None:
        self.agent_dir = agent_dir
        self.sessions_root = paths.sessions_root(agent_dir)
        self.blobs_dir = paths.blobs_dir(agent_dir)
        # path -> (inode, size seen, header or None when the file is not a session); LRU
        self._headers: OrderedDict[Path, tuple[int, int, dict[str, Any] | None]] = OrderedDict()
        self._skipped: OrderedDict[Path, None] = OrderedDict()  # logged once each (LRU)

    def projects(self) -> list[str]:
        try:
            with os.scandir(self.sessions_root) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def project_mtime_ns(self, project: str) -> int | None:
        if "/" in project or project in (".", ".."):
            return None
        try:
            st = os.stat(self.sessions_root / project)
        except OSError:
            return None
        return st.st_mtime_ns if stat.S_ISDIR(st.st_mode) else None

    def _ref(
        self, project: str, path: Path, st: os.stat_result, cached_only: bool = False
    ) -> SessionRef | object | None:
        cached = self._headers.get(path)
        # Appends keep the inode and only grow the file; a rewrite is a new inode.
        if cached is None or cached[0] != st.st_ino or st.st_size < cached[1]:
            if cached_only:
                return NEEDS_IO
            try:
                header = read_header(path)
            except OSError as exc:
                self.skip(path, exc)
                return None
            self._remember_header(path, (st.st_ino, st.st_size, header))
        else:
            self._headers.move_to_end(path)
            header = cached[2]
        if header is None:
            return None
        return SessionRef(
            project,
            path.name[:-6],
            path,
            header,
            st.st_mtime_ns,
            st.st_size,
            stat.S_IMODE(st.st_mode),
        )

    def _remember_header(self, path: Path, row: tuple[int, int, dict[str, Any] | None]) -> None:
        self._headers[path] = row
        self._headers.move_to_end(path)
        while len(self._headers) > HEADER_CACHE_SIZE:
            self._headers.popitem(last=False)

    def skip(self, path: Path | str, reason: object) -> None:
        """A ``*.jsonl`` that cannot be a session (symlink loop, FIFO, socket, directory,
        unreadable): left out of every listing, and logged the first time only."""
        key = Path(path)
        if key in self._skipped:
            self._skipped.move_to_end(key)
            return
        self._skipped[key] = None
        if len(self._skipped) > SKIP_LOG_SIZE:
            self._skipped.popitem(last=False)
        log.warning("skipping %s: %s", key, reason)

    def sessions_in(self, project: str) -> list[SessionRef]:
        """Valid sessions of one project, by file name (= creation time) order."""
        directory = self.sessions_root / project
        refs = []
        try:
            with os.scandir(directory) as it:
                files = sorted((e for e in it if e.name.endswith(".jsonl")), key=lambda e: e.name)
                for item in files:
                    st = self._regular_stat(item)
                    if st is None:
                        continue
                    ref = self._ref(project, Path(item.path), st)
                    if isinstance(ref, SessionRef):
                        refs.append(ref)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return refs

    def _regular_stat(self, item: os.DirEntry[str]) -> os.stat_result | None:
        """The stat of a listed ``*.jsonl`` if it is (a symlink to) a regular file.
        ``DirEntry.is_file`` raises for a symlink loop, which must cost that one name,
        not the whole listing."""
        try:
            st = item.stat()
        except FileNotFoundError:
            return None  # removed since the listing: nothing to report
        except OSError as exc:
            self.skip(item.path, exc)
            return None
        if not stat.S_ISREG(st.st_mode):
            self.skip(item.path, "not a regular file")
            return None
        return st

    def session(self, project: str, stem: str) -> SessionRef | None:
        """One session by its mount names: one stat (and a prefix read if unseen)."""
        ref = self.session_if_known(project, stem, cached_only=False)
        return ref if isinstance(ref, SessionRef) else None

    def session_if_known(
        self, project: str, stem: str, cached_only: bool = True
    ) -> SessionRef | object | None:
        """Like ``session``, but with ``cached_only`` answers ``NEEDS_IO`` instead of
        reading a header it has not seen: then it is one stat, cheap enough to run on
        the event loop."""
        if "/" in project or "/" in stem or project in (".", "..") or stem in (".", ".."):
            return None
        path = self.sessions_root / project / (stem + ".jsonl")
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return self._ref(project, path, st, cached_only)

    def all_sessions(self) -> list[SessionRef]:
        return [ref for project in self.projects() for ref in self.sessions_in(project)]

    def blob_names(self) -> list[str]:
        try:
            with os.scandir(self.blobs_dir) as it:
                return sorted(e.name for e in it if _is_sha(e.name) and _is_file_entry(e))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def blob_path(self, sha: str) -> Path | None:
        if not _is_sha(sha):
            return None
        path = self.blobs_dir / sha
        return path if path.is_file() else None


def _is_file_entry(entry: os.DirEntry[str]) -> bool:
    """``DirEntry.is_file`` that answers False for a symlink loop instead of raising
    (one bad name must not fail a whole listing)."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_sha(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


# --- one loaded session ---------------------------------------------------------------


def open_browse(path: Path) -> Any:
    """``SessionManager.open`` for viewing: migrate in memory only, keep blob refs."""
    return SessionManager.open(str(path), browse=True, resolve_blobs=False)


@dataclass
class EntryTable:
    """The ``entries/`` names of one version: encoded ids, duplicates as ``<id>~2``."""

    names: list[str]  # file names (with .json), parallel to the entries list
    entries: list[dict[str, Any]]
    index_of_name: dict[str, int]
    name_of_object: dict[int, str]  # id(entry dict) -> its file name

    def name_for_id(self, entry_id: str | None, by_id: dict[str, dict[str, Any]]) -> str | None:
        entry = by_id.get(entry_id) if isinstance(entry_id, str) else None
        return self.name_of_object.get(id(entry)) if entry is not None else None


def build_entry_table(entries: list[dict[str, Any]]) -> EntryTable:
    names = entry_file_names([entry.get("id") for entry in entries])
    return EntryTable(
        names=names,
        entries=entries,
        index_of_name={name: i for i, name in enumerate(names)},
        name_of_object={id(entry): name for entry, name in zip(entries, names, strict=True)},
    )


@dataclass
class LoadedSession:
    """A browse-loaded session and its renderings (sync; callers hold ``lock``).

    Two weights: *hydrated* (``manager`` holds the parsed session) or *dehydrated*
    (only the renderings are kept, valid for ``file_state``). The cache dehydrates
    before it forgets, so re-reading ``transcript.md`` of a session that fell out of
    the parsed set costs one stat, not a re-parse; ``ensure_loaded`` re-hydrates.
    """

    ref: SessionRef
    manager: Any
    version: int = 1
    checked_at: float = 0.0
    file_state: tuple[int, int, int] = (0, 0, 0)  # inode, size, mtime_ns when last checked
    #: permission bits of the file when last checked (a chmod changes no other field)
    file_mode: int | None = None
    #: the mode changed since the last ``refresh``, which reports it as a full change
    #: (the kernel caches entry attributes for long: they must all be dropped)
    mode_changed: bool = False
    lock: trio.Lock = field(default_factory=trio.Lock)
    _renders: dict[str, bytes] = field(default_factory=dict)
    _table: EntryTable | None = None
    _entry_bytes: dict[int, bytes] = field(default_factory=dict)
    _cached_bytes: int = 0  # sum of the cached renderings (kept incrementally: hot path)
    #: per-version listings (name -> node) reused by repeated readdirs; owned by nodes
    listings: dict[str, Any] = field(default_factory=dict)
    _by_id: dict[str, dict[str, Any]] | None = None
    # Set by the write paths: a leaf chosen through the mount (``ln -sfn``, ``rm leaf``)
    # is not in the file, so it is kept here until an append records it. A pinned
    # session is never dehydrated or forgotten (that would lose the leaf).
    pinned_leaf: tuple[str | None] | None = None
    last_result: str | None = None
    last_error: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.ref.project, self.ref.stem)

    @property
    def mtime_ns(self) -> int:
        return self.file_state[2] or self.ref.mtime_ns

    @property
    def mode(self) -> int:
        """The session file's permission bits as last seen."""
        return self.file_mode if self.file_mode is not None else self.ref.mode

    def _saw(self, st: os.stat_result) -> tuple[int, int, int]:
        """Note the file's mode from a fresh stat; returns its state tuple."""
        mode = stat.S_IMODE(st.st_mode)
        if self.file_mode is not None and mode != self.file_mode:
            self.mode_changed = True
        self.file_mode = mode
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    # -- freshness ---------------------------------------------------------------------

    def ensure_loaded(self) -> None:
        """Parse the file again if this session was dehydrated (worker thread)."""
        if self.manager is not None:
            return
        st = os.stat(self.ref.path)
        self.manager = open_browse(self.ref.path)
        state = self._saw(st)
        if state != self.file_state:
            self._forget_renders()
        self.file_state = state
        self.checked_at = time.monotonic()

    def apply_pin(self) -> None:
        """Put a pinned leaf back after a full reload (the loader picks the last entry);
        a pin whose entry vanished (file replaced) is dropped."""
        if self.pinned_leaf is None or self.manager is None:
            return
        (leaf,) = self.pinned_leaf
        if leaf is None:
            self.manager.reset_leaf()
        elif self.manager.get_entry(leaf) is not None:
            self.manager.branch(leaf)
        else:
            self.pinned_leaf = None

    def dehydrate(self) -> None:
        """Drop the parsed session and everything derived per entry; keep renderings."""
        self.manager = None
        self._table = None
        self._entry_bytes = {}
        self.listings = {}
        self._by_id = None
        self._cached_bytes = sum(len(v) for v in self._renders.values())

    def refresh(self) -> int:
        """Catch up with the file. Returns 0 (same), >0 new entries, -1 full reload
        (or a new mode: every attribute the kernel holds is stale)."""
        changed = self._catch_up()
        if self.mode_changed:
            self.mode_changed = False
            return -1
        return changed

    def _catch_up(self) -> int:
        state = self._saw(os.stat(self.ref.path))
        self.checked_at = time.monotonic()
        if state == self.file_state:
            return 0
        if self.manager is None:  # dehydrated: the renderings are simply stale now
            self._forget_renders()
            self.file_state = state
            return -1
        changed = int(self.manager.catch_up())
        self.file_state = state
        if changed > 0:
            # Another process appended: core moved the leaf to its last line, which
            # records a leaf in the file; the one chosen through the mount is over.
            self.pinned_leaf = None
        elif changed < 0:
            self.apply_pin()
        if changed != 0:
            self._forget_renders()
        return changed

    def after_write(self, entries_changed: bool = True) -> None:
        """A write through the mount changed memory (and maybe the file): renderings
        are stale, and the file as it is now is what we have seen. A leaf move that
        added no entry keeps the per-entry tables (rebuilding them is O(entries))."""
        if entries_changed:
            self._forget_renders()
        else:
            self.version += 1
            self._renders = {}
            self._cached_bytes = sum(len(v) for v in self._entry_bytes.values())
            self.listings = {}
        try:
            st = os.stat(self.ref.path)
        except OSError:
            return
        self.file_state = self._saw(st)
        self.checked_at = time.monotonic()

    def unchanged_on_disk(self) -> bool:
        """One ``stat``: True (and marked fresh) when the file is exactly as last seen.

        Done inline on the event loop because it is far cheaper than a thread hop; a
        change (or an error) goes the slow way through ``refresh`` in a worker thread.
        """
        try:
            st = os.stat(self.ref.path)
        except OSError:
            return False
        if self._saw(st) != self.file_state or self.mode_changed:
            return False
        self.checked_at = time.monotonic()
        return True

    def _forget_renders(self) -> None:
        self.version += 1
        self._renders = {}
        self._table = None
        self._entry_bytes = {}
        self._cached_bytes = 0
        self.listings = {}
        self._by_id = None

    # -- views of the manager ------------------------------------------------------------

    def cached_leaf_name(self) -> str | object | None:
        """The leaf's ``entries/`` file name (``None``: no leaf) when it is known
        without work, else `UNKNOWN` (the caller then asks in a worker thread)."""
        if self.manager is None or self._table is None or self._by_id is None:
            return UNKNOWN
        return self._table.name_for_id(self.leaf_id(), self._by_id)

    def entries(self) -> list[dict[str, Any]]:
        return list(self.manager.get_entries())

    def header(self) -> dict[str, Any]:
        return dict(self.manager.get_header() or {})

    def leaf_id(self) -> str | None:
        leaf = self.manager.get_leaf_id()
        return leaf if isinstance(leaf, str) else None

    def by_id(self) -> dict[str, dict[str, Any]]:
        if self._by_id is None:
            # Last occurrence wins, as in core's context builder.
            self._by_id = {e["id"]: e for e in self.entries() if isinstance(e.get("id"), str)}
        return self._by_id

    def labels(self) -> dict[str, str]:
        return {k: v for k, v in dict(self.manager.get_labels()).items() if isinstance(v, str)}

    def table(self) -> EntryTable:
        if self._table is None:
            self._table = build_entry_table(self.entries())
        return self._table

    def entry_bytes(self, index: int) -> bytes:
        data = self._entry_bytes.get(index)
        if data is None:
            data = render.pretty_json(self.table().entries[index])
            self._entry_bytes[index] = data
            self._cached_bytes += len(data)
        return data

    def cached_entry_bytes(self, name: str) -> bytes | None:
        """The entry file's bytes if already rendered (no work: safe on the event loop)."""
        table = self._table
        if table is None:
            return None
        index = table.index_of_name.get(name)
        return self._entry_bytes.get(index) if index is not None else None

    def entry_mtime_ns(self, index: int) -> int:
        ms = paths.iso_to_ms(self.table().entries[index].get("timestamp"))
        return ms * 1_000_000 if ms is not None else self.mtime_ns

    def blob_shas(self) -> list[str]:
        found: dict[str, None] = {}
        for entry in self.table().entries:
            for sha in blob_refs_in(entry):
                found.setdefault(sha, None)
        return list(found)

    def context(self) -> dict[str, Any]:
        return build_session_context(self.entries(), self.leaf_id(), self.by_id())

    # -- renderings, cached per version -----------------------------------------------

    def cached(self, what: str) -> bytes | None:
        return self._renders.get(what)

    def rendered(self, what: str) -> bytes:
        data = self._renders.get(what)
        if data is None:
            data = _RENDERERS[what](self)
            self._renders[what] = data
            self._cached_bytes += len(data)
        return data

    def memory_cost(self) -> int:
        parsed = self.file_state[1] * PARSED_SIZE_FACTOR if self.manager is not None else 0
        return parsed + self._cached_bytes


def _render_transcript(session: LoadedSession) -> bytes:
    context = session.context()
    messages = context["messages"]
    sources = context_sources(session.entries(), session.leaf_id(), session.by_id())
    title = session.header().get("title")
    return render.transcript_md(title if isinstance(title, str) else None, messages, sources)


def _render_stats(session: LoadedSession) -> bytes:
    usage_fn = getattr(session.manager, "get_usage_statistics", None)
    usage = usage_fn() if callable(usage_fn) else None
    return render.stats_json(session.entries(), session.leaf_id(), session.by_id(), usage)


_RENDERERS: dict[str, Callable[[LoadedSession], bytes]] = {
    "header.json": lambda s: render.pretty_json(s.header()),
    "title": lambda s: render.title_text(s.header()),
    "context.json": lambda s: render.context_json(s.context()),
    "transcript.md": _render_transcript,
    "tree.txt": lambda s: render.tree_text(s.manager.get_tree(), s.leaf_id(), s.by_id()),
    "stats.json": _render_stats,
}


# --- the cache ------------------------------------------------------------------------

ChangeListener = Callable[[LoadedSession, bool], None]


@dataclass(eq=False)
class PendingLabel:
    """A symlink made in ``labels/`` under a name GNU ``ln -sfn`` uses for its
    temporary link: held in memory, since a rename over the real name usually follows
    at once (`sessionfs.nodes.entries.LabelsDir`). ``commit`` turns it into a real label
    (a name that merely looks temporary is still a label: committed when read,
    listed, after ``PENDING_LABEL_DELAY`` (entries.py), or at unmount)."""

    entry_id: str
    #: called with this record; does nothing if the record is no longer pending
    commit: Callable[[PendingLabel], Awaitable[None]]


#: What a write does to the leaf: "moved" (branch/reset: pin it, it is not in the
#: file), "recorded" (an append wrote it down: unpin), "kept" (title, flush, fork).
LeafEffect = Literal["moved", "recorded", "kept"]


class SessionCache:
    """Loaded sessions, LRU-bounded by an estimate of their memory (async API)."""

    def __init__(self, index: AgentIndex, budget_bytes: int) -> None:
        self.index = index
        self.budget = budget_bytes
        self._sessions: OrderedDict[tuple[str, str], LoadedSession] = OrderedDict()
        self._loading: dict[tuple[str, str], trio.Lock] = {}
        self.listeners: list[ChangeListener] = []
        #: called with a session about to be dehydrated, while its listings still exist
        self.dehydrate_listeners: list[Callable[[LoadedSession], None]] = []
        #: pinned leaves of sessions dropped after a failed write, restored on reload
        self._dropped_pins: dict[tuple[str, str], tuple[str | None]] = {}
        #: temporary symlinks made in session dirs (name -> target), per session
        self._pending_links: dict[tuple[str, str], dict[str, str]] = {}
        #: temporary-looking symlinks made in labels/ (name -> record), per session
        self._pending_labels: dict[tuple[str, str], dict[str, PendingLabel]] = {}

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

    async def get(self, project: str, stem: str, warm: str | None = None) -> LoadedSession:
        """The session, loaded and fresh; ``NotASession`` when there is none."""
        key = (project, stem)
        session = self._sessions.get(key)
        if session is None:
            lock = self._loading.setdefault(key, trio.Lock())
            try:
                async with lock:
                    session = self._sessions.get(key)
                    if session is None:
                        session = await self._load(project, stem, warm)
            finally:
                # Also after a failed load (not a session, vanished, a FIFO...):
                # nothing about a path that is not a session may stay behind.
                if self._loading.get(key) is lock and not lock.statistics().tasks_waiting:
                    del self._loading[key]
        self._sessions.move_to_end(key)
        if time.monotonic() - session.checked_at > FRESH_INTERVAL:
            await self._refresh(session)
        return session

    async def _load(self, project: str, stem: str, warm: str | None) -> LoadedSession:
        """Find, check, parse (and render ``warm``, the file about to be read): all in
        one thread hop, which is most of what a first access costs besides the parse."""

        def load() -> LoadedSession:
            ref = self.index.session(project, stem)
            if ref is None:
                raise NotASession(f"{project}/{stem}")
            st = os.stat(ref.path)
            try:
                manager = open_browse(ref.path)
            except NotASessionError as exc:  # e.g. replaced by junk since it was listed
                raise NotASession(str(ref.path)) from exc
            session = LoadedSession(ref=ref, manager=manager)
            session.file_state = session._saw(st)
            session.checked_at = time.monotonic()
            session.pinned_leaf = self._dropped_pins.pop((project, stem), None)
            session.apply_pin()
            if warm is not None:
                session.rendered(warm)
            return session

        session = await trio.to_thread.run_sync(load)
        self._sessions[(project, stem)] = session
        self._evict(keep=session)
        return session

    async def _refresh(self, session: LoadedSession) -> None:
        if not session.lock.locked() and session.unchanged_on_disk():
            return  # the common case: one stat on the event loop, no thread hop
        async with session.lock:
            if time.monotonic() - session.checked_at <= FRESH_INTERVAL:
                return  # another task refreshed it while we waited
            try:
                changed = await trio.to_thread.run_sync(session.refresh)
            except FileNotFoundError:
                self.drop(session)
                raise NotASession(str(session.ref.path)) from None
        if changed:
            log.debug("%s changed (%d)", session.ref.path, changed)
            for listener in self.listeners:
                listener(session, changed < 0)

    async def run(self, session: LoadedSession, fn: Callable[[], T]) -> T:
        """Run ``fn`` (core work on this session) in a worker thread under its lock."""

        def hydrated() -> T:
            session.ensure_loaded()
            return fn()

        async with session.lock:
            result = await trio.to_thread.run_sync(hydrated)
        self._evict(keep=session)
        return result

    async def render(self, session: LoadedSession, what: str) -> bytes:
        cached = session.cached(what)
        if cached is not None:
            return cached
        return await self.run(session, lambda: session.rendered(what))

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
        found = labels.get(name) if labels else None
        if found is None or (record is not None and found is not record):
            return None
        del labels[name]  # type: ignore[union-attr]
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

    async def write(
        self, session: LoadedSession, fn: Callable[[Any], T], *, leaf: LeafEffect = "kept"
    ) -> T:
        """Apply one write through the mount: ``fn(manager)`` (a `session_writer` call)
        in a worker thread under the session's lock. Afterwards the renderings are
        stale, the kernel is told (listeners), and the outcome is kept for ``ctl``.

        A `WriteRejected` is recorded as ``last_error`` and re-raised; with
        ``reload_session`` (core latched a persistence error) the session is dropped,
        so the next access loads it from disk again and writes can work again once
        the disk has room, without remounting.
        """

        def apply() -> T:
            session.ensure_loaded()
            count = session.manager.entry_count()
            try:
                return fn(session.manager)
            finally:
                # Even a refused write may have caught up with the file.
                moved_only = leaf == "moved" and session.manager.entry_count() == count
                session.after_write(entries_changed=not moved_only)

        async with session.lock:
            try:
                result = await trio.to_thread.run_sync(apply)
            except WriteRejected as exc:
                session.last_error = exc.reason
                if exc.reload_session:
                    self.drop(session)
                raise
            finally:
                for listener in self.listeners:
                    listener(session, False)
            session.last_error = None
            if leaf == "moved":
                leaf_id = session.manager.get_leaf_id()
                session.pinned_leaf = (leaf_id if isinstance(leaf_id, str) else None,)
            elif leaf == "recorded":
                session.pinned_leaf = None
        self._evict(keep=session)
        return result

    def loaded(self) -> list[LoadedSession]:
        return list(self._sessions.values())

    def _evict(self, keep: LoadedSession) -> None:
        """Least recently used first: dehydrate, and if that is not enough, forget."""
        total = sum(s.memory_cost() for s in self._sessions.values())
        if total <= self.budget:
            return
        freed = False
        for forget in (False, True):
            for key in list(self._sessions):
                if total <= self.budget:
                    break
                session = self._sessions[key]
                if session is keep or session.lock.locked() or session.pinned_leaf is not None:
                    continue
                if not forget and session.manager is None:
                    continue
                before = session.memory_cost()
                if forget:
                    del self._sessions[key]
                else:
                    for listener in self.dehydrate_listeners:
                        listener(session)
                    session.dehydrate()
                total -= before - (0 if forget else session.memory_cost())
                freed = True
        if freed:
            release_free_memory()
