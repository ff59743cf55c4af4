"""The mtime of every session file of the watched project dirs, kept current from the
watch's events (`sessionfs.fs.session_watch`), so ``recent/N`` finds the newest
sessions without listing and stat'ing every session on each lookup.

Fed on the event loop: a changed file is only noted, and stat'ed once when the order
is next asked for (an append through ``append/`` raises events of its own, and a
``stat`` per event would be paid by every append while ``recent/`` is rarely read);
one scan of a project dir the first time the order is asked for after its watch
started (not at mount time: a first ``ls`` of a big agent dir would wait for it), in a
worker thread (`SessionWatch.scan_new_projects`: a stat per session file). A session
file that is a symlink raises no event when its target changes, so those few are
stat'ed again whenever the order is asked for. Whether a file really is a session (a
header) is not known here: callers check the candidates in order and skip the others.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessionfs.view import session_keys

__all__ = ["SessionMtimes"]

_SESSION_SUFFIX = ".jsonl"
#: what a scan saw of one session file: its stem, its stat (None: gone), a symlink?
_Seen = tuple[str, os.stat_result | None, bool]


class SessionMtimes:
    """``(project, stem) -> mtime_ns`` of the session files of the projects added."""

    def __init__(self, sessions_root: Path) -> None:
        self.sessions_root = sessions_root
        self._root = os.fspath(sessions_root)
        self._mtimes: dict[tuple[str, str], int] = {}
        self._links: set[tuple[str, str]] = set()  # the files that are symlinks
        self._order: list[tuple[str, str]] | None = None  # newest first; None: changed
        self._unscanned: set[str] = set()  # projects added and not scanned yet
        self._changed: set[tuple[str, str]] = set()  # files to stat again when asked

    def add_project(self, project: str) -> None:
        """A project dir whose watch just started: scanned when the order is asked for."""
        self._unscanned.add(project)

    def unscanned(self) -> list[str]:
        """The projects added and not scanned yet (`scan`, then `take_scan`)."""
        return list(self._unscanned)

    def scan(self, projects: list[str]) -> list[tuple[str, list[_Seen]]]:
        """Every session file of ``projects``: one ``stat`` each (whether it is a
        symlink comes with the listing). Reads only: safe in a worker thread while the
        event loop goes on (`take_scan` then keeps what is still wanted)."""
        return [(project, self._read_project(project)) for project in projects]

    def take_scan(self, scanned: list[tuple[str, list[_Seen]]]) -> None:
        """Keep what `scan` found for the projects still waiting for their scan (one
        removed meanwhile is not brought back; a file changed meanwhile is looked at
        again anyway: its event is in ``_changed``)."""
        for project, seen in scanned:
            if project not in self._unscanned:
                continue
            self._unscanned.discard(project)
            for stem, st, linked in seen:
                if st is None:
                    self._forget((project, stem))
                else:
                    self._record((project, stem), st, linked)

    def _read_project(self, project: str) -> list[_Seen]:
        try:
            with os.scandir(self.sessions_root / project) as it:
                files = [e for e in it if e.name.endswith(_SESSION_SUFFIX)]
        except OSError:
            return []
        seen: list[_Seen] = []
        for entry in files:
            stem = entry.name[: -len(_SESSION_SUFFIX)]
            if not session_keys.is_valid_name(stem):
                continue
            try:
                seen.append((stem, entry.stat(), entry.is_symlink()))
            except OSError:
                seen.append((stem, None, False))
        return seen

    def remove_project(self, project: str) -> None:
        self._unscanned.discard(project)
        self._changed = {k for k in self._changed if k[0] != project}
        for key in [k for k in self._mtimes if k[0] == project]:
            self._forget(key)

    def file_changed(self, project: str, stem: str) -> None:
        """The session file ``<project>/<stem>.jsonl`` was made, written, renamed,
        removed or chmodded: looked at when the order is next asked for."""
        if session_keys.is_valid_name(stem):
            self._changed.add((project, stem))

    def _look(self, project: str, stem: str) -> None:
        """Take the mtime of ``<project>/<stem>.jsonl`` now, or forget it if it is gone
        (or is not a regular file, or a symlink to one)."""
        key = (project, stem)
        # Joined as a str: a Path join costs more than the lstat.
        path = os.path.join(self._root, project, stem + _SESSION_SUFFIX)
        try:
            # One system call for the usual regular file; a symlink is followed after.
            st = os.lstat(path)
            linked = stat.S_ISLNK(st.st_mode)
            if linked:
                st = os.stat(path)
        except OSError:
            self._forget(key)
            return
        self._record(key, st, linked)

    def _record(self, key: tuple[str, str], st: os.stat_result, linked: bool) -> None:
        """A session file's stat (following a symlink) as taken now."""
        if not stat.S_ISREG(st.st_mode):
            self._forget(key)
            return
        if self._mtimes.get(key) != st.st_mtime_ns:
            self._mtimes[key] = st.st_mtime_ns
            self._order = None
        if linked:
            self._links.add(key)
        else:
            self._links.discard(key)

    def newest_first(self) -> list[tuple[str, str]]:
        """Every known session file, newest first (ties in project and name order,
        as a listing of every project sorted by mtime gives them)."""
        if self._unscanned:  # not scanned in a thread first (`scan`): here, then
            self.take_scan(self.scan(self.unscanned()))
        # Symlinks too: their targets change without an event.
        changed, self._changed = self._changed | self._links, set()
        for project, stem in changed:
            self._look(project, stem)
        if self._order is None:
            mtimes = self._mtimes
            self._order = sorted(
                mtimes, key=lambda key: (-mtimes[key], key[0], key[1] + _SESSION_SUFFIX)
            )
        return self._order

    def _forget(self, key: tuple[str, str]) -> None:
        if self._mtimes.pop(key, None) is not None:
            self._order = None
        self._links.discard(key)
