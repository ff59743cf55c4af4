"""``generations/`` in another agent's session dir, with an archive: the older
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

__all__ = ["GENERATIONS", "GenerationsDir", "has_generations"]

GENERATIONS = "generations"


def has_generations(catalog: object) -> bool:
    """Whether the listing is an archive's (only then is there a ``generations/``)."""
    return isinstance(catalog, ArchivedCatalog)


class GenerationsDir(InSession, DirNode):
    __slots__ = ()

    tier = STATIC

    def _files(self) -> list[Path]:
        catalog = getattr(self.ctx.index, "catalog", None)
        ref = self.ctx.index.session(self.project, self.stem)
        if ref is None or not isinstance(catalog, ArchivedCatalog):
            return []
        return catalog.generations_of(ref.path)

    async def children(self) -> list[tuple[str, Node]]:
        files = await trio.to_thread.run_sync(self._files)
        return [(path.name, BlobFile(self.ctx, self.child_key(path.name), path)) for path in files]

    async def lookup(self, name: str) -> Node | None:
        return dict(await self.children()).get(name)
