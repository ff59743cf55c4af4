"""A dir with one child per project of ``<agent>/sessions`` (``sessions/``, ``transcripts/``)."""

from __future__ import annotations

import trio

from sessionfs.fs.nodes.base import STATIC, DirNode, Node
from sessionfs.view.agent_index import NEEDS_IO, AgentIndex

__all__ = ["ProjectsDir", "project_mtime_ns"]


async def project_mtime_ns(index: AgentIndex, project: str) -> int | None:
    """The project dir's mtime, None when there is none: one stat on the event loop
    (cheaper than a thread hop), or in a thread when the index must scan first
    (another agent's, before its first scan: it may wait on a locked database)."""
    known = index.project_mtime_if_known(project)
    if known is NEEDS_IO:
        return await trio.to_thread.run_sync(index.project_mtime_ns, project)
    return known if isinstance(known, int) else None


class ProjectsDir(DirNode):
    """Lists the project dirs under ``<agent>/sessions``; `project_node` makes the
    child each kind of tree shows for one of them."""

    __slots__ = ()

    tier = STATIC
    # Listing the projects costs a thread hop; `grep -r transcripts/` opens the dir
    # once to look at it, then again to walk it: only the walk reads it.
    lists_at_first_read = True

    def project_node(self, name: str) -> Node:
        raise NotImplementedError

    async def children(self) -> list[tuple[str, Node]]:
        # Unchanged since the last listing: known on the event loop (one stat), without
        # the thread hop (each warm ``grep -r transcripts/`` lists this dir).
        projects = self.ctx.index.reused_projects()
        if projects is None:
            projects = await trio.to_thread.run_sync(self.ctx.index.listed_projects)
        # The same nodes while the projects are (their readdirplus rows then cost less)
        return self.ctx.children_of_listing(
            self.key, projects, lambda: [(p, self.project_node(p)) for p in projects]
        )

    async def lookup(self, name: str) -> Node | None:
        if name in (".", "..") or "/" in name:
            return None
        if await project_mtime_ns(self.ctx.index, name) is None:
            return None
        return self.project_node(name)
