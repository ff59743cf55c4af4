"""``search/<words>``: full-text search over every session's messages.

``search/`` is lookup-only (`QueryDir`). Reading ``search/<words>`` gives one line per
hit, newest first: ``<iso time>\\t<entry path in the mount>\\t<role>\\t<snippet>``
(`sessionfs.view.search_view`), only hits in session files the reader may read: the
content depends on who asks, so the kernel keeps neither its pages nor its attributes
(``PER_CALLER``). The size is exact for each reader: the result is rendered at
lookup and reused for a few seconds per reader, so ``stat`` and ``read`` agree. While
the index is still being built a search waits for the build a few seconds
(`FIRST_BUILD_WAIT_SECONDS`), then hits come from what is indexed so far; the
progress is in the root ``ctl``, never in the results.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from sessionfs.fs.nodes.base import PER_CALLER, FileNode, MountContext, Node
from sessionfs.fs.nodes.lookup_only import QueryDir
from sessionfs.fs.search_indexer import FIRST_BUILD_WAIT_SECONDS, wait_for_first_builds
from sessionfs.view.access import Caller
from sessionfs.view.search_view import search_result

__all__ = ["SearchDir", "SearchFile"]


#: what answers a query for a caller: one agent dir's `SearchView.result`, or a store
#: mount's over every machine
Search = Callable[[str, Caller], bytes]


class SearchFile(FileNode):
    """``search/<words>``: what ``search(words, caller)`` answers, run in a worker
    thread. Per caller: only hits in sessions the caller may read (`Caller.may_read`),
    never from a cache another caller filled (``PER_CALLER``)."""

    __slots__ = ("caller", "query", "search")

    tier = PER_CALLER
    per_caller = True

    def __init__(
        self,
        ctx: MountContext,
        key: tuple[str, ...],
        query: str,
        search: Search,
        caller: Caller | None = None,
    ) -> None:
        super().__init__(ctx, key)
        self.query = query
        self.search = search
        self.caller = caller

    def seen_by(self, caller: Caller) -> Node:
        return SearchFile(self.ctx, self.key, self.query, self.search, caller)

    async def content(self) -> bytes:
        if self.caller is None:  # asked by no one in particular: shows nothing
            return b""
        await wait_for_first_builds(self.ctx.search_indexers, FIRST_BUILD_WAIT_SECONDS)
        return await trio.to_thread.run_sync(self.search, self.query, self.caller)


class SearchDir(QueryDir):
    __slots__ = ()

    def query_file(self, key: tuple[str, ...], query: str) -> Node | None:
        views = [v for v in (self.ctx.search, self.ctx.archive_search) if v is not None]
        if self.ctx.agents is not None:  # the other agents' sessions are searched too
            views += [view for _, view in self.ctx.agents.search_views()]
        if not views:
            return None

        def search(words: str, caller: Caller) -> bytes:
            return search_result(views, words, caller)

        return SearchFile(self.ctx, key, query, search)
