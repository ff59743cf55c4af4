"""Which session has which id, kept current without re-listing the agent dir:
``SessionIdIndex`` (``by-id/``).

The first use lists every project dir and artifacts dir once (headers come from
`AgentIndex`'s per-inode cache). After that a dir is listed again only when its mtime
changed: a new, removed or renamed session file (the agents' atomic rewrites are
renames) changes its dir's mtime; an append does not, and does not change the id. A
dir whose mtime is too recent to be trusted (a second change within the file
system's timestamp granularity would not move it) is listed again at the next sweep.

A sweep stats the sessions root, every project dir and every artifacts dir that holds
sub-agent sessions: no listing, no header read unless something changed. Lookups:

* a name the map knows costs one ``stat`` of its session file (to answer with the
  file as it is now and to notice a file gone or rewritten with another id);
* a name it does not know sweeps at most once per `MISS_SWEEP_SECONDS`, so a burst of
  misses (a shell probing names, a script polling for a session not yet written)
  never re-lists anything, while a session just made shows up at once.

Thread-safe (one lock); synchronous, called from worker threads.
"""

from __future__ import annotations

import bisect
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sessionfs.view import session_keys
from sessionfs.view.names import decode_name, encode_name, unique_names
from sessionfs.view.session_ref import SessionRef

__all__ = ["MISS_SWEEP_SECONDS", "RACY_NS", "SessionIdIndex", "SessionLister"]

#: A name not in the map sweeps the dirs at most this often.
MISS_SWEEP_SECONDS = 0.1
#: A dir modified less than this long before it was listed may change again without
#: its mtime moving (coarse timestamps: FAT's are 2 s): it is listed again next sweep.
RACY_NS = 2_000_000_000

#: (project, parent stem or None for the project dir itself)
_DirKey = tuple[str, str | None]


class ProjectSessions(Protocol):
    """What the map reads of a project's listing (`agent_index.ProjectListing`)."""

    @property
    def refs(self) -> list[SessionRef]: ...

    @property
    def dirs(self) -> frozenset[str] | None: ...


class SessionLister(Protocol):
    """What the map needs of `sessionfs.view.agent_index.AgentIndex` (which owns it)."""

    @property
    def sessions_root(self) -> Path: ...

    def projects(self) -> list[str]: ...

    def listing_of(self, project: str) -> ProjectSessions: ...

    def subagents_of(self, project: str, stem: str) -> list[SessionRef]: ...

    def session(self, project: str, stem: str) -> SessionRef | None: ...

    def session_if_known(
        self, project: str, stem: str, cached_only: bool = True
    ) -> SessionRef | object | None: ...


class IdLookup(Protocol):
    """What ``by-id/`` asks of an index's id map (`SessionIdIndex`, or another
    agent's: `sessionfs.view.other_agent_index`)."""

    def listing(self) -> list[tuple[str, SessionRef]]: ...

    def resolve(self, name: str) -> SessionRef | None: ...

    def resolve_known(self, name: str) -> SessionRef | None: ...


@dataclass
class _DirState:
    """One listed dir: its mtime when listed and the sessions found in it."""

    mtime_ns: int | None = None  # None: never listed
    settled: bool = False  # the mtime can be trusted to move on the next change
    refs: list[SessionRef] = field(default_factory=list)
    #: stems of the sessions listed here that have an artifacts dir
    with_artifacts: set[str] = field(default_factory=set)


class SessionIdIndex:
    """Session id -> session of one agent dir (see the module doc)."""

    def __init__(self, index: SessionLister, clock: Callable[[], float] = time.monotonic) -> None:
        self._index = index
        self._clock = clock
        self._lock = threading.Lock()
        self._root = _DirState()
        self._dirs: dict[_DirKey, _DirState] = {}
        self._last_sweep: float | None = None
        self._listing: list[tuple[str, SessionRef]] | None = None
        self._by_name: dict[str, SessionRef] = {}
        self._by_id: list[tuple[str, SessionRef]] = []  # (lower-case id, ref), sorted
        self._by_stem: list[tuple[str, SessionRef]] = []  # (lower-case file stem, ref)
        #: dirs listed so far (the first sweep lists them all): for tests and benches
        self.listings = 0

    def listing(self) -> list[tuple[str, SessionRef]]:
        """``by-id/``'s names and sessions after a sweep (in `AgentIndex.every_session`
        order, so duplicate and long ids get the names they always get)."""
        with self._lock:
            self._sweep()
            return list(self._named())

    def resolve(self, name: str) -> SessionRef | None:
        """The session ``by-id/<name>`` leads to: a listed name, else a unique prefix
        of an id or of a file stem (case-insensitive); ``None`` if none or ambiguous."""
        with self._lock:
            if self._last_sweep is None:
                self._sweep()
            found = self._find(name)
            ref = self._current(found)
            # A known name whose file changed is a change to catch up with now; an
            # unknown one waits for the next sweep slot.
            if ref is None and (found is not None or self._may_sweep_for_miss()):
                self._sweep()
                ref = self._current(self._find(name))
            return ref

    def resolve_known(self, name: str) -> SessionRef | None:
        """`resolve` for the common case only, cheap enough for the event loop: a name
        the map already knows whose file needs no header read (one ``stat``, no
        sweep, never waits for a sweeping thread). ``None``: ask `resolve`."""
        if not self._lock.acquire(blocking=False):
            return None  # a sweep is running: the caller's thread will wait for it
        try:
            if self._last_sweep is None:
                return None
            ref = self._find(name)
            if ref is None:
                return None
            now = self._index.session_if_known(ref.project, ref.stem, cached_only=True)
            if isinstance(now, SessionRef) and now.session_id == ref.session_id:
                return now
            return None
        finally:
            self._lock.release()

    def _may_sweep_for_miss(self) -> bool:
        assert self._last_sweep is not None
        return self._clock() - self._last_sweep >= MISS_SWEEP_SECONDS

    def _current(self, ref: SessionRef | None) -> SessionRef | None:
        """``ref`` as its file is now (one stat); ``None`` and its dir marked for a
        listing when the file is gone or no longer has that id."""
        if ref is None:
            return None
        now = self._index.session(ref.project, ref.stem)
        if now is not None and now.session_id == ref.session_id:
            return now
        state = self._dirs.get(_parent_key(ref))
        if state is not None:
            state.settled = False  # changed in place, mtime unmoved: list it again
        return None

    # --- the map -------------------------------------------------------------------

    def _named(self) -> list[tuple[str, SessionRef]]:
        if self._listing is None:
            refs = [ref for ref in self._ordered_refs() if ref.session_id]
            names = unique_names([encode_name(ref.session_id) for ref in refs])
            self._listing = list(zip(names, refs, strict=True))
            self._by_name = dict(self._listing)
            self._by_id = sorted(((ref.session_id.lower(), ref) for ref in refs), key=_first)
            self._by_stem = sorted(((ref.name.lower(), ref) for ref in refs), key=_first)
        return self._listing

    def _ordered_refs(self) -> Iterator[SessionRef]:
        for project in sorted(p for p, parent in self._dirs if parent is None):
            yield from self._with_subagents((project, None))

    def _with_subagents(self, key: _DirKey) -> Iterator[SessionRef]:
        state = self._dirs.get(key)
        if state is None:
            return
        for ref in state.refs:
            yield ref
            if ref.stem in state.with_artifacts:
                yield from self._with_subagents((ref.project, ref.stem))

    def _find(self, name: str) -> SessionRef | None:
        self._named()
        listed = self._by_name.get(name)
        if listed is not None:
            return listed
        wanted = decode_name(name).lower()
        if not wanted:
            return None
        matches: dict[tuple[str, str], SessionRef] = {}
        for table in (self._by_id, self._by_stem):
            for ref in _starting_with(table, wanted):
                matches[(ref.project, ref.stem)] = ref
                if len(matches) > 1:
                    return None  # ambiguous
        return next(iter(matches.values()), None)

    # --- sweeping ------------------------------------------------------------------

    def _sweep(self) -> None:
        """List again every dir whose mtime moved (or was not trustworthy)."""
        started_ns = time.time_ns()
        self._last_sweep = self._clock()
        root_mtime = _mtime_ns(str(self._index.sessions_root), follow=True)
        if root_mtime is None:
            if self._dirs:
                self._dirs.clear()
                self._listing = None
            return
        if self._needs_listing(self._root, root_mtime):
            self._list_projects(root_mtime, started_ns)
        pending = list(self._dirs)
        while pending:
            key = pending.pop()
            state = self._dirs.get(key)
            if state is None:
                continue  # dropped with its parent session
            mtime = _mtime_ns(self._dir_path(key))
            if mtime is None:
                self._drop(key)
            elif self._needs_listing(state, mtime):
                pending += self._list_dir(key, state, mtime, started_ns)
        self._named()  # sorted here, in the sweeping thread, not at a lookup

    @staticmethod
    def _needs_listing(state: _DirState, mtime: int) -> bool:
        return state.mtime_ns != mtime or not state.settled

    def _list_projects(self, mtime: int, started_ns: int) -> None:
        self.listings += 1
        projects = set(self._index.projects())
        for key in [k for k in self._dirs if k[1] is None and k[0] not in projects]:
            self._drop(key)
        for project in projects:
            self._dirs.setdefault((project, None), _DirState())
        _mark_listed(self._root, mtime, started_ns)

    def _list_dir(
        self, key: _DirKey, state: _DirState, mtime: int, started_ns: int
    ) -> list[_DirKey]:
        """List one dir again; returns the artifacts dirs that are new in it."""
        self.listings += 1
        project, parent = key
        dirs: frozenset[str] | None = None
        if parent is None:
            # The listing `ls` uses too (reused while the dir is unchanged): it names
            # the real dirs in the project dir, so no session costs a stat here.
            listing = self._index.listing_of(project)
            refs, dirs = listing.refs, listing.dirs
        else:
            refs = self._index.subagents_of(project, parent)
        with_artifacts = {ref.stem for ref in refs if self._has_subagent_dir(ref, dirs)}
        for gone in state.with_artifacts - with_artifacts:
            self._drop((project, gone))
        new: list[_DirKey] = [(project, s) for s in with_artifacts - state.with_artifacts]
        for child in new:
            self._dirs[child] = _DirState()
        state.refs, state.with_artifacts = refs, with_artifacts
        _mark_listed(state, mtime, started_ns)
        self._listing = None
        return new

    def _has_subagent_dir(self, ref: SessionRef, dirs: frozenset[str] | None) -> bool:
        """Whether a session has an artifacts dir the index follows: in ``dirs`` (the
        real dirs its dir's listing saw) when known, else one stat (most sessions
        have none)."""
        if ref.stem.count("/") + 1 >= session_keys.MAX_STEM_PARTS:
            return False
        if dirs is not None:
            return ref.stem in dirs
        directory = session_keys.artifacts_dir(self._index.sessions_root, ref.project, ref.stem)
        return os.path.isdir(directory) and not os.path.islink(directory)

    def _drop(self, key: _DirKey) -> None:
        """Forget a dir and every artifacts dir below it."""
        state = self._dirs.pop(key, None)
        if state is None:
            return
        self._listing = None
        for stem in state.with_artifacts:
            self._drop((key[0], stem))

    def _dir_path(self, key: _DirKey) -> str:
        project, parent = key
        if parent is None:
            return str(self._index.sessions_root / project)
        return str(session_keys.artifacts_dir(self._index.sessions_root, project, parent))


def _mark_listed(state: _DirState, mtime: int, started_ns: int) -> None:
    state.mtime_ns = mtime
    state.settled = mtime < started_ns - RACY_NS


def _mtime_ns(path: str, follow: bool = False) -> int | None:
    """A dir's mtime, ``None`` if it is not one. Project and artifacts dirs are
    real dirs (a symlink there is not followed by the listings either); the sessions
    root may be reached through a symlink (``follow``)."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError:
        return None
    return st.st_mtime_ns if stat.S_ISDIR(st.st_mode) else None


def _parent_key(ref: SessionRef) -> _DirKey:
    parent = ref.stem.rpartition("/")[0]
    return (ref.project, parent or None)


def _first(row: tuple[str, SessionRef]) -> str:
    return row[0]


def _starting_with(table: list[tuple[str, SessionRef]], prefix: str) -> Iterator[SessionRef]:
    """The refs of a table sorted by key whose key starts with ``prefix``."""
    at = bisect.bisect_left(table, prefix, key=_first)
    while at < len(table) and table[at][0].startswith(prefix):
        yield table[at][1]
        at += 1
