"""Which files the sync archives: the agent dir's, and each other agent's from its
connector's one function (`core.formats.agent_format.AgentFormat.archive_files`).

Each file is an `ArchiveFile`: the *tree* it is kept under in the store (``sessions``
for the agent dir's own, ``agents/<agent>`` for another agent's), its path in that tree
(``rel``, the same whatever machine or home it came from), and how to read it. Adding
an agent to the archive is giving its connector an ``archive_files``:

* the agent dir (xcsh, omp, pi): every ``sessions/**/*.jsonl``, sub-agent sessions in
  artifacts dirs included (`agent_dir_files`);
* Claude Code: every ``projects/**/*.jsonl`` and each sub-agent's ``.meta.json`` (a
  document, archived as one line) (`core.formats.claude_agent`);
* Codex: rollouts, live or archived and compressed, each at the place its name gives,
  ``session_index.jsonl``, and the titles of its state database as JSON lines
  (``sessionfs-state-titles.jsonl``, made by `open_archive_file`)
  (`core.formats.codex_agent`).

Every name is input: no symlink is followed, only regular files are listed, and a path
the store cannot hold (`is_safe_relpath`, not UTF-8) is skipped with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from core.agent_homes import AgentHome
from core.formats.agent_format import ArchivedFile
from core.formats.file_walk import regular_files
from core.formats.registry import AGENT_FORMATS
from core.zstd_files import read_chunks

from .layout import SESSIONS_TREE, agent_tree, is_safe_relpath

__all__ = ["ArchiveFile", "agent_dir_files", "agent_files", "open_archive_file"]

log = logging.getLogger("sessionfs.store.sources")

_JSONL = ".jsonl"


@dataclass(frozen=True, slots=True)
class ArchiveFile:
    """One file to archive."""

    tree: str
    rel: str
    path: Path
    #: (inode, size, mtime_ns) when listed: the same again means unchanged
    identity: tuple[int, int, int] = (0, -1, -1)
    #: zstd-compressed on disk (a Codex archived rollout): archived decompressed
    compressed: bool = False
    #: the agent moves or compresses it (Codex): the same file may come back under
    #: another path or inode, so the sync tells it by its bytes
    moves: bool = False
    #: the bytes archived, made from ``path`` (`ArchivedFile.made`)
    made: Callable[[], bytes] | None = None


def _storable(tree: str, files: Iterable[ArchivedFile]) -> Iterator[ArchiveFile]:
    """The files whose paths the store can hold, in ``tree``; the others said once."""
    for file in files:
        if not is_safe_relpath(file.rel):
            log.warning("skipping %r: not a name the store can hold", file.rel)
            continue
        yield ArchiveFile(
            tree, file.rel, file.path, file.identity, file.compressed, file.moves, file.made
        )


def agent_dir_files(agent_dir: Path) -> Iterator[ArchiveFile]:
    """The agent dir's session files (``sessions/**/*.jsonl``)."""
    found = regular_files(agent_dir / "sessions", _JSONL)
    yield from _storable(SESSIONS_TREE, (ArchivedFile(*entry) for entry in found))


def agent_files(home: AgentHome) -> Iterator[ArchiveFile] | None:
    """Another agent's files to archive, from its connector (None: it archives none)."""
    connector = AGENT_FORMATS.get(home.agent)
    if connector is None or connector.archive_files is None:
        return None
    return _storable(agent_tree(home.agent), connector.archive_files(home.root))


@contextlib.contextmanager
def open_archive_file(file: ArchiveFile) -> Iterator[BinaryIO]:
    """The file's bytes as the archive keeps them, open for ``pread``: the file itself,
    or its bytes made (`ArchivedFile.made`) or decompressed into a private temp file
    (removed at the end)."""
    if file.made is not None:
        with tempfile.TemporaryFile() as made:
            made.write(file.made())
            made.flush()
            yield made
        return
    if not file.compressed:
        with file.path.open("rb") as handle:
            yield handle
        return
    fd = os.open(file.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as raw, tempfile.TemporaryFile() as plain:
        # Another agent's file: its text stops at a ceiling (`most_text`)
        # (`TextPastItsBound`, an OSError: the sync skips it, saying why), so that a
        # few KB made to expand without end do not fill the temp dir.
        for chunk in read_chunks(raw):
            plain.write(chunk)
        plain.flush()
        yield plain
