"""Another agent's session files, as listings see them: ``OtherAgentIndex``.

The `AgentIndex` the nodes know (projects, a project's sessions, a session's
sub-agents, one session by its mount names, ``by-id``), over another agent's directory
(Claude Code's, Codex's, …) instead of an xcsh agent dir. Where the files are and what
the first KiB of each says is the agent's `AgentCatalog` (its registered connector's
listing, `sessionfs.view.agent_sources`); this class keeps the answer for a moment
(`LIST_INTERVAL`), so a ``find`` or ``grep -r`` over the tree, which asks for every
dir, costs one scan per interval, and a new session or a new sub-agent shows within it.
Each scan is a stat per file and the first KiB of each session file.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from core.formats.agent_format import ListedSession
from core.session_stat import session_stat
from core.zstd_files import ZSTD_SUFFIX, TextSize, file_text_info
from sessionfs.view import session_keys
from sessionfs.view.agent_index import NEEDS_IO, AgentIndex, ProjectListing
from sessionfs.view.session_ref import SessionRef

__all__ = ["LIST_INTERVAL", "AgentCatalog", "Listed", "OtherAgentIndex"]

#: How long one scan of the agent's files answers listings (seconds).
LIST_INTERVAL = 0.5


#: One session file as a catalog finds it (its connector's listing).
Listed = ListedSession


class AgentCatalog(Protocol):
    """Where one agent's session files are (see `sessionfs.view.agent_sources`)."""

    agent: str
    root: Path

    def scan(self) -> Iterable[Listed]: ...


@dataclass
class _Scan:
    at: float
    projects: dict[str, list[SessionRef]] = field(default_factory=dict)
    subagents: dict[tuple[str, str], list[SessionRef]] = field(default_factory=dict)
    by_key: dict[tuple[str, str], SessionRef] = field(default_factory=dict)
    by_path: dict[Path, SessionRef] = field(default_factory=dict)
    project_mtime: dict[str, int] = field(default_factory=dict)


def _text_of(path: Path, st: os.stat_result, before: SessionRef | None) -> TextSize | None:
    """A ``.zst``'s text size (`SessionRef.text`), learnt in the scan's thread: the
    last scan's for the same state of the file, else its header read now (remembered,
    `core.zstd_files.file_text_info`; more than it remembers would each be read
    again). None for a plain file: its size is its text's, no look needed."""
    if not path.name.endswith(ZSTD_SUFFIX):
        return None
    if before is not None and before.text is not None:
        known = before.text_if_known(st.st_size, st.st_mtime_ns)
        if known is not None:
            return known
    return file_text_info(path, st.st_size, st.st_mtime_ns)


class OtherAgentIndex(AgentIndex):
    """`AgentIndex` over another agent's directory (module docstring)."""

    #: `session_path` is where the last scan found the session: a node must ask again
    session_paths_fixed = False

    def __init__(self, catalog: AgentCatalog) -> None:
        super().__init__(catalog.root)
        self.catalog = catalog
        self.agent = catalog.agent
        #: render-cache keys and cleanup are relative to the agent's own directory
        self.sessions_root = catalog.root
        self._scan: _Scan | None = None
        self._lock = threading.Lock()
        self.ids = _IdMap(self)

    # -- the scan --------------------------------------------------------------------

    def _current(self) -> _Scan:
        with self._lock:
            scan = self._scan
            if scan is None or time.monotonic() - scan.at > LIST_INTERVAL:
                scan = self._scan = self._scan_now()
            return scan

    def rescan(self) -> None:
        """The next listing scans again, not up to `LIST_INTERVAL` later (a session the
        mount's ``send`` just made shows at once); lookups keep the last scan."""
        with self._lock:
            if self._scan is not None:
                self._scan.at = float("-inf")

    def _known(self) -> _Scan:
        """For lookups: the last scan, however old, while it knows what is asked (a
        session's file never moves; a stale mtime is caught by the session's own
        stat); a new scan only when there is none yet. May scan: a thread's call (the
        event loop asks `project_mtime_if_known` and `session_if_known`)."""
        return self._scan or self._current()

    def first_scan(self) -> None:
        """Scans now unless a scan was made: the mount runs it in a worker thread at
        start, so the first lookup under ``agents/<agent>/`` finds it done (a scan can
        wait on a locked database for its busy timeout)."""
        self._known()

    def _scan_now(self) -> _Scan:
        scan = _Scan(at=time.monotonic())
        before = self._scan.by_path if self._scan is not None else {}
        for listed in self.catalog.scan():
            if not session_keys.is_valid_name(listed.project):
                continue
            try:
                st = session_stat(listed.path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            ref = SessionRef(
                listed.project,
                listed.stem,
                listed.path,
                dict(listed.header),
                st.st_mtime_ns,
                st.st_size,
                stat.S_IMODE(st.st_mode),
                text=_text_of(listed.path, st, before.get(listed.path)),
            )
            scan.by_key[(ref.project, ref.stem)] = ref
            scan.by_path[ref.path] = ref
            parent, _, _ = ref.stem.rpartition("/")
            if parent:
                scan.subagents.setdefault((ref.project, parent), []).append(ref)
            else:
                scan.projects.setdefault(ref.project, []).append(ref)
            newest = scan.project_mtime.get(ref.project, 0)
            scan.project_mtime[ref.project] = max(newest, ref.mtime_ns)
        for refs in (*scan.projects.values(), *scan.subagents.values()):
            refs.sort(key=lambda r: r.stem)
        return scan

    # -- what the nodes ask (AgentIndex's interface) --------------------------------------

    def projects(self) -> list[str]:
        return sorted(self._current().projects)

    def project_mtime_ns(self, project: str) -> int | None:
        found = self._known().project_mtime.get(project)
        return found if found is not None else self._current().project_mtime.get(project)

    def project_mtime_if_known(self, project: str) -> int | object | None:
        """From the last scan, no I/O; `NEEDS_IO` when there is none yet, or when it
        does not know ``project`` and is old enough that a thread should scan again."""
        scan = self._scan
        if scan is None:
            return NEEDS_IO
        found = scan.project_mtime.get(project)
        if found is None and time.monotonic() - scan.at > LIST_INTERVAL:
            return NEEDS_IO
        return found

    def sessions_in(self, project: str) -> list[SessionRef]:
        return list(self._current().projects.get(project, ()))

    def listing_of(self, project: str) -> ProjectListing:
        # The scan is this index's own listing cache (a project "mtime" here is its
        # newest file's, from the last scan): nothing to reuse on top of it.
        return ProjectListing(self.sessions_in(project), time.monotonic(), None)

    def subagents_of(self, project: str, stem: str) -> list[SessionRef]:
        return list(self._current().subagents.get((project, stem), ()))

    def may_have_subagents(self, ref: SessionRef) -> bool:
        return (ref.project, ref.stem) in self._known().subagents  # one listing: one scan

    def session_path(self, project: str, stem: str) -> Path:
        # Nodes ask on the event loop, for a session a lookup found (in a thread): the
        # last scan knows it, and one it no longer lists is gone.
        ref = self._known().by_key.get((project, stem))
        return ref.path if ref is not None else self.catalog.root / "(no such session)"

    def ref_of_path(self, path: Path) -> SessionRef | None:
        """The session whose file is ``path`` (None: not one this index lists)."""
        return self._known().by_path.get(path) or self._current().by_path.get(path)

    def session(self, project: str, stem: str) -> SessionRef | None:
        """One session by its mount names: from the last scan when it knows it (a
        ``grep -r`` looks up every session: one scan each would make it quadratic), a
        new scan only for a name it does not know (a session made since)."""
        if not (session_keys.is_valid_name(project) and session_keys.is_valid_stem(stem)):
            return None
        return self._known().by_key.get((project, stem)) or self._current().by_key.get(
            (project, stem)
        )

    def session_if_known(
        self, project: str, stem: str, cached_only: bool = True
    ) -> SessionRef | object | None:
        """From the last scan when it knows the session (no I/O: the event loop asks);
        else `NEEDS_IO` (a thread scans again) or, with ``cached_only`` False, a scan."""
        known = self._scan.by_key.get((project, stem)) if self._scan is not None else None
        if known is None and not cached_only:
            return self.session(project, stem)
        return known if known is not None else NEEDS_IO

    def all_sessions(self) -> list[SessionRef]:
        scan = self._current()
        return [ref for project in sorted(scan.projects) for ref in scan.projects[project]]

    def blob_names(self) -> list[str]:
        return []  # other agents keep images inline: no blob store

    def blob_path(self, sha: str) -> Path | None:
        return None


class _IdMap:
    """``by-id/`` of another agent: its session ids (sub-agents' included) -> sessions;
    a unique prefix of an id or of a file stem resolves too."""

    def __init__(self, index: OtherAgentIndex) -> None:
        self._index = index

    def _named(self) -> list[tuple[str, SessionRef]]:
        rows: dict[str, SessionRef] = {}
        for ref in self._index.every_session():
            name = ref.session_id or ref.name
            if session_keys.is_valid_name(name):
                rows.setdefault(name, ref)
        return sorted(rows.items())

    def listing(self) -> list[tuple[str, SessionRef]]:
        return self._named()

    def resolve_known(self, name: str) -> SessionRef | None:
        return None  # a scan is a thread's job: `resolve` answers

    def resolve(self, name: str) -> SessionRef | None:
        if not name:
            return None
        named = self._named()
        for found, ref in named:
            if found == name:
                return ref
        matches = {
            (ref.project, ref.stem): ref
            for found, ref in named
            if found.startswith(name) or ref.name.startswith(name)
        }
        return next(iter(matches.values())) if len(matches) == 1 else None
