"""Files written into ``append/`` leave no inode behind (issue 26: memory grows with the
work touched, not with the number of appends).

Nothing is ever kept under such a file's name, so once its last handle is released
nothing can reach it. The kernel would keep its name and inode anyway (a zero entry
timeout makes it look the name up again, but it drops the dentry only when memory runs
short), and the daemon a row and a node in its inode table until the kernel forgot it:
after 20,000 appends, 20,000 of each. Now the daemon drops the inode at the last
release and tells the kernel to drop the name; the root ``ctl``'s ``kernel_inodes``
(the table's live rows) stays where it was, however many files were written.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pyfuse3
import pytest
import trio
from support.agent_messages import user
from support.mount import COMMAND_TIMEOUT, MountFactory
from support.waiting import eventually
from support.write_setup import bad_lines, drop, errno_of, make_agent, read_ctl, session_dir
from test_append_stream import texts

from sessionfs.fs.nodes.base import DirNode, FileNode, Node, OpenFile, Stat
from sessionfs.fs.ops import GONE_NAMES_BATCH, SessionFsOperations

pytestmark = pytest.mark.timeout(300)

#: files written one by one through the mount: far more than the table's other rows
APPENDS = 2000
#: of which written by a real shell loop (``echo ... > append/sN.json``)
SHELL_APPENDS = 500
#: what the table may hold besides what it held before: the dirs looked up on the way
#: and the session's own files a check reads (``ctl``), never a row per append
SLACK = 20


def kernel_inodes(mount_path: Path) -> int:
    return int(read_ctl(mount_path)["kernel_inodes"])


def line(text: str) -> bytes:
    return orjson.dumps(user(text)) + b"\n"


@pytest.mark.fuse
def test_thousands_of_appends_leave_no_inodes(tmp_path: Path, mount_factory: MountFactory) -> None:
    agent_dir, file = make_agent(tmp_path)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    before_texts = texts(file)
    drop(d / "append", "warm.json", line("warm"))  # the session dir and append/ looked up
    before = kernel_inodes(mount.path)

    for n in range(APPENDS):
        drop(d / "append", f"m{n}.json", line(f"m {n}"))
    script = (
        f'i=0; while [ "$i" -lt {SHELL_APPENDS} ]; do '
        'printf \'{"role":"user","content":"s %s"}\\n\' "$i" > "append/s$i.json" || exit 1; '
        "i=$((i + 1)); done"
    )
    subprocess.run(["sh", "-c", script], cwd=d, check=True, timeout=COMMAND_TIMEOUT * 4)
    stream = os.open(d / "append" / "feed.stream", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:  # a stream stays open for many writes, its inode with it
        for n in range(50):
            os.write(stream, line(f"streamed {n}"))
        assert kernel_inodes(mount.path) <= before + SLACK + 1
    finally:
        os.close(stream)

    # The table holds what it held before, not a row per file written.
    eventually(
        lambda: kernel_inodes(mount.path) <= before + SLACK,
        f"kernel_inodes at most {before + SLACK} (before: {before})",
        within=30.0,
        every=0.2,
    )
    # Every file's line is in the session file, in the order written.
    written = (
        [f"m {n}" for n in range(APPENDS)]
        + [f"s {n}" for n in range(SHELL_APPENDS)]
        + [f"streamed {n}" for n in range(50)]
    )
    assert texts(file) == [*before_texts, "warm", *written]
    assert bad_lines(file) == []
    # Nothing is kept under the names: append/ lists empty, a name is not there.
    assert os.listdir(d / "append") == []
    for name in ("m0.json", f"m{APPENDS - 1}.json", "s7.json", "feed.stream"):
        assert errno_of(lambda name=name: os.stat(d / "append" / name)) == errno.ENOENT
    # A name written again is a new file (not an open of a dropped inode).
    drop(d / "append", "m0.json", line("m 0 again"))
    assert texts(file)[-1] == "m 0 again"


@pytest.mark.fuse
def test_a_reopen_through_proc_while_open_keeps_the_inode(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    append_dir = session_dir(mount_factory(agent_dir), file) / "append"
    first = os.open(append_dir / "x.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    second = -1
    try:
        os.write(first, line("through the name"))
        second = os.open(f"/proc/self/fd/{first}", os.O_WRONLY | os.O_TRUNC)
        os.write(second, line("through /proc"))
        os.close(first)  # one handle of two: the inode stays
        first = -1
        time.sleep(1.5)  # past the attributes' timeout: the next fstat asks the daemon
        assert stat.S_ISREG(os.fstat(second).st_mode)  # (ESTALE had its inode gone)
        assert texts(file)[-1] == "through the name"
    finally:
        for fd in (first, second):
            if fd >= 0:
                os.close(fd)
    assert texts(file)[-2:] == ["through the name", "through /proc"]
    assert errno_of(lambda: os.stat(append_dir / "x.json")) == errno.ENOENT


# -- the ops layer driven directly: the orders of requests a mount cannot time -------


class Dropped(FileNode):
    __slots__ = ()
    gone_at_close = True

    def read_only_reason(self) -> str | None:
        return None

    async def stat(self) -> Stat:
        return Stat(0, 0)

    async def open(self, flags: int) -> OpenFile:
        return OpenFile()


class Box(DirNode):
    __slots__ = ()

    def read_only_reason(self) -> str | None:
        return None

    async def create(self, name: str, flags: int, mode: int) -> tuple[Node, OpenFile]:
        return Dropped(None, self.child_key(name)), OpenFile()  # type: ignore[arg-type]


def operations() -> SessionFsOperations:
    return SessionFsOperations(Box(None, ()), read_only=False)  # type: ignore[arg-type]


async def create(ops: SessionFsOperations, name: bytes) -> tuple[int, int]:
    """fh, inode of a new file."""
    info, attrs = await ops.create(pyfuse3.ROOT_INODE, name, 0o644, os.O_WRONLY, None)  # type: ignore[arg-type]
    return info.fh, attrs.st_ino


def test_the_inode_goes_at_the_last_release_and_its_later_forget_is_ignored() -> None:
    ops = operations()

    async def scenario() -> None:
        fh, inode = await create(ops, b"a.json")
        reopened = await ops.open(inode, os.O_WRONLY, None)  # type: ignore[arg-type]
        await ops.release(fh)
        assert ops.table.node(inode).key == ("a.json",)  # still open once
        await ops.release(reopened.fh)
        assert inode not in ops.table.nodes and ("a.json",) not in ops.table.by_key
        await ops.forget([(inode, 1)])  # the kernel lets go of it later: nothing to do
        assert ops.kernel_inodes() == 1  # the root
        fh, again = await create(ops, b"a.json")  # the same name: a new inode
        assert again != inode
        await ops.release(fh)
        assert ops.kernel_inodes() == 1

    trio.run(scenario)


def test_a_forget_before_the_release_drops_it_once() -> None:
    """Under memory pressure the kernel may evict the inode right after the close and
    its forget (sent first) overtake the release."""
    ops = operations()

    async def scenario() -> None:
        fh, inode = await create(ops, b"a.json")
        await ops.forget([(inode, 1)])
        assert inode not in ops.table.nodes
        await ops.release(fh)
        assert ops.kernel_inodes() == 1

    trio.run(scenario)


def test_two_files_of_one_name_open_at_once_share_the_inode_until_both_close() -> None:
    ops = operations()

    async def scenario() -> None:
        fh1, inode = await create(ops, b"a.json")
        fh2, same = await create(ops, b"a.json")  # the kernel gets the inode it holds
        assert same == inode
        await ops.release(fh1)
        assert ops.table.node(inode).key == ("a.json",)
        await ops.release(fh2)
        assert ops.kernel_inodes() == 1

    trio.run(scenario)


class Recorder:
    """Stands in for the `Invalidator`: what it was asked to send the kernel."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, bytes]]] = []

    def invalidate_names(self, names: list[tuple[int, bytes]]) -> None:
        self.batches.append(names)


def test_the_kernel_is_told_to_drop_the_names_in_batches() -> None:
    ops = operations()
    ops.invalidator = recorder = Recorder()  # type: ignore[assignment]

    async def write(name: bytes) -> None:
        fh, _ = await create(ops, name)
        await ops.release(fh)

    async def scenario() -> None:
        for _ in range(3):  # one name written again and again: one name to drop
            await write(b"same.json")
        for n in range(GONE_NAMES_BATCH - 2):
            await write(b"m%d.json" % n)
        assert recorder.batches == []
        await write(b"last.json")
        names = [b"same.json", *(b"m%d.json" % n for n in range(GONE_NAMES_BATCH - 2))]
        assert recorder.batches == [[(pyfuse3.ROOT_INODE, name) for name in [*names, b"last.json"]]]
        assert ops.kernel_inodes() == 1

    trio.run(scenario)
