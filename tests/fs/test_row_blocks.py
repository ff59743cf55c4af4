"""Unit tests (no mount): the inode numbers of a big listing's rows (`RowBlocks`): made
per listing, found by number, grown by an append, let go when the kernel forgets them,
and no longer used for lookups once their session is replaced or let go; and the rows
of ``path/`` (`PathRows`): names made when read, found by name, grown only by an
append to the same path."""

from __future__ import annotations

from typing import cast

from sessionfs.fs.nodes.base import DirNode, MountContext, Node, Stat
from sessionfs.fs.nodes.entries import EntryLink, PathDir, PathRows
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


def path_rows(entries: int, path: list[int], mtime_ns: int) -> PathRows:
    parent = PathDir(cast(MountContext, None), (*DIR[:-1], "path"))
    return PathRows(parent, [f"e{i}.json" for i in range(entries)], path, mtime_ns)


def test_path_rows_name_size_and_find_their_links() -> None:
    listing = path_rows(12, [0, 1, 2, 3, 5, 8], 7)
    assert list(listing.names) == [f"{n:04d}-e{i}.json" for n, i in enumerate([0, 1, 2, 3, 5, 8])]
    assert listing.names[-1] == "0005-e8.json" and listing.names[1:3] == list(listing.names)[1:3]
    assert listing.stat(4) == Stat(len("../entries/e5.json"), 7)
    assert listing.index_of("0004-e5.json") == 4
    for wrong in ("0004-e4.json", "004-e5.json", "0006-e9.json", "00a4-e5.json", "e5.json", ""):
        assert listing.index_of(wrong) is None, wrong
    node = listing.node(5)
    assert isinstance(node, EntryLink) and node.key[-1] == "0005-e8.json"
    assert node.key[:-1] == listing.parent.key


def test_path_rows_grow_their_block_only_by_an_append_to_the_same_path() -> None:
    blocks, numbers = RowBlocks(), Numbers()
    before = path_rows(10, list(range(10)), 7)
    block = blocks.block_for(before, numbers)
    block.remember_rows(0, 10)
    appended = path_rows(12, list(range(12)), 8)  # the session's time moved on
    assert appended.extends(before) and blocks.block_for(appended, numbers) is block
    assert blocks.inode_of((*DIR[:-1], "path", "0011-e11.json")) == block.inode(11)
    assert not path_rows(12, [0, 1, 2, 11], 8).extends(appended)  # leaf moved elsewhere
    assert not path_rows(12, list(range(9)), 8).extends(appended)  # leaf moved back
    renamed = PathRows(before.parent, [f"x{i}.json" for i in range(12)], list(range(12)), 8)
    assert not renamed.extends(appended)  # other entries (a replaced file)
    assert not path_rows(10_001, list(range(10_001)), 8).extends(appended)  # 5 digits now
