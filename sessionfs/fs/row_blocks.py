"""Inode numbers for the rows of a `FileRows` listing, without a node per row:
``RowBlocks``.

A readdirplus makes the kernel hold an inode for every file listed, so every row
needs a number the daemon can answer for later. A listing gets one block of numbers
(``base + row``) and an array of the kernel's lookup counts; a request about one of
them makes that row's node then (`FileRows.node`). A block goes when the kernel holds
none of its inodes any more.

The newest block of a dir also answers lookups of its names (the same file keeps its
number), until its session is reloaded from a replaced file or let go (`detach`): its
names may then mean other files, and a lookup gets a number of its own.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator

from sessionfs.fs.nodes.base import Node
from sessionfs.fs.nodes.file_rows import FileRows

__all__ = ["RowBlock", "RowBlocks"]


class RowBlock:
    """The inode numbers ``base`` .. ``base + len(rows) - 1`` of one listing."""

    __slots__ = ("base", "counts", "current", "live", "rows")

    def __init__(self, rows: FileRows, base: int) -> None:
        self.rows = rows
        self.base = base
        #: the kernel's lookup count per row
        self.counts = array("q", bytes(8 * len(rows)))
        #: rows the kernel holds (count > 0)
        self.live = 0
        #: whether its rows still show what the listing saw (`RowBlocks.detach`)
        self.current = True

    def remember_rows(self, start: int, stop: int) -> None:
        """One more kernel lookup of each row in ``start`` .. ``stop - 1`` (a
        readdirplus reply)."""
        counts = self.counts
        for row in range(start, stop):
            if not counts[row]:
                self.live += 1
            counts[row] += 1

    def live_rows(self) -> Iterator[int]:
        return (row for row, count in enumerate(self.counts) if count)


class RowBlocks:
    """Every block the kernel holds inodes of, found by inode number (blocks are made
    with ever higher numbers, so their bases stay sorted)."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._blocks: list[RowBlock] = []
        self._of_rows: dict[FileRows, RowBlock] = {}
        #: per listed dir, the block whose names lookups may use
        self._newest: dict[tuple[str, ...], RowBlock] = {}

    def block_for(self, rows: FileRows, base: int) -> RowBlock:
        """The block of ``rows``; a new one starting at ``base`` (the caller then
        numbers nothing else below ``base + len(rows)``) if it has none."""
        block = self._of_rows.get(rows)
        if block is None:
            block = RowBlock(rows, base)
            self._bases.append(base)
            self._blocks.append(block)
            self._of_rows[rows] = block
            self._newest[rows.parent.key] = block
        return block

    def has(self, rows: FileRows) -> bool:
        return rows in self._of_rows

    def find(self, inode: int) -> tuple[RowBlock, int] | None:
        """The block and row of ``inode``, if the kernel holds it as a row."""
        at = bisect.bisect_right(self._bases, inode) - 1
        if at < 0:
            return None
        block = self._blocks[at]
        row = inode - block.base
        if row >= len(block.counts) or not block.counts[row]:
            return None
        return block, row

    def node(self, inode: int) -> Node | None:
        found = self.find(inode)
        if found is None:
            return None
        block, row = found
        return block.rows.node(row, listed=block.current)

    def inode_of(self, key: tuple[str, ...]) -> int | None:
        """The number of the file ``key`` when the newest block of its dir lists it."""
        block = self._newest.get(key[:-1])
        if block is None:
            return None
        row = block.rows.index_of(key[-1])
        return None if row is None else block.base + row

    def remember(self, inode: int) -> bool:
        """One more kernel lookup of ``inode``; False when it is no row of a block."""
        block = self._block_of(inode)
        if block is None:
            return False
        block.remember_rows(inode - block.base, inode - block.base + 1)
        return True

    def forget(self, inode: int, count: int) -> None:
        found = self.find(inode)
        if found is None:
            return
        block, row = found
        block.counts[row] = left = max(0, block.counts[row] - count)
        if left:
            return
        block.live -= 1
        if block.live == 0:
            self._drop(block)

    def detach(self, session: tuple[str, str]) -> None:
        """``session`` was reloaded from a replaced file: its blocks' rows may show
        other files now, so their nodes work their attributes out again, and its
        blocks answer no lookup."""
        self.stop_lookups(session)
        for block in self._blocks:
            if block.rows.session_key == session:
                block.current = False

    def stop_lookups(self, session: tuple[str, str]) -> None:
        """``session`` was let go: its blocks serve the inodes the kernel still holds,
        but a lookup gets a number of its own (the file may be replaced meanwhile)."""
        for parent, block in list(self._newest.items()):
            if block.rows.session_key == session:
                del self._newest[parent]

    def inodes_of(self, session: tuple[str, str]) -> list[int]:
        """Every inode the kernel holds of ``session``'s blocks."""
        return [
            block.base + row
            for block in self._blocks
            if block.rows.session_key == session
            for row in block.live_rows()
        ]

    def keys_below(self, prefix: tuple[str, ...]) -> list[tuple[tuple[str, ...], int]]:
        """(key, inode) of every row the kernel holds below ``prefix``."""
        depth = len(prefix)
        found: list[tuple[tuple[str, ...], int]] = []
        for block in self._blocks:
            parent = block.rows.parent.key
            if parent[:depth] != prefix:
                continue
            names = block.rows.names
            found.extend(((*parent, names[row]), block.base + row) for row in block.live_rows())
        return found

    def live(self) -> int:
        """How many inodes the kernel holds as rows of blocks."""
        return sum(block.live for block in self._blocks)

    def _block_of(self, inode: int) -> RowBlock | None:
        at = bisect.bisect_right(self._bases, inode) - 1
        if at < 0:
            return None
        block = self._blocks[at]
        return block if inode - block.base < len(block.counts) else None

    def _drop(self, block: RowBlock) -> None:
        at = self._blocks.index(block)
        del self._blocks[at]
        del self._bases[at]
        self._of_rows.pop(block.rows, None)
        parent = block.rows.parent.key
        if self._newest.get(parent) is block:
            del self._newest[parent]
