"""Watch the agent dir's project dirs with inotify, so the kernel may keep the names
and attributes of ``transcripts/<project>/<stem>.md`` and ``sessions/<project>/<stem>/``
for long and drop them the moment the session file changes.

Without it every file of a warm ``grep -r transcripts/`` (every session dir of a warm
``ls -l sessions/<project>/``) costs a lookup and a getattr round trip, because the
kernel may trust what it was told for a second at most. With it the kernel keeps both
(`WATCHED`), and an append, a chmod, a rename or a delete of the session file is
followed at once by an invalidation of what the kernel holds.

One watch on ``<agent>/sessions`` (projects made, renamed, removed) and one per project
dir (its session files). When inotify is missing, the watch limit is reached or a
project dir cannot be watched, the project is simply not `covered` and its nodes keep
the short timeouts. Sub-agent sessions (in artifacts dirs), what is inside a session
dir, ``agents/`` and store mounts are not watched: they keep the short timeouts too. A
session file that is a symlink, or that is written through a hard link outside its
project dir, raises no event here: the nodes' ``kernel_tier`` gives those the short
timeouts as well (a symlink), or they show within the short timeouts of the next
access after an event (hard links; agents do not make them).

Besides dropping, the watch remembers when it last saw each session file change
(`unchanged_since`): a stat of the file taken after that is still the file as it is,
so a session dir answers from its listing's stat without a look at the file.

Invalidating is the `Invalidator` thread's job (pyfuse3's calls may block on the
kernel); this module only decides what to drop. Each change is dropped twice: at
once, and again `REPEAT_AFTER` seconds later, because a lookup or getattr that read
the file just before the change may be answered just after the first drop and would
then be cached for long.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from sessionfs.fs.foreground import Foreground
from sessionfs.fs.inotify import (
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DONT_FOLLOW,
    IN_IGNORED,
    IN_ISDIR,
    IN_MODIFY,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    Event,
    Inotify,
)
from sessionfs.fs.nodes.session import project_key
from sessionfs.fs.nodes.transcripts import transcript_key, transcripts_key
from sessionfs.fs.session_mtimes import SessionMtimes
from sessionfs.view import session_keys
from sessionfs.view.render_cache import TRANSCRIPT as TRANSCRIPT_NAME

__all__ = [
    "CHANGES_KEPT",
    "GATHER_SECONDS",
    "GATHER_WHILE_WRITING",
    "REPEAT_AFTER",
    "ChangeSink",
    "SessionFileListener",
    "SessionWatch",
]

log = logging.getLogger(__name__)

#: seconds after a change when what it affects is dropped once more (see above)
REPEAT_AFTER = 1.0
#: Seconds between two reads of the events: the first change after a quiet moment is
#: handled at once, and a burst of them (an agent streaming, a script filling
#: ``append/``) gathers for this long, so it costs one wake-up and one drop per file
#: every so often instead of one per append, each competing with the mount's requests
#: for the event loop. Far below what a reader notices.
GATHER_SECONDS = 0.02
#: The same while the mount itself takes writes (`Foreground.writing`; a script filling
#: ``append/`` raises two events per file here). Most of what those events ask is done
#: already: the write dropped what the kernel held of its session's files at once
#: (`SessionFsOperations.session_changed`) and woke the search indexer; what waits for
#: the watch is the session dir's new mtime, and any change another process makes
#: meanwhile (seen up to this late while the mount is written through). Each wake-up
#: of the watch costs the daemon a few hundred µs of CPU (reading and handling the
#: events, the drops, the session dir's getattr and stat that follow): with
#: `bench/bench_append_requests.py`'s appends 0.19 wake-ups a file at `GATHER_SECONDS`,
#: 0.035 at this, 50-150 µs less daemon CPU a file (issue 26 point 7).
GATHER_WHILE_WRITING = 0.1

#: The most session files whose last change the watch remembers (`unchanged_since`):
#: past it, everything remembered is forgotten at once and older stats are no longer
#: vouched for (a session dir then asks its file again), so a daemon that lives
#: through years of sessions made and removed keeps no trace of each.
CHANGES_KEPT = 50_000

_ROOT_MASK = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW
_PROJECT_MASK = (
    IN_MODIFY
    | IN_CLOSE_WRITE
    | IN_ATTRIB
    | IN_CREATE
    | IN_DELETE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
)
#: events that change which names a project dir holds (else only a file's content/mode)
_NAMESPACE = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
_SESSION_SUFFIX = ".jsonl"


class ChangeSink(Protocol):
    """What the watch tells (`SessionFsOperations`): mount keys whose kernel copies
    are stale."""

    def key_changed(self, key: tuple[str, ...], name_too: bool) -> None:
        """Drop the attributes and pages of ``key`` (and its name when ``name_too``)."""

    def subtree_changed(
        self, prefix: tuple[str, ...], keep_name: Callable[[str], bool] | None = None
    ) -> None:
        """Drop everything the kernel holds below ``prefix``; the names directly below
        it for which ``keep_name`` is True keep their names (attributes and pages go)."""


class SessionFileListener(Protocol):
    """Who else wants to know (the search indexer): which session files changed."""

    def session_file_changed(self, project: str, stem: str) -> None:
        """``<project>/<stem>.jsonl`` was appended to, made, replaced, chmodded or removed."""

    def sessions_moved(self) -> None:
        """More than single files changed: a project dir came or went, or events
        were lost (the listener must look at everything again)."""


class SessionWatch:
    """The inotify watches of one agent dir's sessions root and its project dirs."""

    def __init__(
        self, sessions_root: Path, sink: ChangeSink, foreground: Foreground | None = None
    ) -> None:
        self.sessions_root = sessions_root
        self.sink = sink
        #: the mount's requests: while it takes writes, events gather longer
        #: (`GATHER_WHILE_WRITING`); None: never
        self.foreground = foreground
        self.listeners: list[SessionFileListener] = []
        self._inotify: Inotify | None = None
        self._root_wd: int | None = None
        self._projects: dict[str, int] = {}  # project -> wd
        self._by_wd: dict[int, str] = {}  # wd -> project
        self._unwatched: set[str] = set()  # project dirs whose watch failed
        #: project -> ``time.monotonic()`` since when every change in it is known
        #: (its watch started, or events were lost last)
        self._known_since: dict[str, float] = {}
        #: (project, stem) -> ``time.monotonic()`` when a change of its file was last
        #: read (an upper bound of when it happened: the event came after it)
        self._changed_at: dict[tuple[str, str], float] = {}
        #: every watched session file's mtime, for ``recent/``
        self.mtimes = SessionMtimes(sessions_root)
        #: session files changed in the events read last, (project, stem) -> whether
        #: the name changed (a burst of appends: one drop per file)
        self._batch: dict[tuple[str, str], bool] = {}
        #: changes to drop again: key -> (whether its name changed, when); in time order
        self._repeat: dict[tuple[str, ...], tuple[bool, float]] = {}

    def covers(self, project: str) -> bool:
        """Whether changes to ``project``'s session files are seen as they happen."""
        return project in self._projects

    def unchanged_since(self, project: str, stem: str, since: float) -> bool:
        """Whether ``<project>/<stem>.jsonl`` surely did not change after the moment
        ``since`` (``time.monotonic()``): its project was watched from before then and
        no change of it has been read since. A change not read yet is the race every
        watched node has; the watch drops it again `REPEAT_AFTER` later for that."""
        known = self._known_since.get(project)
        if known is None or known >= since or project not in self._projects:
            return False
        return self._changed_at.get((project, stem), -math.inf) < since

    def covers_every_project(self) -> bool:
        """Whether every change to a top-level session file of the agent dir is seen
        (inotify running, no project dir left unwatched)."""
        return self._inotify is not None and not self._unwatched

    async def scan_new_projects(self) -> None:
        """Scan the project dirs whose files were never looked at (a stat per session
        file: 0.2 s at 10,000 sessions) in a worker thread, so the first ``recent/``
        lookup does not hold every other request up for it."""
        if self.mtimes.unscanned():
            scanned = await trio.to_thread.run_sync(self.mtimes.scan, self.mtimes.unscanned())
            self.mtimes.take_scan(scanned)

    def newest_sessions(self) -> list[tuple[str, str]] | None:
        """Every session file of the agent dir, newest first; None when some project
        dir is not watched (then only a listing of every project knows)."""
        if not self.covers_every_project():
            return None
        return self.mtimes.newest_first()

    def start(self) -> bool:
        """Watch the sessions root and every project dir in it; False (logged) when
        inotify is unavailable or the sessions root cannot be watched."""
        try:
            self._inotify = Inotify()
            self._root_wd = self._inotify.add_watch(self.sessions_root, _ROOT_MASK)
        except OSError as exc:
            log.info("not watching %s (short cache timeouts instead): %s", self.sessions_root, exc)
            self.close()
            return False
        try:
            with os.scandir(self.sessions_root) as entries:
                names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError as exc:
            log.info("cannot list %s: %s", self.sessions_root, exc)
            names = []
        for name in names:
            self._watch_project(name)
        return True

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
        self._inotify = None
        self._projects.clear()
        self._by_wd.clear()
        self._known_since.clear()
        self._changed_at.clear()

    async def run(self) -> None:
        """Follow the events until cancelled (the mount ends)."""
        if self._inotify is None:
            return
        last_read = -math.inf
        try:
            while True:
                with trio.move_on_at(self._next_repeat()):
                    await trio.lowlevel.wait_readable(self._inotify.fd)
                    gather = self._gather_seconds()
                    if trio.current_time() < last_read + gather:
                        await trio.sleep_until(last_read + gather)
                    last_read = trio.current_time()
                    for event in self._inotify.read_events():
                        self._handle(event)
                    self._send_batch()
                self._send_repeats()
        finally:
            self.close()

    def _gather_seconds(self) -> float:
        """How long events gather after the last read (`GATHER_WHILE_WRITING`)."""
        foreground = self.foreground
        if foreground is not None and foreground.writing(GATHER_WHILE_WRITING):
            return GATHER_WHILE_WRITING
        return GATHER_SECONDS

    # -- events ----------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        if event.mask & IN_Q_OVERFLOW:
            # Events were lost: whatever may have changed is dropped.
            log.info("inotify queue overflowed: dropping every watched session's nodes")
            for watched in list(self._projects):
                self.mtimes.remove_project(watched)
                self.mtimes.add_project(watched)
                self._forget_changes(watched)
                self._known_since[watched] = time.monotonic()
                self._project_changed(watched, files_may_remain=True)
            return
        if event.wd == self._root_wd:
            self._root_event(event)
            return
        project = self._by_wd.get(event.wd)
        if project is None:
            return
        if event.mask & IN_IGNORED:  # the dir was removed (or its watch was)
            self._forget_project(project)
            return
        if event.name.endswith(_SESSION_SUFFIX) and not event.mask & IN_ISDIR:
            stem = event.name[: -len(_SESSION_SUFFIX)]
            if session_keys.is_valid_name(stem):
                self._changed((project, stem), bool(event.mask & _NAMESPACE))

    def _root_event(self, event: Event) -> None:
        if not event.mask & IN_ISDIR or not session_keys.is_valid_name(event.name):
            return
        if event.mask & (IN_CREATE | IN_MOVED_TO):
            self._watch_project(event.name)
            # Files may have been made in it before its watch was (or it was moved in
            # full): only a look at everything finds them.
            for listener in self.listeners:
                listener.sessions_moved()
        elif event.mask & (IN_DELETE | IN_MOVED_FROM):
            self._unwatched.discard(event.name)
            # A renamed dir keeps its watch under the new name's inode: stop it here.
            wd = self._projects.get(event.name)
            if wd is not None and self._inotify is not None:
                self._inotify.remove_watch(wd)
            self._forget_project(event.name)

    def _watch_project(self, project: str) -> None:
        if self._inotify is None or project in self._projects:
            return
        path = self.sessions_root / project
        try:
            wd = self._inotify.add_watch(path, _PROJECT_MASK)
            st = os.lstat(path)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                log.warning("inotify watch limit reached: %s keeps short cache timeouts", path)
            if exc.errno != errno.ENOENT:  # a dir that is gone again has no sessions
                self._unwatched.add(project)
            return
        if not stat.S_ISDIR(st.st_mode):
            return
        # The kernel cached this project's names with short timeouts until now; from
        # here on every change is seen, so long ones are safe.
        self._projects[project] = wd
        self._by_wd[wd] = project
        self._unwatched.discard(project)
        self._known_since[project] = time.monotonic()
        self.mtimes.add_project(project)

    def _forget_project(self, project: str) -> None:
        wd = self._projects.pop(project, None)
        if wd is not None:
            self._by_wd.pop(wd, None)
        self._known_since.pop(project, None)
        self._forget_changes(project)
        self.mtimes.remove_project(project)
        self._project_changed(project)

    def _forget_changes(self, project: str) -> None:
        for key in [k for k in self._changed_at if k[0] == project]:
            del self._changed_at[key]

    def _forget_all_changes(self, now: float) -> None:
        """Forget every change remembered; a stat taken before ``now`` is not vouched
        for any more (its change may have been among those forgotten)."""
        self._changed_at.clear()
        for project in self._known_since:
            self._known_since[project] = now

    def _project_changed(self, project: str, files_may_remain: bool = False) -> None:
        """Anything in ``project`` may have changed unseen. With ``files_may_remain``
        (events were lost, the dir is still there) a session dir (or a sub-agents dir
        under ``transcripts/``) whose file is still there keeps its name: dropping it
        would cut it loose under a shell whose cwd it is (getcwd then fails)."""
        keep = None
        if files_may_remain:

            def keep(name: str) -> bool:
                return session_keys.is_valid_name(name) and self._is_session_file(project, name)

        self.sink.subtree_changed(transcripts_key(project), keep)
        self.sink.subtree_changed(project_key(project), keep)
        for listener in self.listeners:
            listener.sessions_moved()

    def _changed(self, session: tuple[str, str], name_too: bool) -> None:
        self._batch[session] = self._batch.get(session, False) or name_too

    def _send_batch(self) -> None:
        batch, self._batch = self._batch, {}
        read_at = time.monotonic()  # after the events were read: later than their changes
        if len(self._changed_at) + len(batch) > CHANGES_KEPT:
            self._forget_all_changes(read_at)
        for (project, stem), name_too in batch.items():
            self._changed_at[(project, stem)] = read_at
            self.mtimes.file_changed(project, stem)
            self._send(transcript_key(project, stem), name_too)
            # A session dir's inode is its path's: while its file is there (replaced by
            # a rename, say) the kernel's name of it stays right, and dropping it would
            # cut the dir loose under a shell whose cwd it is (getcwd then fails).
            gone = name_too and not self._is_session_file(project, stem)
            session_dir = session_keys.mount_parts(project, stem)
            self._send(session_dir, gone)
            # its transcript.md is kept as long (`session.TranscriptFile.kernel_tier`)
            self._send((*session_dir, TRANSCRIPT_NAME), False)
            for listener in self.listeners:
                listener.session_file_changed(project, stem)

    def _is_session_file(self, project: str, stem: str) -> bool:
        """Whether ``<project>/<stem>.jsonl`` is a file of its own now (one lstat, for
        names made, renamed or removed only: appends cost none)."""
        path = os.path.join(self.sessions_root, project, stem + _SESSION_SUFFIX)
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            return False

    def _send(self, key: tuple[str, ...], name_too: bool) -> None:
        self.sink.key_changed(key, name_too)
        earlier = self._repeat.pop(key, None)  # re-inserted last: the dict stays in time order
        name_too = name_too or (earlier is not None and earlier[0])
        self._repeat[key] = (name_too, trio.current_time() + REPEAT_AFTER)

    def _next_repeat(self) -> float:
        return next(iter(self._repeat.values()))[1] if self._repeat else math.inf

    def _send_repeats(self) -> None:
        now = trio.current_time()
        while self._repeat:
            key, (name_too, due) = next(iter(self._repeat.items()))
            if due > now:
                return
            del self._repeat[key]
            self.sink.key_changed(key, name_too)
