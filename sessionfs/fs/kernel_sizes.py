"""What size the kernel holds for each file, so that an open snapshot is read whole.

``open`` snapshots one complete rendering into its handle, and reads are served from
that snapshot. But a read through the kernel's page cache stops at the size the kernel
holds for the inode (``i_size``: from the last attributes sent, trusted for their
timeout), not at the end of the snapshot. When another process appended to the session
file after that size was sent, the snapshot is the new, longer rendering and ``cat``
would get it cut at the old size: JSON without its end, HTML that stops mid-tag. An
invalidation sent when the daemon sees the change does not help: it travels on its own
thread and may reach the kernel after the read (and an unloaded session's
``transcript.md`` has no change to be seen at all).

So an open file may use the page cache only when the kernel's size is known to be the
snapshot's own (`page_cache_ok`); otherwise it is opened ``direct_io``, where every read
comes to the daemon and ends where the snapshot ends, whatever size the kernel holds.
The next ``stat`` learns the new size and later opens use the page cache again, so
repeated reads of an unchanged rendering stay as fast as before.

Two more ways the kernel's size could cut a page-cache reader, closed here as well:

- a newer, shorter rendering (a compaction, a leaf moved to a shorter branch) sent in
  an attributes reply while an older snapshot is still being read through the page
  cache: the size answered is never less than an open page-cache snapshot's
  (`size_to_tell`);
- a short read: the kernel takes a page-cache read that ends early as the end of the
  file and shrinks its size to it without asking, so after one the size it holds is no
  longer known (`read_returned`).

And two snapshots of different versions never share the page cache (pages read for one
would be served to the other): while one is open, an open of another version is
``direct_io``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sessionfs.fs.nodes.base import OpenFile

__all__ = ["KernelSizes"]

#: The kernel was sent a size it does not trust (``attr_timeout`` 0, a listing's
#: placeholder): it asks again (``getattr``) before it reads past it.
UNTRUSTED = -1


@dataclass
class _Readers:
    """The snapshots of one inode open through the page cache (all of one version)."""

    version: object
    handles: list[OpenFile] = field(default_factory=list)

    def largest(self) -> int:
        return max(handle.size or 0 for handle in self.handles)


class KernelSizes:
    """Per inode: the size last sent to the kernel, and the open page-cache snapshots."""

    def __init__(self) -> None:
        self._told: dict[int, int] = {}
        self._readers: dict[int, _Readers] = {}

    def size_to_tell(self, inode: int, size: int) -> int:
        """The ``st_size`` to send for a file whose content is ``size`` bytes now: no
        less than a snapshot still read through the page cache, which a shorter size
        would cut (it shows only while such a reader is open)."""
        readers = self._readers.get(inode)
        return size if readers is None else max(size, readers.largest())

    def told(self, inode: int, size: int, trusted: bool) -> None:
        """Attributes with ``size`` were sent (``trusted``: with a timeout > 0)."""
        self._told[inode] = size if trusted else UNTRUSTED

    def has_readers(self, inode: int) -> bool:
        return inode in self._readers

    def page_cache_ok(self, inode: int, handle: OpenFile) -> bool:
        """Whether ``handle`` (a snapshot of ``handle.size`` bytes) can be read through
        the page cache: the kernel's size for the inode is the snapshot's own or one it
        checks before reading past, and no snapshot of another version is being read
        through the page cache."""
        told = self._told.get(inode)
        if told is None or (told != UNTRUSTED and told != handle.size):
            return False
        readers = self._readers.get(inode)
        return readers is None or readers.version == handle.version

    def opened(self, inode: int, handle: OpenFile) -> None:
        """``handle`` was opened to be read through the page cache."""
        readers = self._readers.get(inode)
        if readers is None:  # (not made for nothing by a setdefault: one per open)
            readers = self._readers[inode] = _Readers(handle.version)
        readers.handles.append(handle)

    def released(self, inode: int, handle: OpenFile) -> None:
        readers = self._readers.get(inode)
        if readers is None or handle not in readers.handles:
            return
        readers.handles.remove(handle)
        if not readers.handles:
            del self._readers[inode]

    def read_returned(self, inode: int, offset: int, asked: int, got: int) -> None:
        """A page-cache read of ``asked`` bytes at ``offset`` returned ``got``: a short
        one makes the kernel shrink its size to ``offset + got`` unasked, unless a
        newer size arrived meanwhile, so what it holds is not known any more."""
        if got < asked and self._told.get(inode, UNTRUSTED) not in (UNTRUSTED, offset + got):
            del self._told[inode]

    def forget(self, inode: int) -> None:
        """The kernel forgot the inode: it holds no size for it any more."""
        self._told.pop(inode, None)
