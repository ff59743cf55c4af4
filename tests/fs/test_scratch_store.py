"""The bounds of the mount's scratch files (`sessionfs.fs.scratch`), without a mount:
a removed file still open keeps counting until its last handle is closed."""

from __future__ import annotations

import errno

import pytest

from sessionfs.fs.scratch import ScratchFiles
from sessionfs.view.refusal import WriteRejected

DIR = ("sessions", "p", "s")


def refused(action: object) -> int:
    try:
        action()  # type: ignore[operator]
    except WriteRejected as exc:
        return exc.errno
    return 0


def test_a_file_over_its_bound_is_efbig() -> None:
    store = ScratchFiles(file_limit=10, count_limit=4, total_limit=100)
    file = store.create(DIR, "a", 0o644)
    assert file.mode == 0o600  # never more than its owner's read and write
    store.write(file, 0, b"x" * 10, "a")
    assert refused(lambda: store.write(file, 10, b"y", "a")) == errno.EFBIG
    assert refused(lambda: store.truncate(file, 11, "a")) == errno.EFBIG
    assert bytes(file.data) == b"x" * 10


def test_removed_but_open_files_count_until_closed() -> None:
    store = ScratchFiles(file_limit=10, count_limit=2, total_limit=15)
    first = store.create(DIR, "a", 0o600)
    store.opened(first)
    store.write(first, 0, b"x" * 10, "a")
    store.remove(DIR, "a")
    assert store.names(DIR) == []
    second = store.create(DIR, "b", 0o600)
    assert refused(lambda: store.create(DIR, "c", 0o600)) == errno.ENOSPC  # count
    assert refused(lambda: store.write(second, 0, b"y" * 6, "b")) == errno.ENOSPC  # bytes
    store.closed(first)  # now it is gone for good
    store.write(second, 0, b"y" * 6, "b")
    store.create(DIR, "c", 0o600)


@pytest.mark.parametrize("replace", [True, False])
def test_rename_over_another_frees_it(replace: bool) -> None:
    store = ScratchFiles(file_limit=10, count_limit=2, total_limit=100)
    store.create(DIR, "a", 0o600, b"a")
    if replace:
        store.create(DIR, "b", 0o600, b"b")
    store.rename(DIR, "a", "b")
    assert store.names(DIR) == ["b"] and bytes(store.get(DIR, "b").data) == b"a"  # type: ignore[union-attr]
    store.create(DIR, "c", 0o600)  # one held: room for another
