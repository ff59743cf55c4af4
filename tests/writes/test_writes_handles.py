"""The open-file handles of writable files: when they commit, and what they refuse."""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from typing import Any

import pyfuse3
import pytest
import trio

from sessionfs.fs.nodes.write_handles import CTL_LIMIT, BufferedWriteHandle, LineBatchHandle
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes.append_parse import reject_oversize


class Recorder:
    def __init__(self, fail: WriteRejected | None = None) -> None:
        self.commits: list[bytes] = []
        self.errors: list[str] = []
        self.fail = fail

    async def commit(self, data: bytes) -> None:
        if self.fail is not None:
            raise self.fail
        self.commits.append(data)

    async def on_error(self, exc: WriteRejected) -> None:
        self.errors.append(exc.reason)


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return trio.run(fn)


def fuse_errno(fn: Callable[[], Awaitable[Any]]) -> int:
    with pytest.raises(pyfuse3.FUSEError) as info:
        trio.run(fn)
    return info.value.errno


def buffered(recorder: Recorder, too_big: Callable[[int], None] = reject_oversize) -> Any:
    return BufferedWriteHandle(recorder.commit, too_big=too_big, on_error=recorder.on_error)


def test_sequential_writes_commit_once_at_flush() -> None:
    recorder = Recorder()
    handle = buffered(recorder)

    async def go() -> None:
        assert await handle.write(0, b"ab") == 2
        assert await handle.write(2, b"cd") == 2
        assert recorder.commits == []
        await handle.flush()
        await handle.flush()  # a second close of a dup'd fd: nothing new
        await handle.write(4, b"ef")
        await handle.flush()

    run(go)
    assert recorder.commits == [b"abcd", b"ef"]


def test_never_written_commits_nothing() -> None:
    recorder = Recorder()
    run(buffered(recorder).flush)
    assert recorder.commits == []


def test_first_write_may_start_anywhere_then_must_be_sequential() -> None:
    recorder = Recorder()
    handle = buffered(recorder)

    async def go() -> None:
        await handle.write(100, b"x")  # `>> file` writes at the old size
        await handle.write(101, b"y")
        await handle.write(50, b"z")

    assert fuse_errno(go) == errno.EINVAL
    assert "start to end" in recorder.errors[0]
    # The rest of a file with a hole is refused too, and nothing is committed.
    assert fuse_errno(handle.flush) == errno.EINVAL
    assert recorder.commits == []


def test_oversize_is_efbig_at_write_time() -> None:
    recorder = Recorder()

    def limit(size: int) -> None:
        if size > 4:
            raise WriteRejected(errno.EFBIG, "too big")

    handle = buffered(recorder, limit)

    async def go() -> None:
        await handle.write(0, b"1234")
        await handle.write(4, b"5")

    assert fuse_errno(go) == errno.EFBIG
    assert fuse_errno(handle.flush) == errno.EFBIG
    assert recorder.commits == [] and recorder.errors == ["too big"]


def test_commit_refusal_becomes_the_flush_errno() -> None:
    recorder = Recorder(fail=WriteRejected(errno.ENOENT, "no such entry"))
    handle = buffered(recorder)

    async def go() -> None:
        await handle.write(0, b"x")
        await handle.flush()

    assert fuse_errno(go) == errno.ENOENT
    assert recorder.errors == ["no such entry"]


def test_ctl_runs_complete_lines_at_each_write() -> None:
    recorder = Recorder()
    handle = LineBatchHandle(recorder.commit, on_error=recorder.on_error)

    async def go() -> None:
        await handle.write(0, b"reset\nbran")
        assert recorder.commits == [b"reset\n"]
        await handle.write(10, b"ch x\n")
        await handle.write(15, b"flush")
        await handle.flush()
        await handle.flush()

    run(go)
    assert recorder.commits == [b"reset\n", b"branch x\n", b"flush"]


def test_ctl_refusal_is_the_write_errno() -> None:
    recorder = Recorder(fail=WriteRejected(errno.EINVAL, "unknown command"))
    handle = LineBatchHandle(recorder.commit, on_error=recorder.on_error)
    assert fuse_errno(lambda: handle.write(0, b"bogus\n")) == errno.EINVAL
    assert recorder.errors == ["unknown command"]


def test_ctl_without_a_line_end_is_bounded() -> None:
    recorder = Recorder()
    handle = LineBatchHandle(recorder.commit, on_error=recorder.on_error)
    assert fuse_errno(lambda: handle.write(0, b"x" * (CTL_LIMIT + 1))) == errno.EFBIG
    run(handle.flush)
    assert recorder.commits == []
