"""One session as the mount shows it: ``LoadedSession``.

Three weights, lightest first (``SessionCache`` moves sessions between them):

* *unloaded*: only the renderings already made are kept (valid for ``file_state``), so
  re-reading ``transcript.md`` of a session that left the loaded set costs one stat;
* *compact* (the usual state of a session that is only read): the file's bytes plus a
  per-entry index (`core.formats.xcsh_file`), about its file size in memory.
  ``entries/<id>.json`` parses its one line; a rendering parses every line, renders and
  lets the entries go (`_parsed_once`);
* *parsed*: a ``SessionManager.open(browse=True, resolve_blobs=False)``, five to six
  times the file's size. Built for writes through the mount (``hydrated``), for files
  at an older format version (migrated in memory: their ids exist nowhere else), and
  kept while a leaf moved through the mount is pinned.

Everything rendered is cached per *version*, which goes up whenever a catch-up finds
new lines or a replaced file. Synchronous: callers hold its ``lock`` and run it in a
worker thread (`sessionfs.view.session_cache`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from core import NotASessionError, SessionManager, paths
from core.context import build_session_context, messages_with_sources, path_to_root
from core.formats.xcsh_file import CompactSession, NotCompact, read_file
from core.persist import blob_refs_in
from core.storage import FileSessionStorage, PathArg, StorageStat
from core.tree import build_tree, usage_totals
from sessionfs.view import render
from sessionfs.view.access import FileAccess
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.names import entry_file_names
from sessionfs.view.refusal import WriteRejected

#: How old a freshness check may be before the next access repeats it (one stat).
FRESH_INTERVAL = 0.2
#: What a *parsed* session costs in the daemon's RSS relative to its file size, for the
#: LRU budget. tracemalloc on corpus-shaped sessions: the manager keeps ~1.8x, its load
#: peaks at ~4.6x; the issue-11 bench (1,000 sessions, --cache-mb 256) measured RSS
#: 395 MB with a factor of 4, i.e. ~5.5x counting our indexes and allocator slack.
#: 6 keeps RSS under --cache-mb + 100 MB. A compact session counts its real sizes.
PARSED_SIZE_FACTOR = 6
#: "not known without work" (see `LoadedSession.cached_leaf_name`)
UNKNOWN = object()

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


def build_entry_table(ids: Sequence[object]) -> EntryTable:
    """The table for entries with these ``id`` values (raw: any type, in file order)."""
    names = entry_file_names(ids)
    return EntryTable(names=names, index_of_name={name: i for i, name in enumerate(names)})


def _by_id(entries: list[Entry]) -> dict[str, Entry]:
    # Last occurrence wins, as in core's context builder.
    return {e["id"]: e for e in entries if isinstance(e.get("id"), str)}


@dataclass
class LoadedSession:
    """A session in the cache and its renderings (sync; callers hold ``lock``)."""

    ref: SessionRef
    #: the parsed session, when held (see the module docstring; ``hydrated`` builds it)
    manager: SessionManager | None
    #: the file's bytes and a per-entry index, when held instead of the manager
    compact: CompactSession | None = None
    version: int = 1
    checked_at: float = 0.0
    file_state: tuple[int, int, int] = (0, 0, 0)  # inode, size, mtime_ns when last checked
    #: permission bits and owner of the file when last checked (a chmod or chown
    #: changes no other field)
    file_access: FileAccess | None = None
    #: they changed since the last ``refresh``, which reports it as a full change
    #: (the kernel caches entry attributes for long: they must all be dropped)
    mode_changed: bool = False
    lock: trio.Lock = field(default_factory=trio.Lock)
    _renders: dict[str, bytes] = field(default_factory=dict)
    _table: EntryTable | None = None
    _entry_bytes: dict[int, bytes] = field(default_factory=dict)
    _cached_bytes: int = 0  # sum of the cached renderings (kept incrementally: hot path)
    #: per-version listings reused by repeated readdirs, by the listed dir's path in the
    #: mount: rows of (name, node). Owned by the nodes; dropped with each version.
    listings: dict[tuple[str, ...], list[tuple[str, Any]]] = field(default_factory=dict)
    _by_id: dict[str, Entry] | None = None
    #: parsed form only: its entries list and id -> position (last occurrence wins)
    _entry_list: list[Entry] | None = None
    _index_of_id: dict[str, int] | None = None
    #: compact form only: every entry, parsed for the rendering in progress
    _scratch: list[Entry] | None = None
    # Set by the write paths: a leaf chosen through the mount (``ln -sfn``, ``rm leaf``)
    # is not in the file, so it is kept here until an append records it. A pinned
    # session is never unloaded or forgotten (that would lose the leaf).
    pinned_leaf: tuple[str | None] | None = None
    last_result: str | None = None
    last_error: str | None = None

    @property
    def hydrated(self) -> SessionManager:
        """The parsed session, built now from the file if it is not held (writes, and
        reads that need core's manager). Worker thread, under the lock."""
        if self.manager is None:
            self.ensure_loaded()
        assert self.manager is not None
        return self.manager

    @property
    def is_loaded(self) -> bool:
        """Whether the session itself is held (parsed or compact), not only renderings."""
        return self.manager is not None or self.compact is not None

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
    def access(self) -> FileAccess:
        """The session file's permission bits and owner as last seen."""
        return self.file_access if self.file_access is not None else self.ref.access

    def _saw(self, st: os.stat_result) -> tuple[int, int, int]:
        """Note the file's mode from a fresh stat; returns its state tuple."""
        access = FileAccess.of(st)
        if self.file_access is not None and access != self.file_access:
            self.mode_changed = True
        self.file_access = access
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _seen_now(self, st: os.stat_result) -> None:
        """What was just read is the file as ``st`` says: renderings of another state
        go."""
        state = self._saw(st)
        if state != self.file_state:
            self._forget_renders()
        self.file_state = state
        self.checked_at = time.monotonic()

    # -- loading -------------------------------------------------------------------------

    def load(self, warm: str | None = None) -> None:
        """Read the file and hold it compact, or parsed when it has to be (an older
        format version, a pinned leaf); render ``warm`` (the file about to be read)
        from the same parse. ``NotASessionError`` when the file is not a session."""
        if self.pinned_leaf is None and self._load_compact(warm):
            return
        self.ensure_loaded()
        self.apply_pin()
        if warm is not None:
            self.rendered(warm)

    def _load_compact(self, warm: str | None) -> bool:
        """Hold the file compact (True), or False when it must be parsed instead."""
        try:
            data, st = read_file(self.ref.path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotASessionError(f"{self.ref.path}: {exc.strerror}") from None
        try:
            compact, entries = CompactSession.build(data, st)
        except NotCompact as exc:
            if exc.not_a_session:
                raise NotASessionError(f"{self.ref.path} is not a session file") from None
            self.ensure_loaded(read=(data, st))
            return False
        self._drop_entry_views()
        self.manager, self.compact = None, compact
        self._seen_now(st)
        if warm is not None:
            self._scratch = entries  # parsed already: the rendering uses them, then not
            try:
                self.rendered(warm)
            finally:
                self._end_parse()
        return True

    def ensure_readable(self) -> None:
        """Load the session (compact when it can be) if only renderings are held."""
        if not self.is_loaded:
            self.load()

    def ensure_loaded(self, read: tuple[bytes, os.stat_result] | None = None) -> None:
        """Hold the parsed session (for a write): parse the file if it is not held
        (from ``read``, its bytes and their stat, when they were just read)."""
        if self.manager is not None:
            return
        st = read[1] if read is not None else os.stat(self.ref.path)
        manager = open_browse(self.ref.path, read)
        if self.compact is not None and self.compact.diverged:
            self._forget_renders()  # the file now holds lines the compact index skipped
        self._drop_entry_views()
        self.manager, self.compact = manager, None
        self._seen_now(st)

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
        """Let the session go (parsed or compact) and what is derived per entry; keep
        the renderings."""
        self.manager = None
        self.compact = None
        self._drop_entry_views()
        self._table = None
        self._entry_bytes = {}
        self.listings = {}
        self._cached_bytes = sum(len(v) for v in self._renders.values())

    def _drop_entry_views(self) -> None:
        """Views of one form's entries (objects of the manager, or a transient parse)."""
        self._by_id = None
        self._entry_list = None
        self._index_of_id = None
        self._scratch = None

    # -- freshness ---------------------------------------------------------------------

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
        if self.compact is not None:
            found = self.compact.catch_up(self.ref.path)
            if found is None:  # replaced or shrank: read again at the next access
                self.compact = None
            changed = -1 if found is None else found
        elif self.manager is not None:
            changed = int(self.manager.catch_up())
            if changed > 0:
                # Another process appended: core moved the leaf to its last line, which
                # records a leaf in the file; the one chosen through the mount is over.
                self.pinned_leaf = None
            elif changed < 0:
                self.apply_pin()
        else:  # only renderings: they are simply stale now
            changed = -1
        self.file_state = state
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
        self._drop_entry_views()

    # -- views of the session ------------------------------------------------------------

    def _held_compact(self) -> CompactSession | None:
        """The compact form if that is what is held (``None``: the parsed one is); loads
        the session first when neither is."""
        self.ensure_readable()
        return self.compact

    @contextmanager
    def _parsed_once(self) -> Iterator[None]:
        """Compact form: parse every entry once for the work inside, then let them go."""
        compact = self._held_compact()
        if compact is None or self._scratch is not None:
            yield
            return
        self._scratch = compact.parse_entries()
        try:
            yield
        finally:
            self._end_parse()

    def _end_parse(self) -> None:
        self._scratch = None
        self._by_id = None

    def cached_leaf_name(self) -> str | object | None:
        """The leaf's ``entries/`` file name (``None``: no leaf) when it is known
        without work, else `UNKNOWN` (the caller then asks in a worker thread)."""
        if self._table is None or not self.is_loaded:
            return UNKNOWN
        if self.compact is None and self._index_of_id is None:
            return UNKNOWN
        return self.name_for_id(self.leaf_id())

    def _manager_entries(self) -> list[Entry]:
        if self._entry_list is None:
            self._entry_list = list(self.hydrated.get_entries())
        return self._entry_list

    def entries(self) -> list[Entry]:
        """Every entry (compact form: parsed now, unless a parse is in progress)."""
        if self._scratch is not None:
            return self._scratch
        compact = self._held_compact()
        if compact is not None:
            return compact.parse_entries()
        return self._manager_entries()

    def entry(self, index: int) -> Entry:
        if self._scratch is not None:
            return self._scratch[index]
        compact = self._held_compact()
        return compact.entry(index) if compact is not None else self._manager_entries()[index]

    def entry_count(self) -> int:
        compact = self._held_compact()
        return len(compact) if compact is not None else len(self._manager_entries())

    def header(self) -> dict[str, Any]:
        compact = self._held_compact()
        return dict(compact.header if compact is not None else self.hydrated.get_header() or {})

    def leaf_id(self) -> str | None:
        compact = self._held_compact()
        leaf = compact.leaf_id if compact is not None else self.hydrated.get_leaf_id()
        return leaf if isinstance(leaf, str) else None

    def by_id(self) -> dict[str, Entry]:
        """Entries by id (compact form: kept only while a parse is in progress)."""
        if self._by_id is not None:
            return self._by_id
        found = _by_id(self.entries())
        if self.compact is None or self._scratch is not None:
            self._by_id = found
        return found

    def index_of_id(self, entry_id: str) -> int | None:
        """The position of the entry ``by_id`` gives for this id."""
        compact = self._held_compact()
        if compact is not None:
            return compact.index_of_id.get(entry_id)
        if self._index_of_id is None:
            self._index_of_id = {
                e["id"]: i
                for i, e in enumerate(self._manager_entries())
                if isinstance(e.get("id"), str)
            }
        return self._index_of_id.get(entry_id)

    def name_for_id(self, entry_id: str | None) -> str | None:
        """The ``entries/`` file name of the entry with this id (``None``: no such)."""
        index = self.index_of_id(entry_id) if isinstance(entry_id, str) else None
        return self.table().names[index] if index is not None else None

    def path_indexes(self) -> list[int]:
        """Positions of the entries on the path from the root down to the leaf."""
        compact = self._held_compact()
        if compact is not None:
            return compact.path_indexes(self.leaf_id())
        path = path_to_root(self.leaf_id(), self.by_id())
        return [index for e in path if (index := self.index_of_id(e["id"])) is not None]

    def labels(self) -> dict[str, str]:
        compact = self._held_compact()
        labels = compact.labels if compact is not None else self.hydrated.get_labels()
        return {k: v for k, v in dict(labels).items() if isinstance(v, str)}

    def persist_error(self) -> Exception | None:
        """A write failure core latched (only a parsed session ever writes)."""
        return self.manager.persist_error if self.manager is not None else None

    def needs_rewrite(self) -> bool:
        """Migrated in memory (only a parsed session can be: compact ones are current)."""
        return self.manager.needs_rewrite if self.manager is not None else False

    def table(self) -> EntryTable:
        if self._table is None:
            compact = self._held_compact()
            ids = (
                compact.ids
                if compact is not None
                else [e.get("id") for e in self._manager_entries()]
            )
            self._table = build_entry_table(ids)
        return self._table

    def entry_bytes(self, index: int) -> bytes:
        data = self._entry_bytes.get(index)
        if data is None:
            data = render.pretty_json(self.entry(index))
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
        compact = self._held_compact()
        if compact is not None:
            ms = compact.time_ms(index)
        else:
            ms = paths.iso_to_ms(self._manager_entries()[index].get("timestamp"))
        return ms * 1_000_000 if ms is not None else self.mtime_ns

    def blob_shas(self) -> list[str]:
        found: dict[str, None] = {}
        for entry in self.entries():
            for sha in blob_refs_in(entry):
                found.setdefault(sha, None)
        return list(found)

    def context(self) -> dict[str, Any]:
        with self._parsed_once():  # entries() and by_id() from one parse
            return build_session_context(self.entries(), self.leaf_id(), self.by_id())

    def tree(self) -> list[Any]:
        compact = self._held_compact()
        if compact is None:
            return self.hydrated.get_tree()
        return build_tree(self.entries(), compact.labels)

    def usage(self) -> dict[str, float]:
        compact = self._held_compact()
        if compact is None:
            return self.hydrated.get_usage_statistics()
        return usage_totals(self.entries())

    # -- renderings, cached per version -----------------------------------------------

    def cached(self, what: str) -> bytes | None:
        return self._renders.get(what)

    def rendered(self, what: str) -> bytes:
        data = self._renders.get(what)
        if data is None:
            if what in _HEADER_ONLY:
                data = _RENDERERS[what](self)
            else:
                with self._parsed_once():
                    data = _RENDERERS[what](self)
            self._renders[what] = data
            self._cached_bytes += len(data)
        return data

    def memory_cost(self) -> int:
        """Bytes counted against the cache's budget: the session as held (a parsed one
        by `PARSED_SIZE_FACTOR`, a compact one by its real sizes) and the renderings."""
        if self.manager is not None:
            held = self.file_state[1] * PARSED_SIZE_FACTOR
        elif self.compact is not None:
            held = self.compact.memory_cost()
        else:
            held = 0
        return held + self._cached_bytes


def _render_transcript(session: LoadedSession) -> bytes:
    messages, sources = messages_with_sources(session.entries(), session.leaf_id(), session.by_id())
    title = session.header().get("title")
    return render.transcript_md(title if isinstance(title, str) else None, messages, sources)


def _render_stats(session: LoadedSession) -> bytes:
    return render.stats_json(session.entries(), session.leaf_id(), session.by_id(), session.usage())


_RENDERERS: dict[str, Callable[[LoadedSession], bytes]] = {
    "header.json": lambda s: render.pretty_json(s.header()),
    "title": lambda s: render.title_text(s.header()),
    "context.json": lambda s: render.context_json(s.context()),
    "transcript.md": _render_transcript,
    "tree.txt": lambda s: render.tree_text(s.tree(), s.leaf_id(), s.by_id()),
    "stats.json": _render_stats,
}
#: Renderings made from the header alone (nothing to parse in the compact form).
_HEADER_ONLY = frozenset({"header.json", "title"})


def parses_entries(what: str) -> bool:
    """Whether rendering ``what`` reads every entry (its memory grows with the file)."""
    return what not in _HEADER_ONLY
