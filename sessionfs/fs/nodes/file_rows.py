"""A directory listing of many files (or symlinks) alike, whose nodes are made only
when asked: ``FileRows``.

``entries/`` of a 200,000-entry session lists 200,000 files. A node per file, with
its key and its stat, cost ~450 bytes and a few microseconds each before the kernel
saw the first name; and the kernel's readdirplus wants only a name, a size and a time
per file (issue 26 point 6). A ``FileRows`` holds those in arrays; ``ops`` answers a
readdirplus from them and numbers the rows with one block of inode numbers
(`sessionfs.fs.row_blocks`). A node is made when the kernel asks about one file.
``path/`` lists its symlinks the same way (a row's size is its target's length).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from sessionfs.fs.nodes.base import DirNode, Node, Stat

__all__ = ["FileRows"]


class FileRows(Sequence[tuple[str, Node]]):
    """The rows of one listing of ``parent``: file ``names`` with their ``sizes`` and
    ``mtimes_ns``. As a sequence, ``(name, node)`` pairs like any listing (each node
    made on the spot); ``ops`` reads the arrays instead."""

    #: what a row costs the session's accounting (`LoadedSession.memory_cost`): its
    #: size and time here, and the kernel's lookup count in its `RowBlock`
    bytes_per_row = 24

    def __init__(
        self,
        parent: DirNode,
        names: Sequence[str],
        sizes: Sequence[int],
        mtimes_ns: Sequence[int],
    ) -> None:
        self.parent = parent
        self.names = names
        self.sizes = sizes
        self.mtimes_ns = mtimes_ns

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, index: int) -> tuple[str, Node]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, Node]]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, Node] | Sequence[tuple[str, Node]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self.names[index], self.node(index)

    @property
    def session_key(self) -> tuple[str, str] | None:
        return self.parent.session_key

    def stat(self, index: int) -> Stat:
        return Stat(self.sizes[index], self.mtimes_ns[index])

    def extends(self, before: FileRows) -> bool:
        """Whether this listing shows the rows of ``before`` (names, sizes, times)
        first, in the same order: the same files, more after them (an append), so the
        rows listed before may keep their inode numbers (`RowBlocks.block_for`)."""
        count = len(before)
        return (
            len(self) >= count
            and self.names[:count] == before.names
            and self.sizes[:count] == before.sizes
            and self.mtimes_ns[:count] == before.mtimes_ns
        )

    def index_of(self, name: str) -> int | None:
        """The row of the file ``name`` (``None``: not listed)."""
        raise NotImplementedError

    def node(self, index: int, listed: bool = True) -> Node:
        """The node of row ``index``; ``listed``: it may answer the row's stat (False:
        it works its attributes out again, the file may have changed since)."""
        raise NotImplementedError
