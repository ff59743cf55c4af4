"""`IdleFiles`: a cache file's descriptor is kept between a release and the next open
of the same file, handed out only while the file is still there at its validated
identity, and never kept past its bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
import trio.testing

from core.file_identity import FileIdentity
from sessionfs.fs import idle_files
from sessionfs.fs.idle_files import IdleFiles


def opened(path: Path, data: bytes = b"rendered") -> tuple[int, FileIdentity]:
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return fd, FileIdentity.of(os.fstat(fd))


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_descriptor_given_back_is_taken_again_for_the_same_file_only(tmp_path: Path) -> None:
    idle = IdleFiles()
    fd, identity = opened(tmp_path / "a")
    other_fd, other = opened(tmp_path / "b")
    idle.give_back(identity, fd)
    assert idle.take(other) is None  # another file
    assert idle.take(identity) == fd  # the very descriptor
    assert idle.take(identity) is None  # now the caller's: not twice
    os.close(fd)
    os.close(other_fd)


def test_a_file_scribbled_on_in_place_is_not_handed_out(tmp_path: Path) -> None:
    idle = IdleFiles()
    path = tmp_path / "a"
    fd, identity = opened(path)
    idle.give_back(identity, fd)
    path.write_bytes(b"not a head at all, and longer")  # in place: the same inode
    assert idle.take(identity) is None
    assert not is_open(fd)  # closed, not leaked


def test_a_file_removed_or_replaced_is_not_handed_out(tmp_path: Path) -> None:
    idle = IdleFiles()
    for name in ("removed", "replaced"):
        path = tmp_path / name
        fd, identity = opened(path)
        idle.give_back(identity, fd)
        if name == "removed":
            path.unlink()
        else:
            (tmp_path / "new").write_bytes(b"rendered")  # the same size, a new file
            os.replace(tmp_path / "new", path)
        assert idle.take(identity) is None  # the cache dir as it is now
        assert not is_open(fd)


def test_two_handles_of_one_file_keep_one_descriptor(tmp_path: Path) -> None:
    idle = IdleFiles()
    first, identity = opened(tmp_path / "a")
    second = os.open(tmp_path / "a", os.O_RDONLY)
    idle.give_back(identity, first)
    idle.give_back(identity, second)
    assert len(idle) == 1 and not is_open(first)
    idle.close_all()
    assert not is_open(second)


def test_the_least_recent_go_past_the_count_the_bytes_and_the_idle_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    monkeypatch.setattr(idle_files.time, "monotonic", lambda: clock[0])
    idle = IdleFiles(kept=2, kept_bytes=20, idle_seconds=30.0)
    fds = []
    for name in "abc":
        fd, identity = opened(tmp_path / name, b"x" * 8)
        fds.append(fd)
        idle.give_back(identity, fd)
    assert len(idle) == 2 and not is_open(fds[0]) and is_open(fds[1])  # the count
    big, identity = opened(tmp_path / "d", b"x" * 16)
    idle.give_back(identity, big)  # 8 + 16 > 20: c goes too, then b
    assert len(idle) == 1 and not is_open(fds[1]) and not is_open(fds[2])
    huge, identity = opened(tmp_path / "e", b"x" * 21)
    idle.give_back(identity, huge)  # larger than all the bytes kept: closed
    assert not is_open(huge) and is_open(big)
    clock[0] += 30.0
    late, identity = opened(tmp_path / "f")
    idle.give_back(identity, late)  # d was idle too long
    assert not is_open(big) and len(idle) == 1
    idle.close_all()
    assert not is_open(late) and len(idle) == 0


def test_the_daemons_sweep_closes_idle_descriptors_and_all_of_them_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount nobody uses any more holds no descriptor past the idle time (nor the
    space of a cache file removed meanwhile), and none once it is unmounted."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    monkeypatch.setattr(idle_files.time, "monotonic", clock.current_time)
    idle = IdleFiles(idle_seconds=30.0)
    fd, identity = opened(tmp_path / "a")
    idle.give_back(identity, fd)
    (tmp_path / "a").unlink()  # removed while kept: its space is held until closed
    seen: list[bool] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(idle_files.close_idle_files, idle)
            await trio.sleep(10)  # not idle long enough yet
            seen.append(is_open(fd))
            await trio.sleep(30)  # past the idle time: a sweep closed it
            seen.append(is_open(fd))
            fd2, identity2 = opened(tmp_path / "b")
            idle.give_back(identity2, fd2)
            nursery.cancel_scope.cancel()  # unmounted: everything closed
        seen.append(is_open(fd2))

    trio.run(main, clock=clock)
    assert seen == [True, False, False]
    assert len(idle) == 0
