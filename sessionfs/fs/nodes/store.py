"""The store mount's tree (``sessionfs mount --store``): ``README.md``, ``ctl``,
``machines/<name>/``, ``recent/`` and ``search/`` at the root.

``machines/<name>/`` is the local root's own tree (`RootDir`'s children: ``sessions/``,
``by-id/``, ``recent/``, ``blobs/``, …) over that machine's mirrored agent dir, with a
`MountContext` of its own whose ``prefix`` is ``("machines", name)``: the same node
classes, the same bytes. Root ``recent/`` and ``search/`` span every machine (one
search index per machine and per agent it synced; hits name ``machines/<m>/sessions/…``
or ``machines/<m>/agents/<agent>/sessions/…``). The mount is read-only
(``ops`` answers every write with ``EROFS``), so the local root's ``ctl`` (which
creates sessions) and ``history/`` (``history.db`` is never shipped) are left out of
a machine's tree, and so is its ``search/`` (its hits would name the local root's
paths; the root's spans every machine).
"""

from __future__ import annotations

from typing import Any, Protocol

import trio

from sessionfs.fs.nodes.base import STATIC, VOLATILE, DirNode, FileNode, MountContext, Node
from sessionfs.fs.nodes.index import RECENT_COUNT, RecentDir, SessionLink
from sessionfs.fs.nodes.lookup_only import QueryDir
from sessionfs.fs.nodes.root import ReadmeFile, RootDir
from sessionfs.fs.nodes.search import SearchFile
from sessionfs.view.access import Caller
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.render import status_text

__all__ = ["MACHINES", "MachineDir", "StoreRootDir", "StoreViews"]

MACHINES = "machines"

#: Children of the local root that a machine of the store mount does not show (why:
#: the module's docstring; ``search/`` points its hits at the local root's paths).
_NOT_PER_MACHINE = frozenset({"README.md", "ctl", "history", "search"})


class StoreViews(Protocol):
    """What the store tree needs from the daemon's wiring (`sessionfs.fs.store_mount`)."""

    def machine_names(self) -> list[str]: ...

    def machine_context(self, name: str) -> MountContext | None: ...

    def ctl_items(self) -> list[tuple[str, Any]]: ...

    def search(self, query: str, caller: Caller) -> bytes: ...


class MachineDir(RootDir):
    """``machines/<name>/``: a local mount's root for that machine's agent dir."""

    __slots__ = ()

    _CHILDREN = {  # noqa: RUF012 - a fixed table, never mutated
        name: cls for name, cls in RootDir._CHILDREN.items() if name not in _NOT_PER_MACHINE
    }


class MachinesDir(DirNode):
    __slots__ = ("views",)

    tier = STATIC

    def __init__(self, ctx: MountContext, key: tuple[str, ...], views: StoreViews) -> None:
        super().__init__(ctx, key)
        self.views = views

    def _machine(self, name: str) -> Node | None:
        context = self.views.machine_context(name)
        return MachineDir(context, self.child_key(name)) if context is not None else None

    async def children(self) -> list[tuple[str, Node]]:
        names = await trio.to_thread.run_sync(self.views.machine_names)
        found = [(name, self._machine(name)) for name in names]
        return [(name, node) for name, node in found if node is not None]

    async def lookup(self, name: str) -> Node | None:
        return self._machine(name)


class MachineSessionLink(SessionLink):
    """Root ``recent/<n>``: ``../machines/<m>/sessions/<project>/<stem>``."""

    __slots__ = ("machine",)

    def __init__(
        self, ctx: MountContext, key: tuple[str, ...], ref: SessionRef, machine: str
    ) -> None:
        super().__init__(ctx, key, ref)
        self.machine = machine

    async def target(self) -> str:
        within_machine = (await super().target()).removeprefix("../")
        return f"../{MACHINES}/{self.machine}/{within_machine}"


class AllRecentDir(RecentDir):
    """Root ``recent/1..50``: the newest sessions of every machine (by mirrored file
    mtime: when the mirror last wrote them, which follows the machine's appends)."""

    __slots__ = ("views",)

    def __init__(self, ctx: MountContext, key: tuple[str, ...], views: StoreViews) -> None:
        super().__init__(ctx, key)
        self.views = views

    def _newest(self) -> list[tuple[str, SessionRef]]:
        found = []
        for name in self.views.machine_names():
            context = self.views.machine_context(name)
            if context is not None:
                found += [(name, ref) for ref in context.index.all_sessions()]
        found.sort(key=lambda row: row[1].mtime_ns, reverse=True)
        return found[:RECENT_COUNT]

    async def lookup(self, name: str) -> Node | None:
        # Every machine's sessions: no watch knows them, so their listing decides.
        return await DirNode.lookup(self, name)

    async def children(self) -> list[tuple[str, Node]]:
        newest = await trio.to_thread.run_sync(self._newest)
        return [
            (str(n), MachineSessionLink(self.ctx, self.child_key(str(n)), ref, machine))
            for n, (machine, ref) in enumerate(newest, start=1)
        ]


class StoreSearchDir(QueryDir):
    __slots__ = ("views",)

    def __init__(self, ctx: MountContext, key: tuple[str, ...], views: StoreViews) -> None:
        super().__init__(ctx, key)
        self.views = views

    def query_file(self, key: tuple[str, ...], query: str) -> Node | None:
        return SearchFile(self.ctx, key, query, self.views.search)


class StoreCtl(FileNode):
    """Root ``ctl`` (read-only): the store, its machines, the last refresh, errors."""

    __slots__ = ("views",)

    tier = VOLATILE

    def __init__(self, ctx: MountContext, key: tuple[str, ...], views: StoreViews) -> None:
        super().__init__(ctx, key)
        self.views = views

    async def content(self) -> bytes:
        names = await trio.to_thread.run_sync(self.views.machine_names)
        return status_text([("machines", " ".join(names)), *self.views.ctl_items()])


class StoreRootDir(DirNode):
    __slots__ = ("views",)

    tier = STATIC

    def __init__(self, ctx: MountContext, key: tuple[str, ...], views: StoreViews) -> None:
        super().__init__(ctx, key)
        self.views = views

    def _child(self, name: str) -> Node | None:
        key = self.child_key(name)
        if name == "README.md":
            return ReadmeFile(self.ctx, key)
        if name == "ctl":
            return StoreCtl(self.ctx, key, self.views)
        if name == MACHINES:
            return MachinesDir(self.ctx, key, self.views)
        if name == "recent":
            return AllRecentDir(self.ctx, key, self.views)
        if name == "search":
            return StoreSearchDir(self.ctx, key, self.views)
        return None

    async def children(self) -> list[tuple[str, Node]]:
        names = ("README.md", "ctl", MACHINES, "recent", "search")
        return [(name, node) for name in names if (node := self._child(name)) is not None]

    async def lookup(self, name: str) -> Node | None:
        return self._child(name)
