"""A dir with one child per project of ``<agent>/sessions`` (``sessions/``, ``transcripts/``)."""

from __future__ import annotations

import trio

from sessionfs.fs.nodes.base import STATIC, DirNode, Node

__all__ = ["ProjectsDir"]


class ProjectsDir(DirNode):
    """Lists the project dirs under ``<agent>/sessions``; `project_node` makes the
    child each kind of tree shows for one of them."""

    __slots__ = ()

    tier = STATIC

    def project_node(self, name: str) -> Node:
        raise NotImplementedError

    async def children(self) -> list[tuple[str, Node]]:
        projects = await trio.to_thread.run_sync(self.ctx.index.projects)
        return [(p, self.project_node(p)) for p in projects]

    async def lookup(self, name: str) -> Node | None:
        # One stat, cheaper on the event loop than a thread hop (as session lookups do).
        if name in (".", "..") or "/" in name or self.ctx.index.project_mtime_ns(name) is None:
            return None
        return self.project_node(name)
