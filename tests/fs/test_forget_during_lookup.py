"""A forget that arrives while a lookup of the same name is being answered (issue 26).

When something drops the kernel's caches during a walk (``drop_caches``, memory
pressure), the kernel sends FORGET for the inodes it let go of and, as the walk goes
on, looks their names up again; the two may cross in the daemon. The lookup had given
the name its inode number, the forget dropped it while the reply's attributes were
made, and the lookup's count of the kernel's reference then failed: the file
answered EIO (seen in a cold read of every ``entries/*.json``). The reply brings the
inode back: the kernel holds it once more, and it answers as before.

The ops layer is driven directly (no mount: the race cannot be timed through the
kernel); the file's attributes wait until the test has sent the forget.
"""

from __future__ import annotations

import pyfuse3
import pytest
import trio

from sessionfs.fs.nodes.base import DirNode, FileNode, Node, Stat
from sessionfs.fs.ops import SessionFsOperations

pytestmark = pytest.mark.timeout(30)


class GatedFile(FileNode):
    """A file whose attributes wait for ``gate`` once it is closed."""

    def __init__(self, root: Root, key: tuple[str, ...]) -> None:
        super().__init__(None, key)  # type: ignore[arg-type]  # no MountContext needed
        self.root = root

    async def stat(self) -> Stat:
        if self.root.gate is not None:
            await self.root.gate.wait()
        return Stat(5, 0)

    async def content(self) -> bytes:
        return b"hello"


class Root(DirNode):
    def __init__(self) -> None:
        super().__init__(None, ())  # type: ignore[arg-type]
        self.gate: trio.Event | None = None

    async def lookup(self, name: str) -> Node | None:
        return GatedFile(self, (name,)) if name == "f" else None


def test_a_lookup_answered_while_its_inode_is_forgotten_keeps_it() -> None:
    root = Root()
    ops = SessionFsOperations(root, read_only=True)

    async def lookup() -> pyfuse3.EntryAttributes:
        return await ops.lookup(pyfuse3.ROOT_INODE, b"f", None)  # type: ignore[arg-type]

    async def scenario() -> None:
        first = await lookup()  # the kernel holds the inode once
        inode = first.st_ino
        root.gate = trio.Event()
        replies: list[pyfuse3.EntryAttributes] = []

        async def look_again() -> None:
            replies.append(await lookup())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(look_again)
            await trio.sleep(0.05)  # the lookup is making its reply's attributes
            await ops.forget([(inode, 1)])  # the kernel let go of its first lookup
            root.gate.set()
        assert [reply.st_ino for reply in replies] == [inode]
        assert ops.table.nodes[inode].nlookup == 1  # the reply's: the kernel holds it
        attrs = await ops.getattr(inode, None)  # type: ignore[arg-type]
        assert attrs.st_size == 5
        fh = (await ops.open(inode, 0, None)).fh  # type: ignore[arg-type]
        assert await ops.read(fh, 0, 100) == b"hello"
        await ops.forget([(inode, 1)])  # and once the kernel lets go, it goes
        assert inode not in ops.table.nodes and ("f",) not in ops.table.by_key

    trio.run(scenario)
