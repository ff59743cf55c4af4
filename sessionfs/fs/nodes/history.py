"""``history/recent.txt`` and ``history/search/<query>``: the prompt history store."""

from __future__ import annotations

import trio

from sessionfs.fs.nodes.base import STATIC, VOLATILE, DirNode, FileNode, MountContext, Node
from sessionfs.view.names import decode_name


class HistoryFile(FileNode):
    __slots__ = ("query",)

    tier = VOLATILE

    def __init__(self, ctx: MountContext, key: tuple[str, ...], query: str | None) -> None:
        super().__init__(ctx, key)
        self.query = query

    async def content(self) -> bytes:
        return await trio.to_thread.run_sync(self.ctx.history.lines, self.query)


class HistorySearchDir(DirNode):
    """Lookup-only: ``history/search/<query>`` exists for any query; lists empty."""

    __slots__ = ()

    tier = STATIC

    async def lookup(self, name: str) -> Node | None:
        return HistoryFile(self.ctx, self.child_key(name), decode_name(name))


class HistoryDir(DirNode):
    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        return [
            ("recent.txt", HistoryFile(self.ctx, self.child_key("recent.txt"), None)),
            ("search", HistorySearchDir(self.ctx, self.child_key("search"))),
        ]
