"""Which files the sync archives, one function per agent.

Each agent's function lists its session files as `ArchiveFile`s: the *tree* they are
kept under in the store (``sessions`` for the agent dir's own, ``agents/<agent>`` for
another agent's), their path in that tree (``rel``, the same whatever machine or home
they came from), and how to read them. `AGENT_ARCHIVES` maps an agent name (the ones the
mount shows under ``agents/``) to its function: adding an agent to the archive is adding
one function here.

* the agent dir (xcsh, omp, pi): every ``sessions/**/*.jsonl``, sub-agent sessions in
  artifacts dirs included (`agent_dir_files`);
* Claude Code: every ``projects/**/*.jsonl`` (sessions, ``<id>/subagents/agent-*.jsonl``,
  older flat ``agent-*.jsonl``) (`claude_files`);
* Codex: rollouts, live (``sessions/YYYY/MM/DD/``) or archived (``archived_sessions/``,
  ``.jsonl`` or ``.jsonl.zst``), and ``session_index.jsonl`` (the sessions' names).
  A rollout is kept at ``sessions/YYYY/MM/DD/<stem>.jsonl`` from its *name* (which holds
  its time and thread id), wherever it is now and compressed or not: moved to
  ``archived_sessions/`` and compressed it is the same file, continued, not a second
  one (`codex_files`). Codex's files are ``moves=True``: the sync tells them by their
  bytes, not their inode.

Every name is input: no symlink is followed, only regular files are listed, and a path
the store cannot hold (`is_safe_relpath`, not UTF-8) is skipped with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from core.formats.codex import ARCHIVE_DIR
from core.formats.codex_dirs import rollout_stem
from core.zstd_files import ZSTD_SUFFIX, read_chunks

from .layout import SESSIONS_TREE, agent_tree, is_safe_relpath

__all__ = [
    "AGENT_ARCHIVES",
    "ArchiveFile",
    "agent_dir_files",
    "claude_files",
    "codex_files",
    "open_archive_file",
]

log = logging.getLogger("sessionfs.store.sources")

_JSONL = ".jsonl"
_SESSION_INDEX = "session_index.jsonl"
# rollout-2026-01-02T03-04-05-<thread id>: the date dirs Codex files it under
_ROLLOUT_DATE = re.compile(r"rollout-([0-9]{4})-([0-9]{2})-([0-9]{2})T", re.ASCII)


@dataclass(frozen=True, slots=True)
class ArchiveFile:
    """One file to archive."""

    tree: str
    rel: str
    path: Path
    #: zstd-compressed on disk (a Codex archived rollout): archived decompressed
    compressed: bool = False
    #: the agent moves or compresses it (Codex): the same file may come back under
    #: another path or inode, so the sync tells it by its bytes
    moves: bool = False
    #: (inode, size, mtime_ns) when listed: the same again means unchanged
    identity: tuple[int, int, int] = (0, -1, -1)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _identity(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _regular_files(root: Path, suffix: str) -> Iterator[tuple[str, Path, tuple[int, int, int]]]:
    """``(rel, path, identity)`` of the regular files under ``root`` ending in ``suffix``,
    in name order, following no symlink; names the store cannot hold are skipped."""
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(suffix):
                continue
            path = Path(directory) / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            rel = path.relative_to(root).as_posix()
            if not _is_utf8(rel) or not is_safe_relpath(rel.removesuffix(ZSTD_SUFFIX)):
                log.warning("skipping %r: not a name the store can hold", rel)
                continue
            yield rel, path, _identity(info)


def agent_dir_files(agent_dir: Path) -> Iterator[ArchiveFile]:
    """The agent dir's session files (``sessions/**/*.jsonl``)."""
    for rel, path, identity in _regular_files(agent_dir / "sessions", _JSONL):
        yield ArchiveFile(SESSIONS_TREE, rel, path, identity=identity)


def claude_files(root: Path) -> Iterator[ArchiveFile]:
    """Claude Code's session and sub-agent files (``projects/**/*.jsonl``)."""
    tree = agent_tree("claude")
    for rel, path, identity in _regular_files(root / "projects", _JSONL):
        yield ArchiveFile(tree, f"projects/{rel}", path, identity=identity)


def codex_files(root: Path) -> Iterator[ArchiveFile]:
    """Codex's rollouts, each at the one place its name gives (module docstring), and
    its ``session_index.jsonl``."""
    tree = agent_tree("codex")
    for top, suffixes in (("sessions", (_JSONL,)), (ARCHIVE_DIR, (_JSONL, _JSONL + ZSTD_SUFFIX))):
        for suffix in suffixes:
            for rel, path, identity in _regular_files(root / top, suffix):
                stem = rollout_stem(path.name)
                if stem is not None:
                    yield ArchiveFile(
                        tree,
                        _rollout_rel(stem, f"{top}/{rel}"),
                        path,
                        compressed=suffix.endswith(ZSTD_SUFFIX),
                        moves=True,
                        identity=identity,
                    )
    index = root / _SESSION_INDEX
    with contextlib.suppress(OSError):
        info = os.lstat(index)
        if stat.S_ISREG(info.st_mode):
            yield ArchiveFile(tree, _SESSION_INDEX, index, moves=True, identity=_identity(info))


def _rollout_rel(stem: str, found_at: str) -> str:
    """``sessions/YYYY/MM/DD/<stem>.jsonl`` from the rollout's name; where the name holds
    no date, where it was found (without ``.zst``)."""
    dated = _ROLLOUT_DATE.match(stem)
    if dated is None:
        return found_at.removesuffix(ZSTD_SUFFIX)
    year, month, day = dated.groups()
    return f"sessions/{year}/{month}/{day}/{stem}{_JSONL}"


#: agent name (as under the mount's ``agents/``) -> the files of its directory to archive
AGENT_ARCHIVES: dict[str, Callable[[Path], Iterator[ArchiveFile]]] = {
    "claude": claude_files,
    "codex": codex_files,
}


@contextlib.contextmanager
def open_archive_file(file: ArchiveFile) -> Iterator[BinaryIO]:
    """The file's bytes as the archive keeps them, open for ``pread``: the file itself,
    or a compressed one decompressed into a private temp file (removed at the end)."""
    if not file.compressed:
        with file.path.open("rb") as handle:
            yield handle
        return
    fd = os.open(file.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as raw, tempfile.TemporaryFile() as plain:
        for chunk in read_chunks(raw):
            plain.write(chunk)
        plain.flush()
        yield plain
