"""Unit tests (no mount): the inode numbers of a big listing's rows (`RowBlocks`): made
per listing, found by number, grown by an append, let go when the kernel forgets them,
and no longer used for lookups once their session is replaced or let go."""

from __future__ import annotations

from typing import cast

from sessionfs.fs.nodes.base import DirNode, MountContext, Node, Stat
from sessionfs.fs.nodes.file_rows import FileRows
from sessionfs.fs.row_blocks import RowBlocks

DIR = ("sessions", "p", "s", "entries")


class Session(DirNode):
    """A dir of one session (what `FileRows` asks its parent)."""

    __slots__ = ()

    @property
    def session_key(self) -> tuple[str, str]:
        return ("p", "s")


class Rows(FileRows):
    """Rows of files ``f<i>.json`` whose nodes are plain files of the dir."""

    def index_of(self, name: str) -> int | None:
        return self.names.index(name) if name in self.names else None

    def node(self, index: int, listed: bool = True) -> Node:
        node = Node(self.parent.ctx, self.parent.child_key(self.names[index]))
        node.nlookup = int(listed)  # tells the test which way it was made
        return node


def rows(count: int, size: int = 10) -> Rows:
    parent = Session(cast(MountContext, None), DIR)
    names = [f"f{i}.json" for i in range(count)]
    return Rows(parent, names, [size] * count, [i * 1000 for i in range(count)])


class Numbers:
    """Inode numbers handed out as the inode table does, past a few others."""

    def __init__(self) -> None:
        self.next = 100

    def __call__(self, count: int) -> int:
        first, self.next = self.next, self.next + count + 7  # others numbered between
        return first


def test_rows_are_numbered_found_and_let_go() -> None:
    blocks, numbers = RowBlocks(), Numbers()
    listing = rows(5)
    block = blocks.block_for(listing, numbers)
    assert [block.inode(row) for row in range(5)] == [100, 101, 102, 103, 104]
    assert blocks.find(102) is None  # not sent to the kernel yet
    block.remember_rows(0, 5)
    assert blocks.find(102) == (block, 2) and blocks.find(105) is None
    node = blocks.node(103)
    assert node is not None and node.key == (*DIR, "f3.json") and node.nlookup == 1
    assert blocks.inode_of((*DIR, "f4.json")) == 104 and blocks.live() == 5
    assert listing.stat(4) == Stat(10, 4000) and listing[1][0] == "f1.json"
    for inode in range(100, 105):
        blocks.forget(inode, 1)
    assert blocks.live() == 0 and blocks.find(100) is None
    assert blocks.inode_of((*DIR, "f4.json")) is None  # the block is gone
    again = blocks.block_for(listing, numbers)
    assert again is not block and again.inode(0) == 112


def test_an_append_grows_the_block_and_keeps_the_numbers() -> None:
    blocks, numbers = RowBlocks(), Numbers()
    block = blocks.block_for(rows(3), numbers)
    block.remember_rows(0, 3)
    grown = blocks.block_for(rows(5), numbers)  # the same files and two more
    assert grown is block
    assert [block.inode(row) for row in range(5)] == [100, 101, 102, 110, 111]
    block.remember_rows(0, 5)
    assert blocks.find(110) == (block, 3) and blocks.find(111) == (block, 4)
    assert blocks.find(103) is None  # numbers between the spans are others'
    assert blocks.inode_of((*DIR, "f4.json")) == 111 and blocks.live() == 5
    other = blocks.block_for(rows(5, size=11), numbers)  # other files: a new block
    assert other is not block and other.inode(0) == 119


def test_replaced_or_let_go_sessions_answer_no_lookup() -> None:
    blocks, numbers = RowBlocks(), Numbers()
    block = blocks.block_for(rows(2), numbers)
    block.remember_rows(0, 2)
    blocks.stop_lookups(("p", "s"))  # let go: the kernel's inodes still answer
    assert blocks.inode_of((*DIR, "f1.json")) is None
    node = blocks.node(101)
    assert node is not None and node.nlookup == 1
    blocks.detach(("p", "s"))  # replaced: the rows work their attributes out again
    node = blocks.node(101)
    assert node is not None and node.nlookup == 0
    assert blocks.inodes_of(("p", "s")) == [100, 101]
    assert [key for key, _ in blocks.keys_below(("sessions", "p"))] == [
        (*DIR, "f0.json"),
        (*DIR, "f1.json"),
    ]
