"""Sessions only the archive holds, beside the live ones.

`ArchivedCatalog` lists an agent's live session files and then the archive's files of
that agent (the archive's mirror, `sessionfs.store.mirror`, keeps them in the agent's own
layout under ``<mirror>/machines/<m>/agents/<agent>/``) whose session the live dir no
longer has: Claude Code's cleanup deleted it, a user removed it. The mount lists both
together, the archived ones read-only like every other agent's.

A file rewritten or replaced keeps its older generations in the archive; the mirror
writes each once beside it, and `ArchivedCatalog.generations_of` finds them for the
session dir's ``generations/``.

`archive_note` is what ``header.json`` adds for such a file: that it is only in the
archive, and since when (the last time a sync archived bytes of it: it was deleted at
its old path after that). It is told by where the file is (a file of the mirror of an
archive shown beside the live dirs: ``machines/<m>/`` of a mirror `mark_archive_mirror`
marked), so the daemon and the render workers, which open files by path, say the same.
A team store's mount (``--store``) shows every machine's sessions from its own mirror,
unmarked: whether a file is still on its machine is not known there, so none is said
to be only in the archive.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from core.private_files import ensure_private_file, make_private_dirs

if TYPE_CHECKING:  # (the render workers import `archive_note`, not the agent indexes)
    from sessionfs.view.other_agent_index import AgentCatalog, Listed

__all__ = [
    "ArchiveDirs",
    "ArchivedCatalog",
    "archive_note",
    "generations_in",
    "mark_archive_mirror",
]

_MACHINES = "machines"
#: In a mirror's dir: this mirror is of an archive shown beside the live dirs.
_ARCHIVE_MARKER = "archive-mirror"


class ArchiveDirs(Protocol):
    """Where an archive's mirror keeps one machine's files of each agent
    (`sessionfs.fs.archive_mount.LocalArchive`)."""

    def agent_root(self, agent: str) -> Path: ...

    def generations_root(self, agent: str) -> Path: ...


class ArchivedCatalog:
    """An agent's live files, then the archive's sessions the live dir does not have;
    and each file's older generations (`generations_of`)."""

    def __init__(self, live: AgentCatalog, archived: AgentCatalog, generations_root: Path) -> None:
        self.live, self.archived = live, archived
        self.agent = live.agent
        self.root = live.root
        self.generations_root = generations_root

    def generations_of(self, path: Path) -> list[Path]:
        """The archive's older generations of the session file ``path`` (live or
        archived), oldest first: ``g<gen>.jsonl`` files, read-only."""
        return generations_in(self.generations_root, (self.archived.root, self.live.root), path)

    def scan(self) -> Iterator[Listed]:
        shown: set[tuple[str, str]] = set()
        for listed in self.live.scan():
            shown.add((listed.project, listed.stem))
            yield listed
        for listed in self.archived.scan():
            if (listed.project, listed.stem) not in shown:
                yield listed


def generations_in(generations_root: Path, roots: tuple[Path, ...], path: Path) -> list[Path]:
    """The older generations the mirror keeps (under ``generations_root``, in the layout
    of the tree whose files are under one of ``roots``) of the file ``path``, oldest
    first: ``g<gen>.jsonl`` files, read-only."""
    for root in roots:
        if path.is_relative_to(root):
            directory = generations_root / path.relative_to(root)
            try:
                found = sorted(directory.iterdir())
            except OSError:
                return []
            return [p for p in found if p.suffix == ".jsonl" and p.name.startswith("g")]
    return []


def archive_note(file: object) -> dict[str, Any] | None:
    """``{"only_in_archive": true, "machine": m, "since": <ISO time>}`` for a file of an
    archive's mirror (``header.json``'s ``file``), else ``None``."""
    if not isinstance(file, str) or not file:
        return None
    path = Path(file)
    for parent in path.parents:
        if parent.name == _MACHINES and (parent.parent / _ARCHIVE_MARKER).is_file():
            try:
                archived = os.stat(path).st_mtime
            except OSError:
                return None
            return {
                "only_in_archive": True,
                "machine": path.relative_to(parent).parts[0],
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(archived)),
            }
    return None


def mark_archive_mirror(mirror_dir: Path) -> None:
    """Mark ``mirror_dir`` as the mirror of an archive shown beside the live dirs, whose
    files `archive_note` then says are only in the archive."""
    make_private_dirs(mirror_dir)
    ensure_private_file(mirror_dir / _ARCHIVE_MARKER)
