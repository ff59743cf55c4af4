"""``search/<words>``: full-text search over every session's messages.

``search/`` is lookup-only (`QueryDir`). Reading ``search/<words>`` gives one line per
hit, newest first: ``<iso time>\\t<entry path in the mount>\\t<role>\\t<snippet>``
(`sessionfs.view.search_view`). The size is exact: the result is rendered at lookup
and reused for a few seconds, so ``stat`` and ``read`` agree; the volatile tier keeps
the kernel from caching it longer, since the index changes as sessions grow. While
the index is still being built the hits come from what is indexed so far; the
progress is in the root ``ctl``, never in the results.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from sessionfs.fs.nodes.base import VOLATILE, FileNode, MountContext, Node
from sessionfs.fs.nodes.lookup_only import QueryDir

__all__ = ["SearchDir", "SearchFile"]


class SearchFile(FileNode):
    """``search/<words>``: what ``search(words)`` answers (one agent dir's index, or
    every machine's in a store mount), run in a worker thread."""

    __slots__ = ("query", "search")

    tier = VOLATILE

    def __init__(
        self, ctx: MountContext, key: tuple[str, ...], query: str, search: Callable[[str], bytes]
    ) -> None:
        super().__init__(ctx, key)
        self.query = query
        self.search = search

    async def content(self) -> bytes:
        return await trio.to_thread.run_sync(self.search, self.query)


class SearchDir(QueryDir):
    __slots__ = ()

    def query_file(self, key: tuple[str, ...], query: str) -> Node | None:
        view = self.ctx.search
        return SearchFile(self.ctx, key, query, view.result) if view is not None else None
