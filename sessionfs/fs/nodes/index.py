"""Ways into the sessions other than by project: ``by-id/`` and ``recent/``."""

from __future__ import annotations

import errno

import trio

from sessionfs.fs.nodes.base import STATIC, DirNode, LinkNode, MountContext, Node, refuse
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.names import decode_name, encode_name, unique_names
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
    also takes a unique id or file-stem prefix."""

    __slots__ = ()

    tier = STATIC

    async def _named(self) -> list[tuple[str, SessionRef]]:
        refs = await trio.to_thread.run_sync(self.ctx.index.every_session)
        refs = [r for r in refs if r.session_id]
        names = unique_names([encode_name(r.session_id) for r in refs])
        return list(zip(names, refs, strict=True))

    async def children(self) -> list[tuple[str, Node]]:
        return [(n, SessionLink(self.ctx, self.child_key(n), r)) for n, r in await self._named()]

    async def lookup(self, name: str) -> Node | None:
        named = await self._named()
        for listed, ref in named:
            if listed == name:
                return SessionLink(self.ctx, self.child_key(name), ref)
        wanted = decode_name(name).lower()
        if not wanted:
            return None
        matches = {
            (ref.project, ref.stem): ref
            for _, ref in named
            if ref.session_id.lower().startswith(wanted) or ref.name.lower().startswith(wanted)
        }
        if len(matches) == 1:
            (ref,) = matches.values()
            return SessionLink(self.ctx, self.child_key(name), ref)
        return None  # unknown or ambiguous prefix


class RecentDir(DirNode):
    """``recent/1..50``: sessions by file mtime, newest = 1."""

    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        refs = await trio.to_thread.run_sync(self.ctx.index.all_sessions)
        refs.sort(key=lambda r: r.mtime_ns, reverse=True)
        return [
            (str(n), SessionLink(self.ctx, self.child_key(str(n)), ref))
            for n, ref in enumerate(refs[:RECENT_COUNT], start=1)
        ]

    async def lookup(self, name: str) -> Node | None:
        if not name.isdigit() or not 1 <= int(name) <= RECENT_COUNT or name != str(int(name)):
            return None
        for child_name, node in await self.children():
            if child_name == name:
                return node
        raise refuse(errno.ENOENT)
