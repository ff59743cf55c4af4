"""The session files on disk, as listings see them: ``AgentIndex``.

Listing reads the first 4 KiB of files it has not seen (the header is all a listing
needs; the stat comes with the read, and many files are read at once: `head_reads`)
and one stat of each other file; headers are cached per inode, so an append never
causes a re-read and a rewrite (new inode) does. Synchronous and thread-safe: the cache and
the nodes call it from worker threads (or inline, when it is one stat).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from core import jsonl, paths
from core.title_slot import TITLE_SLOT_BYTES, fold_title_slot, read_title_slot, split_title_slot
from sessionfs.view import head_reads, session_keys
from sessionfs.view.session_ids import RACY_NS, IdLookup, SessionIdIndex
from sessionfs.view.session_ref import SessionRef

log = logging.getLogger(__name__)

#: Header prefix read by listings (the spec's "first 4 KiB").
HEADER_PREFIX = 4096
#: Headers remembered by `AgentIndex` (LRU): enough for every session of a heavy
#: user's agent dir to list from memory, bounded so a huge dir cannot grow it for ever
#: (~0.7 kB each: at most ~22 MB). Listing more sessions than this re-reads every
#: header at every listing (an LRU walked in order always misses): 8,192 made a warm
#: `ls` of 10,000 sessions read 10,000 headers again.
HEADER_CACHE_SIZE = 32768
#: Paths already logged as skipped (so a hostile file is logged once, not per listing).
SKIP_LOG_SIZE = 1024


#: ``AgentIndex.session_if_known``: the header has to be read first (a thread's job).
NEEDS_IO = object()


def read_header(path: Path, prefix: int = HEADER_PREFIX) -> dict[str, Any] | None:
    """The header of a session file from its first ``prefix`` bytes, else ``None``.

    Like the loader: lines that are not JSON objects are skipped, and the first object
    must be a header (after omp 18's title slot, whose title it takes). Only complete
    lines count, unless the file ends inside the prefix.
    """
    # A FIFO or a directory named *.jsonl raises, never blocks.
    return header_of(head_reads.read_head(path, prefix)[1], prefix, path)


def header_of(data: bytes, prefix: int, path: Path) -> dict[str, Any] | None:
    """`read_header` of a file whose first ``prefix`` bytes (all of it when shorter)
    are ``data``; a header line longer than that is read again, a little further."""
    at_eof = len(data) < prefix
    if not at_eof and b"\n" not in data[split_title_slot(data)[1] :]:
        data = head_reads.read_head(path, 17 * prefix)[1]  # a very long header line
        at_eof = len(data) < 17 * prefix
    usable = data if at_eof else data[: jsonl.complete_prefix_length(data)]
    objects = jsonl.parse_session_lenient(usable)
    if objects and jsonl.is_header(objects[0]):
        return objects[0]
    return None


def has_title_slot(data: bytes) -> bool:
    """Whether a file whose first bytes are ``data`` starts with a title slot."""
    return split_title_slot(data[:TITLE_SLOT_BYTES])[0] is not None


#: A listing's cached header: (inode, size seen, mtime seen, header or None when the
#: file is not a session, the file starts with a title slot).
_CachedHeader = tuple[int, int, int, dict[str, Any] | None, bool]


def _retitled(path: Path, header: dict[str, Any]) -> dict[str, Any]:
    """``header`` with the title of the slot the file starts with now."""
    try:
        slot = read_title_slot(path)
    except OSError:
        return header
    return fold_title_slot(dict(header), slot)


@dataclass(frozen=True)
class ProjectListing:
    """One listing of a project dir (`AgentIndex.listing_of`)."""

    refs: list[SessionRef]
    #: ``time.monotonic()`` when it was started: the refs' stats are no older
    listed_at: float
    #: the dir's mtime when listed, None when it may change again unseen (racy)
    settled_mtime_ns: int | None
    #: the names of the real dirs in the project dir when listed (the sessions'
    #: artifacts dirs; making or removing one moves the dir's mtime, so a reused
    #: listing keeps them right); None: not known, ask `may_have_subagents`
    dirs: frozenset[str] | None = None
    #: the stems whose session file is a symlink (the listing tells, no stat): a
    #: change of its target raises no event in the project dir
    links: frozenset[str] = frozenset()

    @cached_property
    def paths(self) -> list[Path]:
        """The refs' session files, in order: made once per listing (a reused listing
        is handed to every warm ``grep -r`` of its dir)."""
        return [ref.path for ref in self.refs]

    @cached_property
    def has_session_dirs(self) -> bool | None:
        """Whether a session of the listing has a real dir beside its file (its
        artifacts dir, where sub-agents' sessions are), None when ``dirs`` is not known."""
        if self.dirs is None:
            return None
        return any(ref.stem in self.dirs for ref in self.refs)


class AgentIndex:
    """Projects and session files under ``<agent>/sessions`` (thread-safe, sync)."""

    #: Whether `session_path` follows from the names alone, so that a node may keep it
    #: (`RenderedFile.session_file`): not for an index that finds its sessions its own
    #: way (another agent's). Every subclass declares it in its own body
    #: (`__init_subclass__`): an inherited True would let a node keep a path that moved.
    session_paths_fixed: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "session_paths_fixed" not in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} must declare session_paths_fixed: whether its "
                "session_path follows from a session's names alone"
            )

    def __init__(self, agent_dir: Path) -> None:
        self.agent_dir = agent_dir
        self.sessions_root = paths.sessions_root(agent_dir)
        self.blobs_dir = paths.blobs_dir(agent_dir)
        # path -> (inode, size seen, mtime seen, header or None when the file is not a
        # session); LRU
        self._headers: OrderedDict[Path, _CachedHeader] = OrderedDict()
        self._skipped: OrderedDict[Path, None] = OrderedDict()  # logged once each (LRU)
        #: session id -> session, kept current by dir mtimes (``by-id/``)
        self.ids: IdLookup = SessionIdIndex(self)
        # project -> its last listing, reused while the dir's mtime stays (`listing_of`)
        self._listings: dict[str, ProjectListing] = {}
        # (the sessions root's settled mtime, its projects) when last listed
        # (`listed_projects`), reused while that mtime stays (`reused_projects`)
        self._projects_listing: tuple[int, tuple[str, ...]] | None = None
        # the sessions root and its path as a string (`project_mtime_ns`, per request)
        self._root_as_str: tuple[Path | None, str] = (None, "")

    def projects(self) -> list[str]:
        try:
            with os.scandir(self.sessions_root) as it:
                return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def listed_projects(self) -> tuple[str, ...]:
        """`projects`, remembered for `reused_projects` when the sessions root's mtime
        is settled (older than `RACY_NS` when listed: a later change moves it)."""
        started_ns = time.time_ns()
        mtime = self._sessions_root_mtime_ns()
        projects = tuple(self.projects())
        settled = mtime is not None and mtime < started_ns - RACY_NS
        self._projects_listing = (mtime, projects) if settled and mtime is not None else None
        return projects

    def reused_projects(self) -> tuple[str, ...] | None:
        """`projects` as `listed_projects` found them, while the sessions root's mtime
        stays where it was (a project made, renamed or removed moves it): one stat,
        cheap enough for the event loop (a warm ``grep -r transcripts/`` lists the
        root every time). None: list again. Only where the projects are the root's
        dirs: an index that lists them its own way (another agent's, one merging an
        archive) always lists again. The very tuple `listed_projects` returned, so the
        dirs' nodes made from it are reused too (`MountContext.children_of_listing`)."""
        listing = self._projects_listing
        if listing is None or type(self).projects is not AgentIndex.projects:
            return None
        mtime, projects = listing
        return projects if self._sessions_root_mtime_ns() == mtime else None

    def _sessions_root_mtime_ns(self) -> int | None:
        try:
            return os.stat(self.sessions_root).st_mtime_ns
        except OSError:
            return None

    def project_mtime_ns(self, project: str) -> int | None:
        if "/" in project or project in (".", ".."):
            return None
        root = self.sessions_root
        if root is not self._root_as_str[0]:  # (a subclass may set another root)
            self._root_as_str = (root, os.fspath(root))
        try:  # a string: a Path made (or joined) per call costs as much as the stat
            st = os.stat(f"{self._root_as_str[1]}/{project}")
        except OSError:
            return None
        return st.st_mtime_ns if stat.S_ISDIR(st.st_mode) else None

    def project_mtime_if_known(self, project: str) -> int | object | None:
        """`project_mtime_ns` for the event loop: here one stat; an index whose answer
        may need a scan returns `NEEDS_IO` instead (a thread asks `project_mtime_ns`)."""
        return self.project_mtime_ns(project)

    def _ref(
        self, project: str, stem: str, path: Path, st: os.stat_result, cached_only: bool = False
    ) -> SessionRef | object | None:
        cached = self._headers.get(path)
        # Appends keep the inode and only grow the file; a rewrite is a new inode.
        if cached is None or cached[0] != st.st_ino or st.st_size < cached[1]:
            if cached_only:
                return NEEDS_IO
            try:
                head = head_reads.read_head(path, HEADER_PREFIX)
            except OSError as exc:
                self.skip(path, exc)
                return None
            return self._ref_from_head(project, stem, path, head)
        header: dict[str, Any] | None = cached[3]
        if cached[4] and header is not None and cached[2] != st.st_mtime_ns:
            # omp renames by rewriting the title slot in place: read the slot again.
            if cached_only:
                return NEEDS_IO
            header = _retitled(path, header)
            self._remember_header(path, (st.st_ino, st.st_size, st.st_mtime_ns, header, True))
        else:
            self._headers.move_to_end(path)
        return None if header is None else _session_ref(project, stem, path, st, header)

    def _ref_from_head(
        self, project: str, stem: str, path: Path, head: head_reads.Head
    ) -> SessionRef | None:
        """The session a file whose stat and first bytes are ``head`` holds (if any),
        its header remembered for the next listing."""
        st, data = head
        try:
            header = header_of(data, HEADER_PREFIX, path)
        except OSError as exc:
            self.skip(path, exc)
            return None
        if header is None:
            self.skip(path, "no session header in its first line")
        slotted = header is not None and has_title_slot(data)
        self._remember_header(path, (st.st_ino, st.st_size, st.st_mtime_ns, header, slotted))
        return None if header is None else _session_ref(project, stem, path, st, header)

    def _remember_header(self, path: Path, row: _CachedHeader) -> None:
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

    def shadowed(self, ref: SessionRef) -> bool:
        """Whether ``ref`` is no longer the session this index gives for its name:
        never here (`ArchivedAgentIndex`: an archived session whose live file is back)."""
        return False

    def is_archived(self, ref: SessionRef) -> bool:
        """Whether ``ref``'s file is an archive's copy, which no write may change
        (`ArchivedAgentIndex`)."""
        return False

    def session_path(self, project: str, stem: str) -> Path:
        """The file of the session ``(project, stem)`` (whether or not it exists)."""
        return session_keys.session_file(self.sessions_root, project, stem)

    def may_have_subagents(self, ref: SessionRef) -> bool:
        """One stat: False when the session surely has no sub-agent sessions (no
        artifacts dir), True when `subagents_of` has to look."""
        return os.path.isdir(session_keys.artifacts_dir(self.sessions_root, ref.project, ref.stem))

    def sessions_in(self, project: str) -> list[SessionRef]:
        """Valid sessions of one project, by file name (= creation time) order. Only
        the project dir's own files: sub-agent sessions are in artifacts dirs."""
        if not session_keys.is_valid_name(project):
            return []
        return self._sessions_of_dir(project, None, self.sessions_root / project)

    def listing_of(self, project: str) -> ProjectListing:
        """`sessions_in` for a directory listing, reused while the project dir's mtime
        stays where it was (files created, renamed or deleted move it; appends do
        not), so a warm ``ls`` of 10,000 sessions stats none of them. The refs' sizes,
        mtimes and modes are as of ``listed_at``: a listing older than a moment must
        not be cached as attributes (see ``SessionDir.listing_stat``). A dir modified
        within `RACY_NS` of the listing is listed again (its mtime may not move on a
        second change)."""
        if not session_keys.is_valid_name(project):
            return ProjectListing([], time.monotonic(), None)
        mtime = self.project_mtime_ns(project)
        cached = self._reusable(project, mtime)
        if cached is not None:
            return cached
        started_ns, started = time.time_ns(), time.monotonic()
        dirs: set[str] = set()
        links: set[str] = set()
        listing = ProjectListing(
            self._sessions_of_dir(project, None, self.sessions_root / project, dirs, links),
            started,
            mtime if mtime is not None and mtime < started_ns - RACY_NS else None,
            frozenset(dirs),
            frozenset(links),
        )
        if mtime is None:
            self._listings.pop(project, None)
        else:
            self._listings[project] = listing
        return listing

    def reused_listing(self, project: str) -> ProjectListing | None:
        """`listing_of` when it would reuse the last listing (one stat, no listing: cheap
        enough for the event loop), else None."""
        if not session_keys.is_valid_name(project):
            return None
        return self._reusable(project, self.project_mtime_ns(project))

    def _reusable(self, project: str, mtime: int | None) -> ProjectListing | None:
        cached = self._listings.get(project)
        if cached is not None and mtime is not None and cached.settled_mtime_ns == mtime:
            return cached
        return None

    def subagents_of(self, project: str, stem: str) -> list[SessionRef]:
        """Valid sub-agent sessions of one session: the ``*.jsonl`` files with a header
        in its artifacts dir (tool outputs and header-less files left out)."""
        if not (session_keys.is_valid_name(project) and session_keys.is_valid_stem(stem)):
            return []
        if stem.count("/") + 1 >= session_keys.MAX_STEM_PARTS:
            return []  # deeper than any agent nests: not followed
        directory = session_keys.artifacts_dir(self.sessions_root, project, stem)
        if os.path.islink(directory):
            return []  # an artifacts dir is a real dir: a link could lead anywhere
        return self._sessions_of_dir(project, stem, directory)

    def _sessions_of_dir(
        self,
        project: str,
        parent_stem: str | None,
        directory: Path,
        dirs: set[str] | None = None,
        links: set[str] | None = None,
    ) -> list[SessionRef]:
        """The sessions of one dir; the names of the real dirs in it are added to
        ``dirs``, the stems of the symlinks among its files to ``links``, when given
        (the same listing: no stat)."""
        try:
            with os.scandir(directory) as it:
                entries = list(it)
            files = sorted((e for e in entries if _is_session_name(e.name)), key=lambda e: e.name)
            if dirs is not None:
                dirs.update(e.name for e in entries if _is_dir_entry(e))
            if links is not None:
                links.update(e.name[: -len(".jsonl")] for e in files if _is_link_entry(e))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:  # unreadable dir: that one listing is empty, logged once
            self.skip(directory, exc)
            return []
        paths = [Path(item.path) for item in files]
        # Files not seen before are read in one batch (their stat comes with the read);
        # the rest cost a stat each, and a read only if they were rewritten.
        unseen = [
            item.path
            for item, path in zip(files, paths, strict=True)
            if path not in self._headers and _is_file_entry(item, follow_symlinks=False)
        ]
        heads = dict(zip(unseen, head_reads.read_heads(unseen, HEADER_PREFIX), strict=True))
        refs = []
        for item, path in zip(files, paths, strict=True):
            name = item.name[: -len(".jsonl")]
            stem = name if parent_stem is None else session_keys.child_stem(parent_stem, name)
            head = heads.get(item.path)
            ref: SessionRef | object | None
            if isinstance(head, tuple):
                ref = self._ref_from_head(project, stem, path, head)
            else:  # known, not a plain file, or its quick read failed: as for one file
                st = self._regular_stat(item)
                ref = None if st is None else self._ref(project, stem, path, st)
            if isinstance(ref, SessionRef):
                refs.append(ref)
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
        if not (session_keys.is_valid_name(project) and session_keys.is_valid_stem(stem)):
            return None
        path = session_keys.session_file(self.sessions_root, project, stem)
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return self._ref(project, stem, path, st, cached_only)

    def all_sessions(self) -> list[SessionRef]:
        """Every project's own sessions (no sub-agent sessions: see ``every_session``)."""
        return [ref for project in self.projects() for ref in self.sessions_in(project)]

    def every_session(self) -> list[SessionRef]:
        """Every session, sub-agent sessions (at every level) after their parent."""
        found: list[SessionRef] = []
        for ref in self.all_sessions():
            self._with_subagents(ref, found)
        return found

    def _with_subagents(self, ref: SessionRef, found: list[SessionRef]) -> None:
        found.append(ref)
        if not self.may_have_subagents(ref):
            return  # most sessions have no artifacts dir: one stat, no listing
        for child in self.subagents_of(ref.project, ref.stem):
            self._with_subagents(child, found)

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


def _session_ref(
    project: str, stem: str, path: Path, st: os.stat_result, header: dict[str, Any]
) -> SessionRef:
    return SessionRef(
        project,
        stem,
        path,
        header,
        st.st_mtime_ns,
        st.st_size,
        stat.S_IMODE(st.st_mode),
        st.st_uid,
        st.st_gid,
    )


def _is_session_name(name: str) -> bool:
    """``<name>.jsonl`` with a valid name (a file named just ``.jsonl`` names none)."""
    return name.endswith(".jsonl") and session_keys.is_valid_name(name[: -len(".jsonl")])


def _is_dir_entry(entry: os.DirEntry[str]) -> bool:
    """A real dir (not a symlink to one), from the listing's file type when it has one."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _is_link_entry(entry: os.DirEntry[str]) -> bool:
    """A symlink, from the listing's file type when it has one; True when that cannot
    be told (a file not known to be its own is treated as one that may not be)."""
    try:
        return entry.is_symlink()
    except OSError:
        return True


def _is_file_entry(entry: os.DirEntry[str], follow_symlinks: bool = True) -> bool:
    """``DirEntry.is_file`` that answers False for a symlink loop instead of raising
    (one bad name must not fail a whole listing)."""
    try:
        return entry.is_file(follow_symlinks=follow_symlinks)
    except OSError:
        return False


def _is_sha(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)
