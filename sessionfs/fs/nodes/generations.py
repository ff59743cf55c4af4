"""``generations/`` in a session dir (the agent dir's or another agent's), with an
archive: the older
generations of the session file the archive holds (the file was rewritten or replaced
by a shorter one; the archive keeps what it held before), ``g<gen>.jsonl`` each, the
bytes as they were, read-only."""

from __future__ import annotations

from pathlib import Path

import trio

from sessionfs.fs.nodes.base import STATIC, DirNode, Node
from sessionfs.fs.nodes.blobs import BlobFile
from sessionfs.fs.nodes.in_session import InSession
from sessionfs.view.archived import ArchivedCatalog
from sessionfs.view.archived_index import ArchivedAgentIndex

__all__ = ["GENERATIONS", "GenerationsDir", "has_generations"]

GENERATIONS = "generations"


def _generations_source(index: object) -> ArchivedCatalog | ArchivedAgentIndex | None:
    """What knows the older generations of a tree's files: an archive's listing."""
    source = getattr(index, "catalog", index)  # another agent's: its catalog
    return source if isinstance(source, ArchivedCatalog | ArchivedAgentIndex) else None


def has_generations(index: object) -> bool:
    """Whether the index lists an archive's files (only then is there a ``generations/``)."""
    return _generations_source(index) is not None


class GenerationsDir(InSession, DirNode):
    __slots__ = ()

    tier = STATIC

    def _files(self) -> list[Path]:
        source = _generations_source(self.ctx.index)
        ref = self.ctx.index.session(self.project, self.stem)
        if ref is None or source is None:
            return []
        return source.generations_of(ref.path)

    async def children(self) -> list[tuple[str, Node]]:
        files = await trio.to_thread.run_sync(self._files)
        return [(path.name, BlobFile(self.ctx, self.child_key(path.name), path)) for path in files]

    async def lookup(self, name: str) -> Node | None:
        return dict(await self.children()).get(name)
