"""Open-file handles of the files that take writes: ``append/<name>``, ``title``, ``ctl``.

``title`` is opened like a regular file (`EditHandle`): ``>`` replaces it, ``>>``
appends to it, an editor writing in place gets exactly what it wrote.

The kernel delivers a write as open, write()s, flush (at every ``close()``), release.
``release`` cannot return an error to anyone, so the work happens at ``flush``: that is
where an append becomes durable and where ``close()`` gets ``EINVAL``/``ENOENT``/...
``write()`` already refuses what it can know early (``EFBIG`` past the size limit, a
write that is not sequential); the rest of such a file is refused too.

``ctl`` is different: commands run in ``write()``, one batch per call, so a shell's
``echo cmd > ctl`` reports an unknown command at once (``echo: write error``) instead
of in a ``close()`` that shells do not check. So is a ``*.stream`` file in
``append/`` (`LineBatchHandle`): every ``write()`` commits the complete lines it ends,
which saves a long-lived writer an open and a close per entry.

Every refusal is a `WriteRejected`; ``on_error`` records it (``ctl``'s ``last_error``)
and the handle answers ``FUSEError(errno)``.
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable

import pyfuse3

from sessionfs.fs.nodes.base import OpenFile
from sessionfs.view.refusal import WriteRejected

__all__ = ["CTL_LIMIT", "BufferedWriteHandle", "EditHandle", "LineBatchHandle", "RefusingHandle"]

#: Largest command batch a ``ctl`` keeps while waiting for the end of a line.
CTL_LIMIT = 64 * 1024

Commit = Callable[[bytes], Awaitable[None]]
OnError = Callable[[WriteRejected], Awaitable[None]]


class RefusingHandle(OpenFile):
    """A handle whose refusals are recorded (``on_error``: the ``ctl`` of its node)
    before the request fails with their errno."""

    def __init__(self, on_error: OnError) -> None:
        self._on_error = on_error

    async def _refuse(self, exc: WriteRejected) -> pyfuse3.FUSEError:
        await self._on_error(exc)
        return pyfuse3.FUSEError(exc.errno)


class BufferedWriteHandle(RefusingHandle):
    """Sequential writes collected in memory; ``commit(data)`` runs at the next flush.

    A handle that was never written to commits nothing (``touch``, ``: > file``).
    ``too_big(size)`` raises `WriteRejected` (``EFBIG``) for a size over the limit.
    The first write may come at any offset (``>>`` writes at the old size): it is
    where this handle's content starts.
    """

    def __init__(self, commit: Commit, *, too_big: Callable[[int], None], on_error: OnError):
        super().__init__(on_error)
        self._commit = commit
        self._too_big = too_big
        self._data = bytearray()
        self._start: int | None = None  # file offset of the first byte written
        self._committed = 0  # bytes of earlier flushes (a later write continues after them)
        self._failed: WriteRejected | None = None

    async def write(self, offset: int, data: bytes) -> int:
        try:
            if self._failed is not None:
                raise self._failed
            if self._start is None:
                self._start = offset
            if offset - self._start - self._committed != len(self._data):
                raise WriteRejected(errno.EINVAL, "this file is written from start to end only")
            self._too_big(self._committed + len(self._data) + len(data))
        except WriteRejected as exc:
            # Keep refusing: what follows a lost part of a file must not be applied.
            self._failed = exc
            self._data.clear()
            raise await self._refuse(exc) from None
        self._data += data
        return len(data)

    async def flush(self) -> None:
        if self._failed is not None:
            raise pyfuse3.FUSEError(self._failed.errno)
        if not self._data:
            return
        data = bytes(self._data)
        self._committed += len(data)
        self._data.clear()
        try:
            await self._commit(data)
        except WriteRejected as exc:
            raise await self._refuse(exc) from None


def _ctl_too_big(size: int) -> None:
    if size > CTL_LIMIT:
        raise WriteRejected(errno.EFBIG, f"a ctl command is at most {CTL_LIMIT} bytes")


class LineBatchHandle(RefusingHandle):
    """Every ``write()`` runs the complete lines it holds (with what an earlier write
    left after its last newline) before it returns; the flush runs a last line that has
    no newline. ``ctl`` runs its commands so; a ``*.stream`` file in ``append/``
    commits its entries so.

    Offsets are ignored: lines run in the order their writes arrive (``ctl`` takes
    commands, a stream only ever adds entries). A refused batch fails its ``write()``
    and is dropped (nothing of it was applied), and so is a write of empty lines
    (``EINVAL``: nothing to run); the next write goes on. ``too_big(size)`` bounds
    what waits for a newline (default: `CTL_LIMIT`).
    """

    def __init__(
        self, run: Commit, *, on_error: OnError, too_big: Callable[[int], None] = _ctl_too_big
    ) -> None:
        super().__init__(on_error)
        self._run = run
        self._too_big = too_big
        self._pending = bytearray()

    async def _execute(self, data: bytes) -> None:
        try:
            await self._run(data)
        except WriteRejected as exc:
            raise await self._refuse(exc) from None

    async def write(self, offset: int, data: bytes) -> int:
        try:
            self._too_big(len(self._pending) + len(data))
        except WriteRejected as exc:
            self._pending.clear()
            raise await self._refuse(exc) from None
        self._pending += data
        end = self._pending.rfind(b"\n") + 1
        if end:
            ready = bytes(self._pending[:end])
            del self._pending[:end]
            await self._execute(ready)
        return len(data)

    async def flush(self) -> None:
        ready = bytes(self._pending)
        self._pending.clear()
        if ready.strip():  # an empty line was refused by its write(); nothing is left
            await self._execute(ready)


class EditHandle(RefusingHandle):
    """A file that holds one value (``title``) opened for writing as a regular file is:
    its content at open (``initial``; empty with ``O_TRUNC``) is changed by each write
    at its offset and by ``ftruncate``, and ``commit(content)`` runs at the next flush
    after a change. With ``append`` (``O_APPEND``) every write goes to the end,
    whatever offset the kernel sends: ``>>`` appends to the value as it was at open,
    never replaces it. A write past the end (a hole) is refused, and so is the rest of
    the file after any refusal (what follows a lost part must not be applied).
    """

    def __init__(
        self,
        initial: bytes,
        commit: Commit,
        *,
        append: bool,
        too_big: Callable[[int], None],
        on_error: OnError,
    ) -> None:
        super().__init__(on_error)
        self._data = bytearray(initial)
        self._commit = commit
        self._append = append
        self._too_big = too_big
        self._changed = False
        self._failed: WriteRejected | None = None

    async def read(self, offset: int, size: int) -> bytes:  # opened O_RDWR
        return bytes(self._data[offset : offset + size])

    async def write(self, offset: int, data: bytes) -> int:
        try:
            if self._failed is not None:
                raise self._failed
            if self._append:
                offset = len(self._data)
            if offset > len(self._data):
                raise WriteRejected(errno.EINVAL, "a write past the end of this file (a hole)")
            self._too_big(max(len(self._data), offset + len(data)))
        except WriteRejected as exc:
            self._failed = exc
            raise await self._refuse(exc) from None
        self._data[offset : offset + len(data)] = data
        self._changed = True
        return len(data)

    async def truncate(self, size: int) -> bool:
        if size > len(self._data):
            raise await self._refuse(
                WriteRejected(errno.EINVAL, "this file can only be truncated, not extended")
            )
        del self._data[size:]
        self._changed = True
        return True

    async def flush(self) -> None:
        if self._failed is not None:
            raise pyfuse3.FUSEError(self._failed.errno)
        if not self._changed:
            return
        self._changed = False
        try:
            await self._commit(bytes(self._data))
        except WriteRejected as exc:
            raise await self._refuse(exc) from None
