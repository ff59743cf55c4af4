"""Inode numbers for the rows of a `FileRows` listing, without a node per row:
``RowBlocks``.

A readdirplus makes the kernel hold an inode for every file listed, so every row
needs a number the daemon can answer for later. A listing gets a block of numbers
(``base + row``) and an array of the kernel's lookup counts; a request about one of
them makes that row's node then (`FileRows.node`). A block goes when the kernel holds
none of its inodes any more.

A listing of the same dir that only adds rows after those of the dir's last block (its
session was appended to) grows that block: the rows listed before keep their numbers,
so the kernel keeps their inodes, and the new rows get a span of numbers of their own.

The newest block of a dir also answers lookups of its names (the same file keeps its
number), until its session is reloaded from a replaced file or let go: its names may
then mean other files, and a lookup gets a number of its own.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterator

from sessionfs.fs.nodes.base import Node
from sessionfs.fs.nodes.file_rows import FileRows

__all__ = ["RowBlock", "RowBlocks"]


class RowBlock:
    """The inode numbers of one dir's listing: spans of consecutive numbers, each for
    consecutive rows (one span, unless the listing grew)."""

    __slots__ = ("counts", "current", "live", "rows", "spans")

    def __init__(self, rows: FileRows, base: int) -> None:
        self.rows = rows
        #: (first row, its inode number) per span, by row
        self.spans: list[tuple[int, int]] = [(0, base)]
        #: the kernel's lookup count per row
        self.counts = array("q", bytes(8 * len(rows)))
        #: rows the kernel holds (count > 0)
        self.live = 0
        #: whether its rows still show what the listing saw (`RowBlocks.detach`)
        self.current = True

    def inode(self, row: int) -> int:
        spans = self.spans
        if len(spans) == 1:
            return spans[0][1] + row
        first, base = spans[bisect.bisect_right(spans, row, key=lambda span: span[0]) - 1]
        return base + row - first

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
    """Every block the kernel holds inodes of, found by inode number through its spans
    (numbers are handed out ever higher, so spans are added in order)."""

    def __init__(self) -> None:
        #: per span: its first inode number; and (first number, rows, block, first row)
        self._bases: list[int] = []
        self._spans: list[tuple[int, int, RowBlock, int]] = []
        self._of_rows: dict[FileRows, RowBlock] = {}
        #: per listed dir, the block whose names lookups may use (and a new listing
        #: of the dir may grow)
        self._newest: dict[tuple[str, ...], RowBlock] = {}

    def block_for(self, rows: FileRows, allocate: Callable[[int], int]) -> RowBlock:
        """The block of ``rows``: its own, the dir's last one grown by the rows it
        lacks, or a new one; ``allocate(n)`` hands out ``n`` consecutive numbers."""
        block = self._of_rows.get(rows)
        if block is not None:
            return block
        parent = rows.parent.key
        block = self._newest.get(parent)
        if block is not None and rows.extends(block.rows):
            del self._of_rows[block.rows]
            grown = len(rows) - len(block.rows)
            if grown:
                base = allocate(grown)
                self._add_span(base, grown, block, len(block.rows))
                block.spans.append((len(block.rows), base))
                block.counts.extend(array("q", bytes(8 * grown)))
            block.rows = rows
        else:
            block = RowBlock(rows, allocate(len(rows)))
            self._add_span(block.spans[0][1], len(rows), block, 0)
            self._newest[parent] = block
        self._of_rows[rows] = block
        return block

    def find(self, inode: int) -> tuple[RowBlock, int] | None:
        """The block and row of ``inode``, if the kernel holds it as a row."""
        found = self._row_of(inode)
        if found is None or not found[0].counts[found[1]]:
            return None
        return found

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
        return None if row is None else block.inode(row)

    def remember(self, inode: int) -> bool:
        """One more kernel lookup of ``inode``; False when it is no row of a block."""
        found = self._row_of(inode)
        if found is None:
            return False
        block, row = found
        block.remember_rows(row, row + 1)
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
        blocks answer no lookup and grow no more."""
        self.stop_lookups(session)
        for block in self._of_rows.values():
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
            block.inode(row)
            for block in self._of_rows.values()
            if block.rows.session_key == session
            for row in block.live_rows()
        ]

    def keys_below(self, prefix: tuple[str, ...]) -> list[tuple[tuple[str, ...], int]]:
        """(key, inode) of every row the kernel holds below ``prefix``."""
        depth = len(prefix)
        found: list[tuple[tuple[str, ...], int]] = []
        for block in self._of_rows.values():
            parent = block.rows.parent.key
            if parent[:depth] != prefix:
                continue
            names = block.rows.names
            found.extend(((*parent, names[row]), block.inode(row)) for row in block.live_rows())
        return found

    def live(self) -> int:
        """How many inodes the kernel holds as rows of blocks."""
        return sum(block.live for block in self._of_rows.values())

    def _row_of(self, inode: int) -> tuple[RowBlock, int] | None:
        at = bisect.bisect_right(self._bases, inode) - 1
        if at < 0:
            return None
        base, length, block, first = self._spans[at]
        return (block, first + inode - base) if inode - base < length else None

    def _add_span(self, base: int, length: int, block: RowBlock, first: int) -> None:
        self._bases.append(base)
        self._spans.append((base, length, block, first))

    def _drop(self, block: RowBlock) -> None:
        kept = [span for span in self._spans if span[2] is not block]
        self._spans = kept
        self._bases = [span[0] for span in kept]
        self._of_rows.pop(block.rows, None)
        parent = block.rows.parent.key
        if self._newest.get(parent) is block:
            del self._newest[parent]
