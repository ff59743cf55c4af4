"""``history/recent.txt`` and ``history/search/<query>``: the prompt history store."""

from __future__ import annotations

import os

import trio

from sessionfs.fs.nodes.base import (
    STATIC,
    VOLATILE,
    DirNode,
    FileNode,
    MountContext,
    Node,
    Permissions,
    derived_permissions,
)
from sessionfs.fs.nodes.lookup_only import QueryDir
from sessionfs.view.access import FileAccess


class OfHistoryDb:
    """Mixin for everything below ``history/``: readable by whoever may read
    ``history.db`` on disk, owned by its owner."""

    __slots__ = ()

    ctx: MountContext

    async def permissions(self) -> Permissions:
        try:
            st = os.stat(self.ctx.history.db_path)  # one stat: on the event loop
        except OSError:
            return derived_permissions(None)  # no history: nothing to protect
        return derived_permissions(FileAccess.of(st))


class HistoryFile(OfHistoryDb, FileNode):
    __slots__ = ("query",)

    tier = VOLATILE

    def __init__(self, ctx: MountContext, key: tuple[str, ...], query: str | None) -> None:
        super().__init__(ctx, key)
        self.query = query

    async def content(self) -> bytes:
        return await trio.to_thread.run_sync(self.ctx.history.lines, self.query)


class HistorySearchDir(OfHistoryDb, QueryDir):
    """Lookup-only: ``history/search/<query>`` exists for any query; lists empty."""

    __slots__ = ()

    def query_file(self, key: tuple[str, ...], query: str) -> Node:
        return HistoryFile(self.ctx, key, query)


class HistoryDir(OfHistoryDb, DirNode):
    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        return [
            ("recent.txt", HistoryFile(self.ctx, self.child_key("recent.txt"), None)),
            ("search", HistorySearchDir(self.ctx, self.child_key("search"))),
        ]
