"""Scratch files in a session dir and its ``labels/`` (kept by `sessionfs.fs.scratch`):
their node and handle, and what the dirs that hold them share (`ScratchHolder`).

How an editor's save becomes one write of a control file:

- ``sed -i``, ``perl -pi``, vim's ``backupcopy=no``, nano: a new file is written beside
  ``title`` and renamed over it. The rename is one write of ``title``, exactly what
  ``cat file > title`` does (`write_through`): the usual pipeline, a refusal's reason
  in ``ctl``, the rename failing with its errno (and the scratch file left, as a
  failed rename leaves it).
- vim's rename mode first renames ``title`` to ``title~``: ``title`` cannot go away (it
  shows the session), so ``title~`` becomes a scratch file holding a copy of it.
- A file renamed over ``leaf`` or to a name in ``labels/`` holds a link target (what
  ``ln -sfn`` would be given): the leaf moves or the label is set. Anything else there
  (the entry's JSON ``sed -i`` read through the link) is refused, saying so.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from sessionfs.fs.nodes.base import (
    SCRATCH,
    FileNode,
    MountContext,
    Node,
    OpenFile,
    Permissions,
    Stat,
    refuse,
)
from sessionfs.fs.nodes.in_session import InSession
from sessionfs.fs.nodes.write_handles import RefusingHandle
from sessionfs.fs.scratch import MODE_MASK, ScratchFile, ScratchFiles
from sessionfs.view.refusal import WriteRejected

__all__ = ["ScratchHandle", "ScratchHolder", "ScratchNode", "link_text", "write_through"]


def scratch_files(ctx: MountContext) -> ScratchFiles:
    """The mount's scratch files (one store for the whole mount: one bound)."""
    return (ctx.root or ctx).scratch


class ScratchNode(InSession, FileNode):
    """A scratch file: read, written, truncated and renamed like a file on disk, held
    in memory. Shown ``0600`` at most, owned by the session file's owner (so vim's
    ``4913`` probe sees a file made here belong to whoever owns ``title``)."""

    __slots__ = ()

    tier = SCRATCH
    mode = MODE_MASK
    invalidate_on_change = False  # no session change touches it

    def file(self) -> ScratchFile:
        found = scratch_files(self.ctx).get(self.key[:-1], self.key[-1])
        if found is None:
            raise refuse(errno.ENOENT)
        return found

    async def stat(self) -> Stat:
        file = self.file()
        return Stat(len(file.data), file.mtime_ns)

    async def permissions(self) -> Permissions:
        file = self.file()
        session = await InSession.permissions(self)
        return Permissions(session.mask & file.mode, session.uid, session.gid)

    async def open(self, flags: int) -> OpenFile:
        file = self.file()
        store = scratch_files(self.ctx)
        if flags & os.O_TRUNC:
            store.truncate(file, 0, self.key[-1])
        append = bool(flags & os.O_APPEND)
        return ScratchHandle(store, file, self.key[-1], append=append, on_error=self.record_refusal)

    async def setattr(self, attr: Any, fields: Any) -> None:
        file = self.file()
        if getattr(fields, "update_size", False):
            scratch_files(self.ctx).truncate(file, attr.st_size, self.key[-1])
        if getattr(fields, "update_mode", False):
            file.mode = attr.st_mode & MODE_MASK  # never more than its owner's read and write
        if getattr(fields, "update_mtime", False):
            file.mtime_ns = attr.st_mtime_ns
        # A chown is accepted and changes nothing: it shows the session file's owner
        # (sed and vim give their new file the owner of the one they replace).


class ScratchHandle(RefusingHandle):
    """An open scratch file: reads and writes go to its bytes in memory (``O_APPEND``:
    every write at the end); a write past the bounds is refused (``EFBIG``, ``ENOSPC``)."""

    def __init__(
        self, store: ScratchFiles, file: ScratchFile, name: str, *, append: bool, on_error: Any
    ) -> None:
        super().__init__(on_error)
        self._store = store
        self._file = file
        self._name = name
        self._append = append
        store.opened(file)

    async def read(self, offset: int, size: int) -> bytes:
        return bytes(self._file.data[offset : offset + size])

    async def write(self, offset: int, data: bytes) -> int:
        if self._append:
            offset = len(self._file.data)
        try:
            self._store.write(self._file, offset, data, self._name)
        except WriteRejected as exc:
            raise await self._refuse(exc) from None
        return len(data)

    async def truncate(self, size: int) -> bool:
        try:
            self._store.truncate(self._file, size, self._name)
        except WriteRejected as exc:
            raise await self._refuse(exc) from None
        return True

    async def release(self) -> None:
        self._store.closed(self._file)


async def write_through(node: Node, data: bytes) -> None:
    """What ``cat file > node`` does, as one write of ``node``: opened for writing with
    ``O_TRUNC``, written, flushed (where a control file applies what it got), closed.
    A refusal is recorded by the handle (``ctl``) and raised as its errno."""
    handle = await node.open(os.O_WRONLY | os.O_TRUNC)
    try:
        await handle.write(0, data)
        await handle.flush()
    finally:
        await handle.release()


def link_text(name: str, new_name: str, data: bytes) -> str:
    """The link target a file renamed over a symlink (``leaf``, ``labels/<name>``)
    holds: its text, one line; `WriteRejected` (``EINVAL``) for anything else."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        text = ""
    if not text or "\n" in text or len(text) > 4096:
        raise WriteRejected(
            errno.EINVAL,
            f"mv {name} {new_name}: {new_name} is a symlink: a file renamed over it must "
            "hold one line, the entry it points to (an id or entries/<id>.json); "
            "ln -sfn does the same",
        )
    return text


class ScratchHolder(InSession):
    """Mixin for a dir of a session that holds scratch files (the session dir,
    ``labels/``): creating, finding, listing and removing them. Renames are the
    dir's own: what a name there means decides what a rename over it does."""

    __slots__ = ()

    def scratch_node(self, name: str) -> ScratchNode | None:
        if scratch_files(self.ctx).get(self.key, name) is None:
            return None
        return ScratchNode(self.ctx, (*self.key, name))

    def scratch_rows(self) -> list[tuple[str, Node]]:
        return [
            (name, ScratchNode(self.ctx, (*self.key, name)))
            for name in scratch_files(self.ctx).names(self.key)
        ]

    async def create_scratch(self, name: str, mode: int) -> tuple[Node, OpenFile]:
        await self.require_session_file()  # ENOENT when the session is gone
        scratch_files(self.ctx).create(self.key, name, mode)
        node = ScratchNode(self.ctx, (*self.key, name))
        return node, await node.open(os.O_RDWR)

    def remove_scratch(self, name: str) -> bool:
        return scratch_files(self.ctx).remove(self.key, name) is not None

    def scratch_data(self, name: str) -> bytes | None:
        file = scratch_files(self.ctx).get(self.key, name)
        return None if file is None else bytes(file.data)

    def rename_scratch(self, name: str, new_name: str) -> ScratchNode:
        scratch_files(self.ctx).rename(self.key, name, new_name)
        return ScratchNode(self.ctx, (*self.key, new_name))

    def copy_to_scratch(self, data: bytes, new_name: str) -> ScratchNode:
        """vim's ``mv title title~``: the control file stays; ``new_name`` holds a copy."""
        scratch_files(self.ctx).create(self.key, new_name, MODE_MASK, data)
        return ScratchNode(self.ctx, (*self.key, new_name))
