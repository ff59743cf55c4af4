"""A lookup in a dir where no name ever exists (``append/``) answers with an absence
the kernel may remember: it looks a new name up twice before creating it, and the
remembered absence saves the second round trip. Anywhere else a missing name is a
plain ``ENOENT``, which the kernel never remembers (a file may appear there)."""

from __future__ import annotations

import errno

import pyfuse3
import pytest
import trio

from sessionfs.fs.nodes.base import DirNode
from sessionfs.fs.nodes.session import AppendDir
from sessionfs.fs.ops import SessionFsOperations


class EmptyDir(DirNode):
    __slots__ = ()


class DropBox(EmptyDir):
    __slots__ = ()
    absent_timeout = 1.0


async def lookup(ops: SessionFsOperations, name: bytes) -> pyfuse3.EntryAttributes:
    return await ops.lookup(pyfuse3.ROOT_INODE, name, None)  # type: ignore[arg-type]


def test_a_drop_box_answers_a_missing_name_with_a_remembered_absence() -> None:
    ops = SessionFsOperations(DropBox(None, ()), read_only=True)  # type: ignore[arg-type]
    entry = trio.run(lookup, ops, b"m.json")
    assert entry.st_ino == 0 and entry.entry_timeout == 1.0


def test_elsewhere_a_missing_name_is_enoent() -> None:
    ops = SessionFsOperations(EmptyDir(None, ()), read_only=True)  # type: ignore[arg-type]
    with pytest.raises(pyfuse3.FUSEError) as caught:
        trio.run(lookup, ops, b"m.json")
    assert caught.value.errno == errno.ENOENT


def test_append_dirs_are_drop_boxes() -> None:
    assert AppendDir.absent_timeout > 0 and DirNode.absent_timeout == 0
