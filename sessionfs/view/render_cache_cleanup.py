"""Removing render-cache files that can never be served again: ``clean_render_cache``.

A cache file is named by its session file's path and overwritten when that file
changes, so a live session holds one cache file; but a deleted (or moved) session's
file would stay for ever and ``--cache-dir`` would only grow. One pass removes:

* an entry whose session file is gone (or is no longer a file);
* an entry rendered from another state of its session file (another inode, size or
  mtime: appends only move forward, so it can never match again);
* an entry whose head is not intact or not ours (corrupt, truncated, misplaced);
* a temporary file older than `TEMP_GRACE_SECONDS` (a writer that died before its
  rename: a live writer renames within moments).

The cost is one ``lstat``, one small read of the head and one ``stat`` of the session
file per entry: proportional to the cache's entries, never a rendering. It touches
nothing but the regular files directly in the cache's ``renders`` dir whose names are
the cache's own (40 hex digits, or the temporary prefix): the dir is opened once
without following a symlink and every name is resolved and unlinked relative to it,
so a symlink planted in or for the dir cannot lead the deletions elsewhere.

Two daemons may share the cache dir: each may remove an entry the other is about to
read, or just wrote for a state that already changed. Both are harmless: readers treat
a missing or changed cache file as a miss (`RenderCache.validate`, the transcript
handles) and render again.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from core.file_identity import FileIdentity
from core.session_stat import session_stat
from sessionfs.view.render_cache import (
    ENTRY_NAME_CHARS,
    TEMP_PREFIX,
    entry_name,
    read_entry_head,
)

__all__ = ["TEMP_GRACE_SECONDS", "CleanReport", "clean_render_cache"]

log = logging.getLogger(__name__)

#: A temporary cache file this old belongs to no live writer.
TEMP_GRACE_SECONDS = 3600.0

_ENTRY_NAME = re.compile(rf"[0-9a-f]{{{ENTRY_NAME_CHARS}}}")


@dataclass
class CleanReport:
    """What one pass found: entries kept, files removed, bytes freed."""

    kept: int = 0
    removed: int = 0
    freed_bytes: int = 0


def clean_render_cache(
    renders_dir: Path, sessions_root: Path, temp_grace: float = TEMP_GRACE_SECONDS
) -> CleanReport:
    """One pass over ``renders_dir`` (see the module doc). A missing dir is an empty
    cache; any error on one file leaves that file alone."""
    report = CleanReport()
    try:
        dir_fd = os.open(renders_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return report
    try:
        with os.scandir(dir_fd) as it:
            names = [entry.name for entry in it]
        for name in names:
            _clean_one(dir_fd, name, sessions_root, temp_grace, report)
    finally:
        os.close(dir_fd)
    if report.removed:
        log.info(
            "render cache: removed %d stale files (%d bytes), kept %d",
            report.removed,
            report.freed_bytes,
            report.kept,
        )
    return report


def _clean_one(
    dir_fd: int, name: str, sessions_root: Path, temp_grace: float, report: CleanReport
) -> None:
    is_temp = name.startswith(TEMP_PREFIX)
    if not (is_temp or _ENTRY_NAME.fullmatch(name)):
        return  # not a name the cache makes: never touched
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        return
    if is_temp:
        stale = time.time() - st.st_mtime > temp_grace
    else:
        stale = _entry_is_stale(dir_fd, name, sessions_root)
    if not stale:
        if not is_temp:
            report.kept += 1
        return
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return  # the other daemon removed it first
    except OSError as exc:
        log.debug("render cache: cannot remove %s: %s", name, exc)
        return
    report.removed += 1
    report.freed_bytes += st.st_size


def _entry_is_stale(dir_fd: int, name: str, sessions_root: Path) -> bool:
    """Whether the cache file ``name`` can never be served again."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return False  # already gone
    except OSError:
        return False  # unreadable: not ours to judge
    try:
        head = read_entry_head(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    if head is None or entry_name(head.key) != name:
        return True  # corrupt, foreign or misplaced: validation would never accept it
    try:
        now = FileIdentity.of(session_stat(sessions_root / head.key))
    except (FileNotFoundError, NotADirectoryError):
        return True  # the session file is gone
    except OSError:
        return False  # cannot tell (permissions, I/O): keep it
    return now != head.identity
