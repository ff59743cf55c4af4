"""One session as the mount shows it: ``LoadedSession``.

A session loaded with ``SessionManager.open(browse=True, resolve_blobs=False)`` plus
everything rendered from it, cached per *version*. The version goes up whenever
``catch_up()`` finds new lines or a replaced file. Synchronous: callers hold its
``lock`` and run it in a worker thread (`sessionfs.view.session_cache`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from core import SessionManager, paths
from core.context import build_session_context, context_sources
from core.persist import blob_refs_in
from sessionfs.view import render
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.names import entry_file_names
from sessionfs.view.refusal import WriteRejected

#: How old a freshness check may be before the next access repeats it (one stat).
FRESH_INTERVAL = 0.2
#: What a parsed session costs in the daemon's RSS relative to its file size, for the
#: LRU budget. tracemalloc on corpus-shaped sessions: the manager keeps ~1.8x, its load
#: peaks at ~4.6x; the issue-11 bench (1,000 sessions, --cache-mb 256) measured RSS
#: 395 MB with a factor of 4, i.e. ~5.5x counting our indexes and allocator slack.
#: 6 keeps RSS under --cache-mb + 100 MB.
PARSED_SIZE_FACTOR = 6
#: "not known without work" (see `LoadedSession.cached_leaf_name`)
UNKNOWN = object()


def open_browse(path: Path) -> SessionManager:
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
    #: the parsed session; ``None`` while dehydrated (`hydrated` is the checked access)
    manager: SessionManager | None
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
    #: per-version listings reused by repeated readdirs, by the listed dir's path in the
    #: mount: rows of (name, node). Owned by the nodes; dropped with each version.
    listings: dict[tuple[str, ...], list[tuple[str, Any]]] = field(default_factory=dict)
    _by_id: dict[str, dict[str, Any]] | None = None
    # Set by the write paths: a leaf chosen through the mount (``ln -sfn``, ``rm leaf``)
    # is not in the file, so it is kept here until an append records it. A pinned
    # session is never dehydrated or forgotten (that would lose the leaf).
    pinned_leaf: tuple[str | None] | None = None
    last_result: str | None = None
    last_error: str | None = None

    @property
    def hydrated(self) -> SessionManager:
        """The parsed session, for code that runs after ``ensure_loaded`` under the lock
        (in a worker thread): a dehydrated session here is a bug, not a state."""
        if self.manager is None:
            raise RuntimeError(f"{self.ref.path}: used while dehydrated")
        return self.manager

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
        return list(self.hydrated.get_entries())

    def header(self) -> dict[str, Any]:
        return dict(self.hydrated.get_header() or {})

    def leaf_id(self) -> str | None:
        leaf = self.hydrated.get_leaf_id()
        return leaf if isinstance(leaf, str) else None

    def by_id(self) -> dict[str, dict[str, Any]]:
        if self._by_id is None:
            # Last occurrence wins, as in core's context builder.
            self._by_id = {e["id"]: e for e in self.entries() if isinstance(e.get("id"), str)}
        return self._by_id

    def labels(self) -> dict[str, str]:
        return {k: v for k, v in dict(self.hydrated.get_labels()).items() if isinstance(v, str)}

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
    usage = session.hydrated.get_usage_statistics()
    return render.stats_json(session.entries(), session.leaf_id(), session.by_id(), usage)


_RENDERERS: dict[str, Callable[[LoadedSession], bytes]] = {
    "header.json": lambda s: render.pretty_json(s.header()),
    "title": lambda s: render.title_text(s.header()),
    "context.json": lambda s: render.context_json(s.context()),
    "transcript.md": _render_transcript,
    "tree.txt": lambda s: render.tree_text(s.hydrated.get_tree(), s.leaf_id(), s.by_id()),
    "stats.json": _render_stats,
}
