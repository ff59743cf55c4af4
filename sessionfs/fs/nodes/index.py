"""Ways into the sessions other than by project: ``by-id/`` and ``recent/``."""

from __future__ import annotations

import errno

import trio

from sessionfs.fs.nodes.base import STATIC, DirNode, LinkNode, MountContext, Node, refuse
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.session_keys import mount_parts

RECENT_COUNT = 50


class SessionLink(LinkNode):
    """A symlink to ``../sessions/<project>/<stem>`` (a sub-agent session's:
    ``../sessions/<project>/<stem>/subagents/<name>``; stays inside the mount)."""

    __slots__ = ("ref",)

    def __init__(self, ctx: MountContext, key: tuple[str, ...], ref: SessionRef) -> None:
        super().__init__(ctx, key)
        self.ref = ref

    async def target(self) -> str:
        return "../" + "/".join(mount_parts(self.ref.project, self.ref.stem))

    async def mtime_ns(self) -> int:
        return self.ref.mtime_ns


class ByIdDir(DirNode):
    """``by-id/<session-id>`` of every session, sub-agent sessions included; lookup
    also takes a unique id or file-stem prefix. Both go through the agent index's
    id map (`sessionfs.view.session_ids`): a lookup costs a stat, not a listing."""

    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        named = await trio.to_thread.run_sync(self.ctx.index.ids.listing)
        return [(n, SessionLink(self.ctx, self.child_key(n), r)) for n, r in named]

    async def lookup(self, name: str) -> Node | None:
        # A known id is one stat: on the event loop, cheaper than a thread hop.
        ids = self.ctx.index.ids
        ref = ids.resolve_known(name) or await trio.to_thread.run_sync(ids.resolve, name)
        return None if ref is None else SessionLink(self.ctx, self.child_key(name), ref)


class RecentDir(DirNode):
    """``recent/1..50``: sessions by file mtime, newest = 1. While every project dir
    is watched the order comes from the watch (`SessionWatch.newest_sessions`): a
    lookup checks the newest few files, not a listing of every session."""

    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        refs = await self._newest_refs(RECENT_COUNT)
        return [
            (str(n), SessionLink(self.ctx, self.child_key(str(n)), ref))
            for n, ref in enumerate(refs, start=1)
        ]

    async def lookup(self, name: str) -> Node | None:
        if not name.isdigit() or not 1 <= int(name) <= RECENT_COUNT or name != str(int(name)):
            return None
        refs = await self._newest_refs(int(name))
        if len(refs) < int(name):
            raise refuse(errno.ENOENT)
        return SessionLink(self.ctx, self.child_key(name), refs[-1])

    async def _newest_refs(self, count: int) -> list[SessionRef]:
        """The ``count`` newest sessions: from the watch's mtimes, checking only the
        newest files until ``count`` are sessions; without a watch of every project
        dir, by listing every session."""
        watch = self.ctx.watch
        if watch is not None:
            await watch.scan_new_projects()
        order = watch.newest_sessions() if watch is not None else None
        if order is None:
            refs = await trio.to_thread.run_sync(self.ctx.index.all_sessions)
            refs.sort(key=lambda r: r.mtime_ns, reverse=True)
            return refs[:count]
        found: list[SessionRef] = []
        for project, stem in order:
            ref = await self.ctx.sessions.ref(project, stem)
            if ref is not None:  # not a session (no header): the next file
                found.append(ref)
                if len(found) == count:
                    break
        return found
