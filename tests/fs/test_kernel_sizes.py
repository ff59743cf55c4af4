"""`KernelSizes`: when an open snapshot may be read through the kernel's page cache
(the FUSE behaviour is driven in test_growing_renderings.py; these are its rules)."""

from __future__ import annotations

from sessionfs.fs.kernel_sizes import KernelSizes
from sessionfs.fs.nodes.base import BytesHandle

INODE = 7


def snapshot(size: int, version: str) -> BytesHandle:
    return BytesHandle(b"x" * size, version=version)


def test_only_a_snapshot_of_the_size_the_kernel_holds_uses_the_page_cache() -> None:
    sizes = KernelSizes()
    assert not sizes.page_cache_ok(INODE, snapshot(10, "v1"))  # nothing sent yet
    sizes.told(INODE, 10, trusted=True)
    assert sizes.page_cache_ok(INODE, snapshot(10, "v1"))
    assert not sizes.page_cache_ok(INODE, snapshot(12, "v2"))  # grew since: cut at 10
    sizes.told(INODE, 0, trusted=False)  # a placeholder the kernel checks before use
    assert sizes.page_cache_ok(INODE, snapshot(12, "v2"))
    sizes.forget(INODE)
    assert not sizes.page_cache_ok(INODE, snapshot(12, "v2"))


def test_two_versions_never_share_the_page_cache() -> None:
    sizes = KernelSizes()
    old = snapshot(10, "v1")
    sizes.told(INODE, 10, trusted=True)
    sizes.opened(INODE, old)
    assert sizes.page_cache_ok(INODE, snapshot(10, "v1"))
    assert not sizes.page_cache_ok(INODE, snapshot(10, "v2"))  # same size, other bytes
    sizes.released(INODE, old)
    assert sizes.page_cache_ok(INODE, snapshot(10, "v2"))


def test_the_size_sent_never_cuts_a_snapshot_being_read() -> None:
    sizes = KernelSizes()
    reader = snapshot(100, "v1")
    sizes.told(INODE, 100, trusted=True)
    sizes.opened(INODE, reader)
    assert sizes.size_to_tell(INODE, 60) == 100  # a shorter rendering meanwhile
    assert sizes.size_to_tell(INODE, 150) == 150
    sizes.released(INODE, reader)
    assert sizes.size_to_tell(INODE, 60) == 60


def test_a_short_read_leaves_the_kernels_size_unknown() -> None:
    sizes = KernelSizes()
    sizes.told(INODE, 150, trusted=True)  # sent while a 100-byte snapshot was read
    sizes.read_returned(INODE, 0, 4096, 150)  # ends where the kernel thinks: no change
    assert sizes.page_cache_ok(INODE, snapshot(150, "v2"))
    sizes.read_returned(INODE, 0, 4096, 100)  # the kernel now holds 100, unasked
    assert not sizes.page_cache_ok(INODE, snapshot(150, "v2"))
