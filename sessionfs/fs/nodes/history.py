"""``history/recent.txt`` and ``history/search/<query>``: the prompt history store."""

from __future__ import annotations

import trio

from sessionfs.fs.nodes.base import STATIC, VOLATILE, DirNode, FileNode, MountContext, Node
from sessionfs.fs.nodes.lookup_only import QueryDir


class HistoryFile(FileNode):
    __slots__ = ("query",)

    tier = VOLATILE

    def __init__(self, ctx: MountContext, key: tuple[str, ...], query: str | None) -> None:
        super().__init__(ctx, key)
        self.query = query

    async def content(self) -> bytes:
        return await trio.to_thread.run_sync(self.ctx.history.lines, self.query)


class HistorySearchDir(QueryDir):
    """Lookup-only: ``history/search/<query>`` exists for any query; lists empty."""

    __slots__ = ()

    def query_file(self, key: tuple[str, ...], query: str) -> Node:
        return HistoryFile(self.ctx, key, query)


class HistoryDir(DirNode):
    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        return [
            ("recent.txt", HistoryFile(self.ctx, self.child_key("recent.txt"), None)),
            ("search", HistorySearchDir(self.ctx, self.child_key("search"))),
        ]
