"""One session as the mount shows it, whatever agent wrote it: ``LoadedSession``.

Every read goes through the session's `core.formats.SessionSource`, and every
rendering through `sessionfs.view.renderings.render_source`: no node or renderer asks
how a session is held. Three weights, lightest first (``SessionCache`` moves sessions
between them):

* *unloaded*: only the renderings already made are kept (valid for ``file_state``), so
  re-reading ``transcript.md`` of a session that left the loaded set costs one stat;
* *read* (the usual state of a session that is only read): the agent's reader -- for
  an xcsh file `XcshSession`, the file's bytes plus a per-entry index (about its file
  size in memory); ``entries/<id>.json`` parses its one line, a rendering parses every
  line once, renders and lets the entries go (`SessionSource.parsed_once`); for Claude
  Code and Codex the reader ``opener`` gives;
* *parsed* (xcsh only): a ``SessionManager.open(browse=True, resolve_blobs=False)``,
  five to six times the file's size, read through `ManagerSource`. Built for writes
  through the mount (``hydrated``; an append to a file over `TAIL_APPENDS_ABOVE_BYTES`
  goes through a manager of the file's tail instead: `appender`), for files at an older
  format version (migrated in memory: their ids exist nowhere else), and kept while a
  leaf moved through the mount is pinned. Another agent's session is never parsed so:
  a write to it is ``EROFS``.

Everything rendered is cached per *version*, which goes up whenever a catch-up finds
new lines or a replaced file. Synchronous: callers hold its ``lock`` and run it in a
worker thread (`sessionfs.view.session_cache`).
"""

from __future__ import annotations

import errno
import io
import math
import os
import stat
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import NotASessionError, SessionManager
from core.formats.base import SessionSource
from core.formats.jsonl_source import JsonlSession
from core.formats.xcsh import XcshSession
from core.formats.xcsh_file import CompactSession, NotCompact, read_file
from core.formats.xcsh_parsed import PARSED_SIZE_FACTOR, ManagerSource
from core.session_stat import session_stat
from core.session_tail import FileTail, IndexedEntries, ScannedEntries, read_file_tail
from core.storage import FileSessionStorage, PathArg, StorageStat
from core.zstd_files import TextSize, file_text_info
from sessionfs.view import render
from sessionfs.view.access import FileAccess
from sessionfs.view.agent_notes import SessionLinks
from sessionfs.view.branch_pages import is_branch_page, page_name, tip_indexes
from sessionfs.view.html_images import BlobFiles
from sessionfs.view.names import appended_entry_file_names, entry_file_names
from sessionfs.view.refusal import READ_ONLY_REASON, WriteRejected
from sessionfs.view.renderings import parses_entries, render_source
from sessionfs.view.session_ref import SessionRef
from sessionfs.view.streamed_render import StreamIndex, write_streamed

if TYPE_CHECKING:
    import trio

__all__ = [
    "ENTRY_LISTING",
    "FRESH_INTERVAL",
    "LISTING_BYTES_PER_ROW",
    "PARSED_SIZE_FACTOR",
    "TABLE_BYTES_PER_ENTRY",
    "UNKNOWN",
    "EntryListing",
    "EntryTable",
    "LoadedSession",
    "SourceOpener",
    "build_entry_table",
    "open_browse",
    "parses_entries",
]

#: How old a freshness check may be before the next access repeats it (one stat).
FRESH_INTERVAL = 0.2
#: Branch pages (``branches/<tip>.html``) a session keeps rendered; older ones go.
BRANCH_PAGES_KEPT = 4
#: What a session's ``entries/`` table costs per entry once built (its name and
#: index), and a listing per row (the row, its node, the inode table's row once the
#: kernel has seen the name), beyond the entry files' bytes. Measured (issue 26): 60
#: sessions x 400 entries, every ``entries/`` listed and read, held 16 MB more than
#: the cache counted without them (tracemalloc: ~160 bytes an entry for the table).
#: Uncounted, a walk of 1,000 sessions took the daemon to 355 MB with 254 of 256 MB
#: counted: at its bound, ``--cache-mb`` + 100.
TABLE_BYTES_PER_ENTRY = 160
LISTING_BYTES_PER_ROW = 480
#: A session file bigger than this is appended to through a manager of its tail
#: (`LoadedSession.appender`): a parse costs ~9 ms a MB (and six times the file in
#: memory), a scan for an id ~0.5 ms a MB. A smaller one is parsed at its first append,
#: as always: a few ms, and the manager held answers the appends after it at once.
TAIL_APPENDS_ABOVE_BYTES = 4 * 1024 * 1024
#: A burst of appends (each within `TAIL_BURST_SECONDS` of the one before) parses the
#: session once `TAIL_BURST_APPENDS` of them went through the tail: each of those reads
#: megabytes (a scan for its id, ~0.5 ms a MB, or the held index taking in the file
#: again), the parse costs ~9 ms a MB once, and the parsed session's appends cost the
#: same whatever its size. Paying for the parse only after as much went into appends
#: through the tail (rent or buy) keeps a script or a ``*.stream`` writing thousands
#: within twice the best of both, and a few appends never parse. A session whose
#: parsed form (`PARSED_SIZE_FACTOR` times its file) would not fit the cache's budget
#: (``parse_budget``) is never parsed so: its burst keeps going through the tail (a
#: 49 MB session parsed is ~294 MB, over ``--cache-mb 256``).
TAIL_BURST_APPENDS = 16
TAIL_BURST_SECONDS = 5.0
#: What an `EntryListing` holds per entry: its file's size and time, in two arrays.
ENTRY_LISTING_BYTES_PER_ENTRY = 16
#: A session file up to this fraction of the largest the cache renders
#: (``whole_read_limit``: 13 MB with ``--cache-mb 256``) keeps the entry files its
#: ``entries/`` listing renders to learn their sizes, so reading them after ``ls``
#: costs no thread hop and no parse; a bigger one keeps only their sizes: a
#: 200,000-entry (49 MB) session would hold 65 MB of rendered files for one ``ls``
#: (issue 26 point 6).
LISTED_FILES_KEPT_FRACTION = 4
#: A session file over this fraction of the largest the cache renders
#: (``whole_read_limit``: over 26 MB with ``--cache-mb 256``) gets its ``context.json``
#: written a message at a time (`sessionfs.view.streamed_render`), into memory, instead
#: of from every entry parsed at once: a session of many short entries costs 8-9 times
#: its file parsed (a 49 MB one of 200,000 entries took the daemon to 442 MB for its
#: first ``context.json``, over ``--cache-mb`` + 100; streamed: ~300 MB, the same bytes,
#: issue 26 point 6). A smaller file is rendered from its parse (faster per byte).
STREAMED_CONTEXT_FRACTION = 2
#: Renderings of a session file that big made entry by entry, outside
#: `SessionSource.parsed_once` (each entry parsed in turn and let go): the same bytes,
#: without every entry parsed at once (442-451 MB for that session's first read).
_RENDERED_ENTRY_BY_ENTRY = frozenset({"tree.txt", "stats.json"})
#: The renderings of such a file made without every entry parsed at once.
_RENDERED_LEAN = _RENDERED_ENTRY_BY_ENTRY | {"context.json"}
#: Renderings made in the daemon whatever the size of an xcsh file held compact, even
#: one over the cache's render limit (read where it is, as ``entries/`` reads it):
#: their memory beyond the index the session holds is a few arrays of ints an entry
#: (the `Forest`) and one entry parsed at a time (`LoadedSession.rendered_from_index`).
#: ``tree.txt`` is not one: its text (~75 bytes an entry) is held, twice while joined.
MADE_FROM_THE_INDEX = frozenset({"stats.json"})
#: "not known without work" (see `LoadedSession.cached_leaf_name`)
UNKNOWN = object()
#: ``warm`` for a load about to list ``entries/``: the build of the index, which parses
#: every entry anyway, measures each entry file on the way (`LoadedSession.entry_listing`)
ENTRY_LISTING = "entries/"

#: Opens the session file a ref names as its agent's `SessionSource` (another agent's
#: session; an xcsh file has none: it is read compact, or parsed when it must be).
SourceOpener = Callable[[SessionRef], SessionSource]

Entry = dict[str, Any]


def open_browse(path: Path, read: tuple[bytes, os.stat_result] | None = None) -> SessionManager:
    """``SessionManager.open`` for viewing: migrate in memory only, keep blob refs.
    ``read``: the file's bytes and their stat when the caller has just read them."""
    storage = None if read is None else _ReadOnce(path, *read)
    # A guest: the agent may be running on this file (see SessionManager.open).
    return SessionManager.open(
        str(path), browse=True, resolve_blobs=False, storage=storage, guest=True
    )


class _ReadOnce(FileSessionStorage):
    """The file storage, except that the load's read of ``path`` gets bytes read a
    moment ago: an older-version file, which the compact attempt read and gave up on,
    is then parsed from them instead of being read a second time."""

    def __init__(self, path: Path, data: bytes, st: os.stat_result) -> None:
        self._path = os.path.abspath(path)
        self._read: tuple[bytes, StorageStat] | None = (
            data,
            StorageStat(st.st_size, st.st_mtime, st.st_ino),
        )

    def read_bytes_with_stat(self, path: PathArg) -> tuple[bytes, StorageStat]:
        read, self._read = self._read, None
        if read is not None and os.path.abspath(path) == self._path:
            return read
        return super().read_bytes_with_stat(path)


@dataclass
class EntryTable:
    """The ``entries/`` names of one version: encoded ids, duplicates as ``<id>~2``."""

    names: list[str]  # file names (with .json), one per entry in file order
    index_of_name: dict[str, int]


@dataclass(eq=False)
class EntryListing:
    """What ``ls -l entries/`` shows of one version: each entry file's name (the
    table's), size and time, in arrays rather than an object per entry."""

    table: EntryTable
    sizes: array[int]
    mtimes_ns: array[int]
    #: an entry without a time shows the session file's mtime, which every append
    #: changes: such a listing is not extended (`LoadedSession._entries_appended`)
    follows_file: bool = False


class _EntryFiles:
    """Entry files rendered one after the other to learn their sizes (called with each
    entry in order), kept too when ``keep``."""

    def __init__(self, keep: bool) -> None:
        self.sizes = array("q")
        self.kept: list[bytes] | None = [] if keep else None

    def __call__(self, entry: Entry) -> None:
        if self.kept is None:
            self.sizes.append(render.pretty_json_size(entry))
            return
        data = render.pretty_json(entry)
        self.sizes.append(len(data))
        self.kept.append(data)


def build_entry_table(ids: Sequence[object]) -> EntryTable:
    """The table for entries with these ``id`` values (raw: any type, in file order)."""
    names = entry_file_names(ids)
    return EntryTable(names=names, index_of_name={name: i for i, name in enumerate(names)})


@dataclass(eq=False)
class LoadedSession:
    """A session in the cache and its renderings (sync; callers hold ``lock``)."""

    ref: SessionRef
    #: how it is read when held (``None``: only renderings are; see the module
    #: docstring). A parsed xcsh session is a `ManagerSource` over its manager.
    source: SessionSource | None = None
    #: another agent's reader (read-only); ``None`` for an xcsh session file
    opener: SourceOpener | None = None
    version: int = 1
    checked_at: float = 0.0
    #: when the cache last handed it out (its clock; see `SessionCache.get`)
    used_at: float = 0.0
    file_state: tuple[int, int, int] = (0, 0, 0)  # inode, size, mtime_ns when last checked
    #: permission bits and owner of the file when last checked (a chmod or chown
    #: changes no other field)
    file_access: FileAccess | None = None
    #: they changed since the last ``refresh``, which reports it as a full change
    #: (the kernel caches entry attributes for long: they must all be dropped)
    mode_changed: bool = False
    #: the text size of the file in a state (`text_info`), learnt where that state was
    #: noted: in a worker thread, off the event loop that asks
    _text: tuple[tuple[int, int, int], TextSize] | None = field(default=None, repr=False)
    #: `lock`, made at its first use
    _lock: trio.Lock | None = field(default=None, repr=False)
    _renders: dict[str, bytes] = field(default_factory=dict)
    _table: EntryTable | None = None
    _entry_listing: EntryListing | None = None
    _entry_bytes: dict[int, bytes] = field(default_factory=dict)
    _cached_bytes: int = 0  # sum of the cached renderings (kept incrementally: hot path)
    #: per-version listings reused by repeated readdirs, by the listed dir's path in the
    #: mount: rows of (name, node). Owned by the nodes; dropped with each version. A
    #: listing that makes its nodes only when asked says what a row costs it
    #: (``bytes_per_row``; else `LISTING_BYTES_PER_ROW`).
    listings: dict[tuple[str, ...], Sequence[tuple[str, Any]]] = field(default_factory=dict)
    #: entry files looked up by name outside any listing since the session was last
    #: let go: each a node and an inode the kernel holds until then (counted as a
    #: listing's row; the mount drops their names with the session)
    names_looked_up: int = 0
    # Set by the write paths: a leaf chosen through the mount (``ln -sfn``, ``rm leaf``)
    # is not in the file, so it is kept here until an append records it. A pinned
    # session is never unloaded or forgotten (that would lose the leaf).
    pinned_leaf: tuple[str | None] | None = None
    #: an xcsh file bigger than this (bytes) is not read into memory but a line at a
    #: time (`core.formats.xcsh_file.FileLines`): set by the cache from its budget
    whole_read_limit: int | None = None
    #: the cache's budget (bytes): a burst of appends parses the session only when
    #: its parsed form fits in it (`appender`); set by the cache (``None``: no bound)
    parse_budget: int | None = None
    last_result: str | None = None
    last_error: str | None = None
    #: forks the mount started from or of this session (another agent's: its notes)
    links: SessionLinks | None = None
    #: when an append through a manager of the file's tail (`appender`) last succeeded
    #: (``time.monotonic()``), and how many did in a row, each within
    #: `TAIL_BURST_SECONDS` of the one before (`appended_through_tail`)
    tail_appended_at: float = -math.inf
    tail_burst: int = 0
    #: the blob store ``transcript.html`` inlines images from (an xcsh agent dir's;
    #: ``None``: images are links only)
    blobs_dir: Path | None = None

    @classmethod
    def parsed(cls, ref: SessionRef, manager: SessionManager) -> LoadedSession:
        """A session held parsed from the start (``manager`` is the one writes use)."""
        return cls(ref=ref, source=ManagerSource(manager))

    @property
    def lock(self) -> trio.Lock:
        """What the daemon's tasks hold while they use the session. Made at its first
        use, and trio imported then: a render worker loads sessions with no event loop,
        and must start without importing trio (`sessionfs.view.render_worker`)."""
        if self._lock is None:
            import trio

            self._lock = trio.Lock()
        return self._lock

    @property
    def manager(self) -> SessionManager | None:
        """The parsed session, when that is how it is held."""
        source = self.source
        return source.manager if isinstance(source, ManagerSource) else None

    @property
    def hydrated(self) -> SessionManager:
        """The parsed session, built now from the file if it is not held (writes, and
        reads that need core's manager). Worker thread, under the lock. ``EROFS`` for
        another agent's session."""
        self.ensure_loaded()
        manager = self.manager
        assert manager is not None
        return manager

    @property
    def is_loaded(self) -> bool:
        """Whether the session itself is held, not only renderings."""
        return self.source is not None

    def record_refusal(self, exc: WriteRejected) -> None:
        """Keep a refused write's reason for ``ctl`` (``last_error``), once per refusal."""
        self.last_error = exc.reason
        exc.recorded = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.ref.project, self.ref.stem)

    @property
    def mtime_ns(self) -> int:
        return self.file_state[2] or self.ref.mtime_ns

    @property
    def text_size(self) -> int:
        """How big the session file's text is as last seen (bytes): the ``st_size`` of
        the stat the version held came with (before any, the listing's:
        `SessionRef.size`), or for a compressed file its text's size
        (`core.zstd_files.file_text_size`, remembered per file state): what holding
        its entries or rendering it grows with, whatever it takes on disk. The one
        measure every size threshold here compares (`whole_read_limit` and its
        fractions, `TAIL_APPENDS_ABOVE_BYTES`, ``parse_budget``), as `read_file` and
        the render workers do: not the bytes held, which leave out a torn last line
        after a catch-up, so that a load, a later rendering and an append decide alike
        for the same file."""
        return self.text_info.size

    @property
    def text_info(self) -> TextSize:
        """`text_size`, and whether it is said or guessed (`core.zstd_files.TextSize`):
        for the file as last seen, learnt when it was seen (`_note_state`, a worker
        thread's), so that the event loop asking reads no header."""
        state = self.file_state
        if not state[1]:
            return self.ref.text_info()
        if self._text is not None and self._text[0] == state:
            return self._text[1]
        return self._text_of(state)  # (a state set otherwise: a test's)

    def _note_state(self, state: tuple[int, int, int]) -> None:
        """The file is as ``state`` says now (a worker thread's call): its text size
        learnt now too (`text_info`)."""
        self.file_state = state
        if self._text is None or self._text[0] != state:
            self._text = (state, self._text_of(state))

    def _text_of(self, state: tuple[int, int, int]) -> TextSize:
        _ino, size, mtime_ns = state
        known = self.ref.text_if_known(size, mtime_ns)  # (the listing's: no look)
        return known if known is not None else file_text_info(self.ref.path, size, mtime_ns)

    @property
    def access(self) -> FileAccess:
        """The session file's permission bits and owner as last seen."""
        return self.file_access if self.file_access is not None else self.ref.access

    def _saw(self, st: os.stat_result) -> tuple[int, int, int]:
        """Note the file's mode from a fresh stat; returns its state tuple. An
        unchanged mode and owner keep their `FileAccess` (every append and freshness
        check comes here: no new object each time)."""
        held = self.file_access
        if (
            held is None
            or held.mode != stat.S_IMODE(st.st_mode)
            or held.uid != st.st_uid
            or held.gid != st.st_gid
        ):
            if held is not None:
                self.mode_changed = True
            self.file_access = FileAccess.of(st)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _seen_now(self, st: os.stat_result) -> None:
        """What was just read is the file as ``st`` says: renderings of another state
        go."""
        state = self._saw(st)
        if state != self.file_state:
            self._forget_renders()
        self._note_state(state)
        self.checked_at = time.monotonic()

    # -- loading -------------------------------------------------------------------------

    def load(self, warm: str | None = None) -> None:
        """Read the file: another agent's through ``opener``; an xcsh file compact, or
        parsed when it has to be (an older format version, a pinned leaf). Render
        ``warm`` (the file about to be read) from the same parse. ``NotASessionError``
        when an xcsh file is not a session."""
        if self.opener is not None:
            st = session_stat(self.ref.path)
            self._hold(self.opener(self.ref), st)
            self.apply_pin()
        elif self.pinned_leaf is not None or not self._load_compact(warm):
            self.ensure_loaded()
            self.apply_pin()
        if warm is not None and warm != ENTRY_LISTING:
            self.rendered(warm)

    def _load_compact(self, warm: str | None) -> bool:
        """Hold the xcsh file compact (True), or False when it must be parsed instead;
        renders ``warm`` from the entries the index's build parsed anyway (or with
        `ENTRY_LISTING`, measures every entry file)."""
        try:
            data, st = read_file(self.ref.path, self.whole_read_limit)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotASessionError(f"{self.ref.path}: {exc.strerror}") from None
        self._seen_now(st)  # (first: the sizes below are of this file, `text_size`)
        listing = warm == ENTRY_LISTING
        files = _EntryFiles(self._keeps_listed_files()) if listing else None
        lean = warm in _RENDERED_LEAN and self._streams_context()
        streamed = warm == "context.json" and lean
        builder = StreamIndex if streamed else CompactSession
        try:
            # (a rendering made entry by entry is made by `load` after this)
            keep = warm is not None and not listing and not lean
            compact, entries = builder.build(data, st, keep_entries=keep, visit=files)
        except NotCompact as exc:
            if exc.not_a_session:
                raise NotASessionError(f"{self.ref.path} is not a session file") from None
            self.ensure_loaded(read=(data, st) if isinstance(data, bytes) else None)
            return False
        source = XcshSession(self.ref.path, index=compact, whole_up_to=self.whole_read_limit)
        self._hold(source, st)
        if files is not None:
            self._entry_listing = self._listing_of(files)
        elif isinstance(compact, StreamIndex):
            self._keep_rendering("context.json", _streamed_context(compact))
        elif warm is not None and entries is not None:
            with source.parsed_once(entries):  # parsed already: rendered from them
                self.rendered(warm)
        return True

    def _hold(self, source: SessionSource, st: os.stat_result) -> None:
        self.source = source
        self._seen_now(st)

    def ensure_readable(self) -> None:
        """Load the session if only renderings are held."""
        if self.source is None:
            self.load()

    def ensure_loaded(self, read: tuple[bytes, os.stat_result] | None = None) -> None:
        """Hold the parsed session (for a write): parse the file if it is not held
        (from ``read``, its bytes and their stat, when they were just read). ``EROFS``
        for another agent's session."""
        if self.opener is not None:
            raise WriteRejected(errno.EROFS, READ_ONLY_REASON)
        if self.manager is not None:
            return
        st = read[1] if read is not None else os.stat(self.ref.path)
        manager = open_browse(self.ref.path, read)
        held = self.source
        if isinstance(held, XcshSession) and held.index.diverged:
            self._forget_renders()  # the file now holds lines the compact index skipped
        self._hold(ManagerSource(manager), st)

    def appender(self, *, scan: bool) -> SessionManager:
        """The manager an append goes through (worker thread or a small inline write,
        under the lock). The parsed session when it is held, or must be (a pinned
        leaf; another agent's session is ``EROFS``), or the file is at most
        `TAIL_APPENDS_ABOVE_BYTES`, or `TAIL_BURST_APPENDS` appends in a burst went
        through the tail already and the parsed session fits ``parse_budget``; else a
        manager of the file's tail (`SessionManager.open_tail`), which parses no entry
        of the file: with ``scan`` (appends that refer to no entry) and nothing held,
        from the file's head and tail, ids looked up by a scan of the file (`core.session_tail`);
        else from the compact index, loaded now if need be; an index that diverged
        from the file is parsed, or scanned as with ``scan`` when the parsed session
        would not fit ``parse_budget``. A file that cannot be held compact (an older
        format version) is parsed. After the write:
        `after_append` when what this returned is not `manager`."""
        parsed = self.manager
        if parsed is not None:  # (the usual case: every small session's append)
            return parsed
        size = self.text_size
        if (
            self.opener is not None
            or self.pinned_leaf is not None
            or size <= TAIL_APPENDS_ABOVE_BYTES
            or (self._in_a_burst(TAIL_BURST_APPENDS) and self._parsed_fits(size))
        ):
            return self.hydrated
        if self.source is None and scan:
            scanning = self._scanning_appender()
            if scanning is not None:
                return scanning
        self.ensure_readable()
        if not self.appends_from_index():
            # A diverged index (a catch-up skipped lines the loader keeps) cannot answer
            # for the file; a session too big to parse within the budget has its ids
            # looked up in the file instead, as the loader would see them.
            if self.manager is None and not self._parsed_fits(size):
                scanning = self._scanning_appender()
                if scanning is not None:
                    return scanning
            return self.hydrated
        held = self.source
        assert isinstance(held, XcshSession) and isinstance(held.index, CompactSession)
        index = held.index
        path = self.ref.path
        tail = FileTail(
            index.header,
            index.title_slot,
            index.leaf_id,
            index.inode,
            index.consumed,
            body_start=0,  # not needed: the index knows the entries
        )
        return SessionManager.open_tail(
            path, tail, IndexedEntries(index.index_of_id, index.entry), index.labels
        )

    def _scanning_appender(self) -> SessionManager | None:
        """A manager of the file's tail whose ids are looked up by a scan of the file
        (`core.session_tail`), or None when the file is not the plain case for it
        (an older format version...) or cannot be read (a load then says why)."""
        path = self.ref.path
        try:
            tail = read_file_tail(path)
        except OSError:
            return None
        if tail is None:
            return None
        return SessionManager.open_tail(path, tail, ScannedEntries(path, tail), {})

    def _parsed_fits(self, file_size: int) -> bool:
        """Whether the session parsed would fit in the cache's budget."""
        budget = self.parse_budget
        return budget is None or file_size * PARSED_SIZE_FACTOR <= budget

    def _in_a_burst(self, appends: int) -> bool:
        recent = time.monotonic() - self.tail_appended_at < TAIL_BURST_SECONDS
        return recent and self.tail_burst >= appends

    def appended_through_tail(self) -> None:
        """An append through `appender`'s manager of the tail succeeded (the burst
        count `appender` looks at)."""
        self.tail_burst = self.tail_burst + 1 if self._in_a_burst(1) else 1
        self.tail_appended_at = time.monotonic()

    def appends_from_index(self) -> bool:
        """Whether the index held can give a manager of the file's tail (`appender`):
        an xcsh file held compact whose index is the loader's view of it."""
        held = self.source
        return (
            self.opener is None
            and self.pinned_leaf is None
            and isinstance(held, XcshSession)
            and isinstance(held.index, CompactSession)
            and not held.index.diverged
        )

    def after_append(self) -> None:
        """An append through a manager of the file's tail (`appender`) changed the file
        alone: the index held (if any) reads what was appended, ours and anyone's,
        from where it had read to; the renderings go."""
        try:
            st: os.stat_result | None = os.stat(self.ref.path)
        except OSError:
            st = None
        source = self.source
        appended_from = None
        if isinstance(source, XcshSession):
            # After the stat: lines appended in between are read now and look like a
            # change at the next check, which then finds nothing new.
            count = len(source)
            try:
                if source.catch_up() and not source.reread:
                    appended_from = count
            except NotCompact:  # replaced meanwhile by a file not held compact
                self.source = None
        if st is not None:  # (first: an entry without a time shows the file's mtime)
            self._note_state(self._saw(st))
            self.checked_at = time.monotonic()
        if appended_from is not None:
            self._entries_appended(appended_from)
        else:
            self._forget_renders()

    def look(self) -> None:
        """Note the file as it is now without reading it (a session added to the cache
        unloaded: an append may not need it read)."""
        self._seen_now(session_stat(self.ref.path))

    def apply_pin(self) -> None:
        """Put a pinned leaf back after a full reload (the loader picks the last entry);
        a pin whose entry vanished (file replaced) is dropped."""
        source = self.source
        if isinstance(source, JsonlSession):
            self._apply_choice(source)
            return
        manager = self.manager
        if self.pinned_leaf is None or manager is None:
            return
        (leaf,) = self.pinned_leaf
        if leaf is None:
            manager.reset_leaf()
        elif manager.get_entry(leaf) is not None:
            manager.branch(leaf)
        else:
            self.pinned_leaf = None

    def _apply_choice(self, source: JsonlSession[Any]) -> None:
        """Another agent's session: its reader shows the pinned leaf (`choose_leaf`)."""
        leaf = self.pinned_leaf[0] if self.pinned_leaf is not None else None
        try:
            source.choose_leaf(leaf)
        except (KeyError, ValueError):  # the entry is gone (the file was replaced)
            self.pinned_leaf = None
            source.choose_leaf(None)

    def choose_leaf(self, name: str | None) -> None:
        """Another agent's session: show entry ``name`` as the leaf (``None``: the
        agent's own again), held in memory, never written to the file. Worker thread,
        under the lock. `WriteRejected` (``EINVAL``) for an entry its agent cannot
        continue from; ``EROFS`` for a session whose reader holds no such choice."""
        source = self._held()
        if not isinstance(source, JsonlSession):
            raise WriteRejected(errno.EROFS, READ_ONLY_REASON)
        try:
            source.choose_leaf(name)
        except ValueError:
            raise WriteRejected(
                errno.EINVAL,
                f"leaf: {name} is a metadata line; the agent continues only from an "
                "entry of its conversation",
            ) from None
        self.pinned_leaf = None if name is None else (name,)
        self.after_write(entries_changed=False)

    def own_leaf_name(self) -> str | None:
        """Another agent's session: the entry the agent itself would continue from
        (``None`` also for an xcsh session, which has no such distinction)."""
        source = self._held()
        return source.own_leaf_name() if isinstance(source, JsonlSession) else None

    def dehydrate(self) -> None:
        """Let the session go and what is derived per entry; keep the renderings."""
        self.source = None
        self._table = None
        self._entry_listing = None
        self._entry_bytes = {}
        self.listings = {}
        self.names_looked_up = 0
        self._cached_bytes = sum(len(v) for v in self._renders.values())

    # -- freshness ---------------------------------------------------------------------

    def refresh(self) -> int:
        """Catch up with the file. Returns 0 (same), 1 new entries, -1 full reload
        (or a new mode: every attribute the kernel holds is stale)."""
        changed = self._catch_up()
        if self.mode_changed:
            self.mode_changed = False
            return -1
        return changed

    def _catch_up(self) -> int:
        state = self._saw(session_stat(self.ref.path))
        self.checked_at = time.monotonic()
        if state == self.file_state:
            return 0
        source = self.source
        count = len(source) if source is not None else 0
        if source is None:
            changed = -1  # only renderings: they are simply stale now
        else:
            try:
                found, reread = source.catch_up(), source.reread
            except NotCompact:  # replaced by a file not held compact: read at next access
                self.source, found, reread = None, True, True
            changed = 0 if not found else -1 if reread else 1
        if changed > 0:
            # Another process appended: core moved the leaf to its last line, which
            # records a leaf in the file; the one chosen through the mount is over
            # (another agent's: it continued the session itself).
            self.pinned_leaf = None
            if isinstance(self.source, JsonlSession):
                self.source.choose_leaf(None)
        elif changed < 0:
            self.apply_pin()
        self._note_state(state)
        if changed > 0:
            self._entries_appended(count)
        elif changed < 0:
            self._forget_renders()
        return changed

    def after_write(
        self, entries_changed: bool = True, appended: os.stat_result | None = None
    ) -> None:
        """A write through the mount changed memory (and maybe the file): renderings
        are stale, and the file as it is now is what we have seen. A leaf move that
        added no entry keeps the per-entry tables (rebuilding them is O(entries)).
        ``appended``: the stat of the manager's file its append took
        (`SessionManager.take_append_stat`), which then need not be stat'ed again
        when it is the session's file."""
        source = self.source
        parsed = source if isinstance(source, ManagerSource) else None
        # (The manager names its file as a str, the ref as a Path.)
        own = parsed is not None and parsed.manager.get_session_file() == os.fspath(self.ref.path)
        st: os.stat_result | None = appended if own else None
        if st is None:
            try:
                st = os.stat(self.ref.path)
            except OSError:
                st = None
        if entries_changed:
            if parsed is not None:
                # One stat for both (the source's size is its file's: ours).
                parsed.changed(st.st_size if own and st is not None else None)
            self._forget_renders()
        else:
            self.version += 1
            # The renderings go, the entry files stay: subtract the few renderings
            # rather than add up every entry file again (a leaf move is O(1)).
            self._cached_bytes -= sum(len(v) for v in self._renders.values())
            self._renders = {}
            self.listings = {}
        if st is None:
            return
        self._note_state(self._saw(st))
        self.checked_at = time.monotonic()

    def unchanged_on_disk(self) -> bool:
        """One ``stat``: True (and marked fresh) when the file is exactly as last seen.

        Done inline on the event loop because it is far cheaper than a thread hop; a
        change (or an error) goes the slow way through ``refresh`` in a worker thread.
        """
        try:
            st = session_stat(self.ref.path)
        except OSError:
            return False
        if self._saw(st) != self.file_state or self.mode_changed:
            return False
        self.checked_at = time.monotonic()
        return True

    def _entries_appended(self, count_before: int) -> None:
        """Entries were appended, from position ``count_before`` on, and nothing else
        changed: the renderings go; a compact session's ``entries/`` table, listing and
        entry files kept are extended by the new entries when that gives what building
        them again would (a 200,000-entry session's listing renders every entry: about
        1.5 s), else they go too."""
        table, listing, files = self._table, self._entry_listing, self._entry_bytes
        self._forget_renders()
        source = self.source
        if table is None or not isinstance(source, XcshSession):
            return
        count = len(source)
        if len(table.names) != count_before or count < count_before:
            return
        new = appended_entry_file_names(
            table.index_of_name, [source.entry_name(i) for i in range(count_before, count)]
        )
        if new is None:
            return
        index_of_name = dict(table.index_of_name)  # (a listing may still read the old)
        index_of_name.update(zip(new, range(count_before, count), strict=True))
        self._table = EntryTable(table.names + new, index_of_name)
        for index, data in files.items():  # entry files never change
            self._keep_entry_file(index, data)
        if listing is not None and not listing.follows_file and len(listing.sizes) == count_before:
            measured = _EntryFiles(keep=False)
            times = [source.entry_time_ms(i) for i in range(count_before, count)]
            for index in range(count_before, count):
                measured(source.entry_view(index))
            sizes = array("q", listing.sizes)
            sizes.extend(measured.sizes)
            mtimes = array("q", listing.mtimes_ns)
            mtimes.extend(self._mtime_ns(ms) for ms in times)
            self._entry_listing = EntryListing(
                self._table, sizes, mtimes, follows_file=None in times
            )

    def _forget_renders(self) -> None:
        self.version += 1
        self._renders = {}
        self._table = None
        self._entry_listing = None
        self._entry_bytes = {}
        self._cached_bytes = 0
        self.listings = {}

    # -- views of the session ------------------------------------------------------------

    def _held(self) -> SessionSource:
        """The source, loading the session first when only renderings are held."""
        self.ensure_readable()
        assert self.source is not None
        return self.source

    def cached_leaf_name(self) -> str | object | None:
        """The leaf's ``entries/`` file name (``None``: no leaf) when it is known
        without work, else `UNKNOWN` (the caller then asks in a worker thread)."""
        source = self.source
        if self._table is None or source is None or not source.leaf_known():
            return UNKNOWN
        return self.name_for_id(source.leaf_name())

    def entries(self) -> list[Entry]:
        """Every entry, parsed now (copies: the caller may keep them)."""
        source = self._held()
        return [source.entry(i) for i in range(len(source))]

    def entry(self, index: int) -> Entry:
        return self._held().entry(index)

    def entry_count(self) -> int:
        return len(self._held())

    def header(self) -> dict[str, Any]:
        return self._held().header()

    def leaf_id(self) -> str | None:
        """The leaf's entry name (an xcsh session: its id)."""
        return self._held().leaf_name()

    def entry_name(self, index: int) -> str:
        """Entry ``index``'s raw name (an xcsh session: its id; another agent's: see
        `core.formats.base`)."""
        return self._held().entry_name(index)

    def index_of_id(self, entry_id: str) -> int | None:
        """The position of the entry named ``entry_id`` (the last one of a repeated
        id)."""
        return self._held().index_of(entry_id)

    def name_for_id(self, entry_id: str | None) -> str | None:
        """The ``entries/`` file name of the entry with this id (``None``: no such)."""
        index = self.index_of_id(entry_id) if isinstance(entry_id, str) else None
        return self.table().names[index] if index is not None else None

    def path_indexes(self) -> list[int]:
        """Positions of the entries on the path from the root down to the leaf."""
        return self._held().path_indexes()

    def labels(self) -> dict[str, str]:
        return self._held().labels()

    def persist_error(self) -> Exception | None:
        """A write failure core latched (only a parsed session ever writes)."""
        manager = self.manager
        return manager.persist_error if manager is not None else None

    def needs_rewrite(self) -> bool:
        """Migrated in memory (only a parsed session can be: compact ones are current)."""
        manager = self.manager
        return manager.needs_rewrite if manager is not None else False

    def table(self) -> EntryTable:
        if self._table is None:
            source = self._held()
            self._table = build_entry_table([source.entry_name(i) for i in range(len(source))])
        return self._table

    def entry_bytes(self, index: int) -> bytes:
        data = self._entry_bytes.get(index)
        if data is None:
            data = render.pretty_json(self._held().entry_view(index))
            self._keep_entry_file(index, data)
        return data

    def _keep_entry_file(self, index: int, data: bytes) -> None:
        if not self._over_read_limit():  # kept, it would be the whole file again
            self._entry_bytes[index] = data
            self._cached_bytes += len(data)

    def entry_listing(self) -> EntryListing:
        """Every entry file's name, size and time (an ``entries/`` listing): each
        entry rendered once to learn its size (one pass over the entries, each parsed
        and let go, unless the load measured them already: `ENTRY_LISTING`), and kept
        only when the session is small (`LISTED_FILES_KEPT_FRACTION`)."""
        if self._entry_listing is None:
            source = self._held()
            files = _EntryFiles(self._keeps_listed_files())
            for entry in source.entry_views():
                files(entry)
            self._entry_listing = self._listing_of(files)
        return self._entry_listing

    def _keeps_listed_files(self) -> bool:
        limit = self.whole_read_limit
        return limit is None or self.text_size <= limit // LISTED_FILES_KEPT_FRACTION

    def _listing_of(self, files: _EntryFiles) -> EntryListing:
        """The listing of the entry files ``files`` measured (every entry of the source
        held), keeping those it kept."""
        for index, data in enumerate(files.kept or ()):
            if index not in self._entry_bytes:
                self._keep_entry_file(index, data)
        times = self._held().entry_times_ms()
        mtimes = array("q", [self._mtime_ns(ms) for ms in times])
        return EntryListing(self.table(), files.sizes, mtimes, follows_file=None in times)

    def _over_read_limit(self) -> bool:
        limit = self.whole_read_limit
        return limit is not None and self.text_size > limit

    def listed_entry_file(self, name: str) -> tuple[int, int] | None:
        """The size and mtime (ns) of entry file ``name`` if the ``entries/`` listing
        is measured already (a load for a listing measures it: `ENTRY_LISTING`) and
        shows it; no work: safe on the event loop."""
        listing = self._entry_listing
        if listing is None:
            return None
        index = listing.table.index_of_name.get(name)
        return (listing.sizes[index], listing.mtimes_ns[index]) if index is not None else None

    def cached_entry_bytes(self, name: str) -> bytes | None:
        """The entry file's bytes if already rendered (no work: safe on the event loop)."""
        table = self._table
        if table is None:
            return None
        index = table.index_of_name.get(name)
        return self._entry_bytes.get(index) if index is not None else None

    def entry_mtime_ns(self, index: int) -> int:
        return self._mtime_ns(self._held().entry_time_ms(index))

    def _mtime_ns(self, ms: int | None) -> int:
        """An entry file's mtime: its entry's time, else the session file's."""
        return ms * 1_000_000 if ms is not None else self.mtime_ns

    def blob_shas(self) -> list[str]:
        return self._held().blob_shas()

    def branch_page_names(self) -> list[str]:
        """``branches/``: a page per tip of the tree, named like its entry file."""
        names = self.table().names
        return [page_name(names[index]) for index in tip_indexes(self._held())]

    # -- renderings, cached per version -----------------------------------------------

    def cached(self, what: str) -> bytes | None:
        return self._renders.get(what)

    def rendered(self, what: str) -> bytes:
        data = self._renders.get(what)
        if data is None:
            source = self._held()
            images = BlobFiles(self.blobs_dir, self.access) if self.blobs_dir else None
            streamed = self._streamed_index(source) if what == "context.json" else None
            if streamed is not None:
                data = _streamed_context(streamed)
            elif what in _RENDERED_ENTRY_BY_ENTRY and self._streams_context():
                data = render_source(source, what, images, self.links)
            elif parses_entries(what):
                with source.parsed_once():
                    data = render_source(source, what, images, self.links)
            else:  # header.json's archive note needs the file it was read from
                data = render_source(source, what, images, self.links, self.ref.path)
            if is_branch_page(what):
                self._forget_branch_pages(keep=BRANCH_PAGES_KEPT - 1)
            self._keep_rendering(what, data)
        return data

    def rendered_from_index(self, what: str) -> bytes | None:
        """``what`` (one of `MADE_FROM_THE_INDEX`) made from the compact index this
        session holds, each entry read from the file and parsed in turn, whatever the
        file's size; ``None`` when the session is not held so (parsed, another agent's:
        the caller then judges the file's size)."""
        source = self.source
        if (
            what not in MADE_FROM_THE_INDEX
            or self.opener is not None
            or not isinstance(source, XcshSession)
            or not isinstance(source.index, CompactSession)
            or not self._streams_context()  # (a small file: from its parse, faster)
        ):
            return None
        return self.rendered(what)

    def _keep_rendering(self, what: str, data: bytes) -> None:
        self._renders[what] = data
        self._cached_bytes += len(data)

    def _streams_context(self) -> bool:
        """Whether ``context.json`` of the file is written a message at a time, and
        `_RENDERED_ENTRY_BY_ENTRY` made so (`STREAMED_CONTEXT_FRACTION`)."""
        limit = self.whole_read_limit
        return limit is not None and self.text_size > limit // STREAMED_CONTEXT_FRACTION

    def _streamed_index(self, source: SessionSource) -> StreamIndex | None:
        """The index ``context.json`` is written from a message at a time: the compact
        session ``source``'s own, with stand-ins made from the bytes it holds (the
        version held, no second index of the file), when it is to be
        (`_streams_context`); ``None``: rendered from the parse (a parsed session, a
        small file)."""
        if not isinstance(source, XcshSession) or not isinstance(source.index, CompactSession):
            return None
        if not self._streams_context():
            return None
        return StreamIndex.over(source.index)

    def _forget_branch_pages(self, keep: int) -> None:
        """Keep only the ``keep`` newest branch pages: a session has a page per tip,
        each about as big as its transcript, and ``cat branches/*`` must not hold them
        all (the dict keeps insertion order: the first ones are the oldest)."""
        pages = [name for name in self._renders if is_branch_page(name)]
        for name in pages[: max(0, len(pages) - keep)]:
            self._cached_bytes -= len(self._renders.pop(name))

    def memory_cost(self) -> int:
        """Bytes counted against the cache's budget: the session as held (its source's
        own figure: a parsed one by `PARSED_SIZE_FACTOR`), the renderings, and what
        its ``entries/`` table, listings and names looked up hold (`TABLE_BYTES_PER_ENTRY`,
        `LISTING_BYTES_PER_ROW`)."""
        held = self.source.memory_cost() if self.source is not None else 0
        table = len(self._table.names) * TABLE_BYTES_PER_ENTRY if self._table is not None else 0
        if self._entry_listing is not None:
            table += len(self._entry_listing.sizes) * ENTRY_LISTING_BYTES_PER_ENTRY
        rows = self.names_looked_up * LISTING_BYTES_PER_ROW
        for listed in self.listings.values():
            rows += len(listed) * getattr(listed, "bytes_per_row", LISTING_BYTES_PER_ROW)
        return held + self._cached_bytes + table + rows


def _streamed_context(index: StreamIndex) -> bytes:
    """``context.json`` of the session ``index`` was built from, written a message at a
    time into memory (the same bytes as `render_source`'s); its stand-ins are let go
    (the index stays as compact as `CompactSession`'s)."""
    out = io.BytesIO()
    try:
        write_streamed(index, "context.json", out)
    finally:  # also when it failed (a file read where it is, shrunk meanwhile): the
        index.drop_stand_ins()  # held index would keep a stand-in an entry otherwise
    return out.getvalue()
