"""The mount's full-text search (``search/<words>``) and ``sessionfs search``: one
`SearchIndex` per agent dir in the cache dir, where its hits point in the mount, and
the indexer's progress as the root ``ctl`` shows it.

Everything here is synchronous and thread-safe: the daemon runs `SearchView.refresh`
in a worker thread from a trio task (``sessionfs.fs.search_indexer``), the command line
calls it directly. It never imports trio or pyfuse3 (``sessionfs search`` must start
fast and work without FUSE).

The index is a cache (see `core.search_index`): a db file deleted or replaced under a
running mount is noticed and the index opened again (rebuilt from the session files);
a cache dir that cannot be written leaves search unavailable with the reason in
``ctl``, and the mount works on without it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from core import paths
from core.errors import NotASessionError
from core.search_index import Hit, SearchIndex, UpdateStats, format_hit
from core.search_index.formats import XCSH, FileFormat
from core.session_stat import session_stat
from sessionfs.view.access import Caller, FileAccess
from sessionfs.view.cache_dir import agent_cache_dir
from sessionfs.view.names import ENTRY_SUFFIX, PATH_NUMBER_RESERVE, encode_name, fit_name
from sessionfs.view.progress_text import eta_text
from sessionfs.view.search_results import RESULT_TTL, ResultCache, TimedLine, newest_lines
from sessionfs.view.session_keys import mount_parts

__all__ = [
    "DB_NAME",
    "DEFAULT_LIMIT",
    "RESULT_TTL",
    "SearchProgress",
    "SearchView",
    "entry_mount_path",
    "search_db_path",
    "search_result",
]

log = logging.getLogger(__name__)

DB_NAME = "search.db"
#: Hits a ``search/<words>`` file shows at most (``sessionfs search --limit`` may ask more).
DEFAULT_LIMIT = 100
# The first build indexes files in slices this big, so ``ctl`` shows progress and what
# is indexed so far is searchable at once.
_SLICE_BYTES = 16 * 1024 * 1024
_SLICE_FILES = 200
_MB = 1024 * 1024


def search_db_path(cache_dir: Path, agent_dir: Path) -> Path:
    """The agent dir's search index in ``cache_dir`` (never under the agent dir)."""
    return agent_cache_dir(cache_dir, agent_dir) / DB_NAME


def entry_mount_path(hit: Hit) -> str:
    """The hit's entry file, relative to the mount root:
    ``sessions/<project>/<stem>/entries/<id>.json``, a ``subagents/<task>`` pair per
    sub-agent level; the entry's file name encoded as ``entries/`` lists it."""
    name = fit_name(encode_name(hit.entry_id), ENTRY_SUFFIX, PATH_NUMBER_RESERVE) + ENTRY_SUFFIX
    return "/".join((*mount_parts(hit.project, hit.stem), "entries", name))


@dataclass
class SearchProgress:
    """What the indexer has done, as the root ``ctl`` shows it."""

    state: str = "building"  # building | ready | unavailable
    files_indexed: int = 0
    files_total: int = 0
    bytes_indexed: int = 0
    bytes_total: int = 0
    reason: str | None = None  # why unavailable
    #: the last trouble of an update (skipped files, a busy database), after the time
    #: it first happened (`trouble`)
    last_error: str | None = None
    #: whether ``last_error`` is over once a full pass gets through (`passed`): a pass
    #: that failed, or stores that could not be listed; not a skipped file, which the
    #: index may not look at again until it changes (a corrupt archive)
    error_clears: bool = False
    #: when the first build started (``time.monotonic()``; None: not started)
    started: float | None = None

    def trouble(self, text: str, clears: bool) -> None:
        """An update's trouble, after the time (UTC) it first happened: the same
        trouble pass after pass (a database locked for minutes) keeps its first time."""
        if self.last_error is not None and self.last_error.partition(": ")[2] == text:
            return
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.last_error, self.error_clears = f"{when}: {text}", clears

    def passed(self) -> None:
        """A full pass got through without trouble: a failed pass's error is over."""
        if self.error_clears:
            self.last_error, self.error_clears = None, False

    def building_text(self) -> str:
        """``building 412/1000 sessions (41%), ~12 s left``: the time left is worked
        out from the bytes indexed so far (files differ in size far more than bytes
        differ in cost)."""
        if self.started is None:
            return "building, starting"  # waiting for a quiet moment (at most a second)
        done, total = self.files_indexed, self.files_total
        percent = 100 * done // total if total else 0
        text = f"building {done}/{total} sessions ({percent}%)"
        elapsed = time.monotonic() - self.started if self.started is not None else 0.0
        left = eta_text(elapsed, self.bytes_indexed, self.bytes_total)
        return f"{text}, {left}" if left else text

    def ctl_items(self, name: str = "search") -> list[tuple[str, object]]:
        """``name: <state>`` and ``name_last_error: <trouble>`` (another agent's or
        machine's index: ``search_<agent>``)."""
        if self.state == "building":
            summary = self.building_text()
        elif self.state == "ready":
            summary = f"ready, {self.files_total} files, {self.bytes_total / _MB:.1f} MB"
        else:
            summary = f"unavailable: {self.reason}"
        return [(name, summary), (f"{name}_last_error", self.last_error)]


class SearchView:
    """The search index of one agent dir, its indexer's progress, recent results."""

    def __init__(
        self,
        cache_dir: Path,
        agent_dir: Path,
        sessions_root: Path | None = None,
        file_format: FileFormat = XCSH,
        entry_path: Callable[[Hit], str | None] = entry_mount_path,
        prepare_entry_paths: Callable[[], object] | None = None,
    ) -> None:
        self.db_path = search_db_path(cache_dir, agent_dir)
        self.sessions_root = sessions_root or paths.sessions_root(agent_dir)
        #: what the files under ``sessions_root`` are (another agent's: `CLAUDE`, ...)
        self.file_format = file_format
        #: a hit's entry path in the mount (another agent's: below ``agents/<agent>/``)
        self.entry_path = entry_path
        #: run once after the first build, in the indexer's thread: what ``entry_path``
        #: needs (another agent's listing of its session files), so the first search
        #: does not wait for it
        self.prepare_entry_paths = prepare_entry_paths
        self.progress = SearchProgress()
        #: called by the index between rows while it indexes (in the updating thread):
        #: the daemon's indexer pauses there while requests are served
        self.between_rows: Callable[[], None] | None = None
        self._lock = threading.Lock()  # the index object
        #: counts the updates that indexed something: a result rendered before is stale
        self.generation = 0
        self._index = self._open()
        self._built = False

    # -- the index file -----------------------------------------------------------------

    def _open(self) -> SearchIndex:
        index = SearchIndex(self.db_path, file_format=self.file_format)
        index.between_rows = self._between_rows
        self._db_identity = _identity(self.db_path)
        return index

    def _between_rows(self) -> None:
        if self.between_rows is not None:
            self.between_rows()

    def wants_full_pass(self) -> bool:
        """Whether the next update must look at every file, not only changed ones: the
        index is not built (or its build failed), or its file was deleted or replaced
        (one stat: cheap enough for the event loop)."""
        return not self._built or _identity(self.db_path) != self._db_identity

    def _reopen_if_replaced(self) -> None:
        """A db file deleted or replaced behind our back (``rm -r`` of the cache dir):
        open (and so rebuild) it again rather than keep writing an unlinked inode."""
        now = _identity(self.db_path)
        if now == self._db_identity:
            return
        if self._db_identity is None:
            # Created since (the index retries an unwritable cache dir on each update).
            self._db_identity = now
            return
        self.progress.state = "building"  # before the new file shows up
        with self._lock:
            old, self._index = self._index, self._open()
            self.generation += 1
        old.close()
        self._built = False
        log.info("search index %s was replaced or deleted: rebuilding", self.db_path)

    def close(self) -> None:
        with self._lock:
            self._index.close()

    # -- updating -----------------------------------------------------------------------

    def refresh(self, changed: Sequence[str] | None = None) -> UpdateStats:
        """Bring the index up to date (blocking: run it in a worker thread). The first
        time, a full build in slices with progress; then ``changed`` files only, or
        every file's stat when ``changed`` is None."""
        self._reopen_if_replaced()
        if not self._built:
            stats = self._build()
        else:
            stats = self._index.update(self.sessions_root, changed or None)
            if stats.files_indexed or stats.files_appended or stats.files_removed:
                self._count_files()
        self._note(stats, full=not changed)
        return stats

    def first_build_pending(self) -> bool:
        """Whether the index holds no session yet (a first build is ahead: `refresh`
        makes it in slices, with progress): no index file, or one that counts none."""
        if not self.db_path.exists():
            return True
        totals = self._index.file_totals()
        return totals is not None and totals[0] == 0

    def catch_up(self) -> UpdateStats:
        """One incremental update of every file, without progress slices: for a caller
        that only wants the answer afterwards (``sessionfs search``)."""
        self._reopen_if_replaced()
        stats = self._index.update(self.sessions_root)
        self._built = stats.error is None
        self._note(stats, full=True)
        return stats

    def _build(self) -> UpdateStats:
        """Index every session file, newest first (what people search for is mostly
        recent), a slice at a time so searches see the indexed part meanwhile."""
        try:
            files = _session_files_newest_first(self.sessions_root, self.file_format)
        except NotASessionError as exc:  # an agent's database cannot be listed now
            return UpdateStats(error=str(exc))
        progress = self.progress
        progress.state = "building"
        progress.started = time.monotonic()
        progress.files_total = len(files)
        progress.bytes_total = sum(size for _, size in files)
        progress.files_indexed = progress.bytes_indexed = 0
        for batch in _slices(files):
            # The term list is read from the index once, by the full pass below.
            batch_paths = [path for path, _ in batch]
            stats = self._index.update(self.sessions_root, batch_paths, defer_terms=True)
            if stats.error is not None:
                return stats
            self._note(stats)
            progress.files_indexed += len(batch)
            progress.bytes_indexed += sum(size for _, size in batch)
        # The full pass drops what vanished meanwhile and catches files made since.
        stats = self._index.update(self.sessions_root)
        if stats.error is None:
            self._built = True
            self._index.fold_log()  # many slices: the log grew past the index's own share
            self._count_files()
            if self.prepare_entry_paths is not None:
                self.prepare_entry_paths()
        return stats

    def _count_files(self) -> None:
        """The ``ready, N files, X MB`` of ``ctl``, from the index's own rows: after an
        append, a stat of every session file (in a thread beside the requests) would
        cost as much as a full pass."""
        totals = self._index.file_totals()
        if totals is None:
            return
        files, size = totals
        self.progress.files_total = self.progress.files_indexed = files
        self.progress.bytes_total = self.progress.bytes_indexed = size

    def _note(self, stats: UpdateStats, full: bool = False) -> None:
        """The state and trouble ``ctl`` shows after an update (``full``: of every
        file)."""
        progress = self.progress
        if not self._index.available:
            progress.state = "unavailable"
            progress.reason = self._index.unavailable_reason
        elif self._built:
            progress.state, progress.reason = "ready", None
        elif progress.state == "unavailable":
            progress.state, progress.reason = "building", None
        if stats.error is not None:
            progress.trouble(stats.error, clears=True)
        elif stats.unlisted:
            unlisted = "; ".join(stats.unlisted)
            progress.trouble(f"not listed now, its sessions kept: {unlisted}", clears=True)
        elif stats.skipped:
            skipped = f"{len(stats.skipped)} file(s) skipped: {stats.skipped[0]}"
            progress.trouble(skipped, clears=False)
        elif full:
            progress.passed()
        if stats.files_indexed or stats.files_appended or stats.files_removed:
            self.generation += 1  # new hits must not wait for the TTL

    # -- searching ----------------------------------------------------------------------

    def search(
        self, query: str, limit: int = DEFAULT_LIMIT, caller: Caller | None = None
    ) -> list[Hit]:
        """The hits; with ``caller``, only those in session files it may read."""
        with self._lock:
            index = self._index
        visible = None if caller is None else self._readable_by(caller)
        return index.search(query, limit, visible)

    def _readable_by(self, caller: Caller) -> Callable[[bytes], bool]:
        """Whether ``caller`` may read a session file (its path below the sessions
        root), as the kernel would decide on disk: one stat per file and search. A
        sub-agent's session (``<project>/<stem>/<task>.jsonl``) also needs the session
        that ran it readable, as its dir in the mount lies inside that session's."""
        root = os.fspath(self.sessions_root)
        seen: dict[bytes, bool] = {}

        def readable(key: bytes) -> bool:
            known = seen.get(key)
            if known is None:
                parent = self.file_format.parent_key(key)  # a sub-agent's session
                if parent is not None and not readable(parent):
                    known = False
                else:
                    try:
                        path = os.path.join(root, os.fsdecode(key))  # a row session's: its db's
                        known = caller.may_read(FileAccess.of(session_stat(path)))
                    except OSError:
                        known = False  # gone: nothing of it is shown
                seen[key] = known
            return known

        return readable

    @contextlib.contextmanager
    def hit_lines(
        self, query: str, caller: Caller | None = None, batch: int = DEFAULT_LIMIT
    ) -> Iterator[Iterator[TimedLine]]:
        """The hits' lines of ``search/<query>``, newest first, each made when it is
        asked for (see `SearchIndex.stream`); a hit in no session the mount shows is
        left out."""
        with self._lock:
            index = self._index
        visible = None if caller is None else self._readable_by(caller)
        with index.stream(query, visible, batch=batch) as hits:
            yield self._lines(hits)

    def _lines(self, hits: Iterator[Hit]) -> Iterator[TimedLine]:
        for hit in hits:
            path = self.entry_path(hit)
            if path is not None:
                # "replace": an id or text with a lone surrogate (odd JSON escapes)
                # stays one line.
                yield hit.timestamp_ms, (format_hit(hit, path) + "\n").encode("utf-8", "replace")

    def result(self, query: str, caller: Caller | None = None, limit: int = DEFAULT_LIMIT) -> bytes:
        """The content of ``search/<query>`` from this index alone (`search_result`)."""
        return search_result((self,), query, caller, limit)


_RESULTS = ResultCache()


def search_result(
    views: Sequence[SearchView],
    query: str,
    caller: Caller | None = None,
    limit: int = DEFAULT_LIMIT,
) -> bytes:
    """The content of ``search/<query>`` over ``views`` (the agent dir's index and each
    other agent's): one line per hit, the ``limit`` newest of all, newest first; for
    ``caller``, only what it may read (the command line passes none). Reused for
    `RESULT_TTL` seconds unless an index changed, so the ``stat`` and the ``read`` of
    one ``cat`` agree (blocking: a worker thread)."""
    key = (tuple(views), query, limit, caller)
    generation = tuple(view.generation for view in views)
    cached = _RESULTS.get(key, generation)
    if cached is not None:
        return cached
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        streams = [stack.enter_context(view.hit_lines(query, caller, limit)) for view in views]
        text = newest_lines(streams, limit)
    _RESULTS.put(key, generation, text, started)
    return text


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _session_files_newest_first(root: Path, file_format: FileFormat) -> list[tuple[str, int]]:
    """(path, size) of every session file under ``root``, newest mtime first."""
    found = []
    for parts in file_format.file_keys(str(root)):
        path = os.path.join(root, *parts)
        try:
            st = session_stat(path)
        except OSError:
            continue
        found.append((st.st_mtime_ns, path, st.st_size))
    found.sort(reverse=True)
    return [(path, size) for _, path, size in found]


def _slices(files: Sequence[tuple[str, int]]) -> Iterable[Sequence[tuple[str, int]]]:
    start = 0
    while start < len(files):
        end, size = start, 0
        while end < len(files) and end - start < _SLICE_FILES and size < _SLICE_BYTES:
            size += files[end][1]
            end += 1
        yield files[start:end]
        start = end
