"""Directories whose children are queries: ``history/search/<query>``,
``search/<words>``. Any name can be looked up and lists nothing."""

from __future__ import annotations

from sessionfs.fs.nodes.base import STATIC, DirNode, Node
from sessionfs.view.names import decode_name

__all__ = ["QueryDir"]


class QueryDir(DirNode):
    """Lookup-only: ``<dir>/<query>`` exists for any query; the listing is empty.

    The name is percent-decoded (`decode_name`), so a query can hold what a file name
    cannot: ``%2F`` is ``/``; a ``%`` not followed by two hex digits stays as typed."""

    __slots__ = ()

    tier = STATIC

    def query_file(self, key: tuple[str, ...], query: str) -> Node | None:
        """The node that answers ``query`` (None: the query is not answered here)."""
        raise NotImplementedError

    async def lookup(self, name: str) -> Node | None:
        return self.query_file(self.child_key(name), decode_name(name))
