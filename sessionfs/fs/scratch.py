"""Scratch files: what editors and stream editors make beside the file they edit.

``sed -i``, ``perl -pi``, vim, nano and most editors save a file by writing a new one
in the same directory and renaming it over the old one; vim also keeps a swap file
(``.title.swp``), probes whether it may create files (``4913``) and makes a backup
(``title~``). A session dir shows the session, not a directory on disk, so such files
are held here, in the daemon's memory: never written into the agent dir, listed only
while they exist, ``0600``, gone at unmount. Renaming one over a control file
(``title``, ``ctl``, ``leaf``, ``labels/<name>``) is one write of that file
(`sessionfs.fs.nodes.scratch`).

Memory is bounded: a file holds at most `FILE_LIMIT` bytes (``EFBIG``), the mount at
most `COUNT_LIMIT` files and `TOTAL_LIMIT` bytes (``ENOSPC``). A removed file still
open counts until its last handle is closed (a program that removes its files but
keeps them open cannot grow memory past the bound either).
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass, field

from sessionfs.view.refusal import WriteRejected

__all__ = ["COUNT_LIMIT", "FILE_LIMIT", "TOTAL_LIMIT", "ScratchFile", "ScratchFiles"]

#: The largest scratch file (a title is at most 64 KiB, a prompt 1 MiB; a vim swap
#: file of either is a few pages more).
FILE_LIMIT = 2 * 1024 * 1024
#: Scratch files held at once in one mount (an editor needs three or four).
COUNT_LIMIT = 64
#: Bytes held at once in one mount.
TOTAL_LIMIT = 16 * 1024 * 1024

#: Permission bits a scratch file may show: its owner's read and write at most.
MODE_MASK = 0o600


@dataclass(eq=False)
class ScratchFile:
    """One file's bytes and attributes. ``linked``: it has a name; ``handles``: how
    many open handles use it (a removed file lives while one does)."""

    data: bytearray = field(default_factory=bytearray)
    mode: int = MODE_MASK
    mtime_ns: int = field(default_factory=time.time_ns)
    linked: bool = True
    handles: int = 0
    #: whether its bytes still count against the mount's bounds
    counted: bool = True


class ScratchFiles:
    """The scratch files of one mount: per directory (a node key), name -> file."""

    def __init__(
        self,
        *,
        file_limit: int = FILE_LIMIT,
        count_limit: int = COUNT_LIMIT,
        total_limit: int = TOTAL_LIMIT,
    ) -> None:
        self.file_limit = file_limit
        self.count_limit = count_limit
        self.total_limit = total_limit
        self._dirs: dict[tuple[str, ...], dict[str, ScratchFile]] = {}
        self._count = 0  # files held: named, or removed but still open
        self._bytes = 0

    def names(self, directory: tuple[str, ...]) -> list[str]:
        return sorted(self._dirs.get(directory, ()))

    def get(self, directory: tuple[str, ...], name: str) -> ScratchFile | None:
        return self._dirs.get(directory, {}).get(name)

    def create(
        self, directory: tuple[str, ...], name: str, mode: int, data: bytes = b""
    ) -> ScratchFile:
        """A new file ``name`` (replacing one of that name), holding ``data``."""
        old = self.get(directory, name)
        if old is None and self._count >= self.count_limit:
            raise WriteRejected(
                errno.ENOSPC,
                f"{name}: {self.count_limit} scratch files are held in memory already "
                "(remove some: files made in a session dir are kept in memory)",
            )
        self._check_size(name, len(data), len(data) - (len(old.data) if old else 0))
        if old is not None:
            self._unlink(directory, name)
        file = ScratchFile(bytearray(data), mode & MODE_MASK)
        self._dirs.setdefault(directory, {})[name] = file
        self._count += 1
        self._bytes += len(data)
        return file

    def write(self, file: ScratchFile, offset: int, data: bytes, name: str) -> None:
        end = offset + len(data)
        self._check_size(name, end, end - len(file.data))
        if offset > len(file.data):
            file.data.extend(bytes(offset - len(file.data)))
        grown = max(0, end - len(file.data))
        file.data[offset:end] = data
        self._bytes += grown
        file.mtime_ns = time.time_ns()

    def truncate(self, file: ScratchFile, size: int, name: str) -> None:
        self._check_size(name, size, size - len(file.data))
        self._bytes += size - len(file.data)
        if size < len(file.data):
            del file.data[size:]
        else:
            file.data.extend(bytes(size - len(file.data)))
        file.mtime_ns = time.time_ns()

    def rename(self, directory: tuple[str, ...], name: str, new_name: str) -> ScratchFile:
        files = self._dirs[directory]
        if new_name in files and new_name != name:
            self._unlink(directory, new_name)
        file = files.pop(name)
        files[new_name] = file
        return file

    def remove(self, directory: tuple[str, ...], name: str) -> ScratchFile | None:
        """Take ``name`` away (unlink, or renamed over a control file); its memory goes
        once no handle uses it."""
        if self.get(directory, name) is None:
            return None
        return self._unlink(directory, name)

    def opened(self, file: ScratchFile) -> None:
        file.handles += 1

    def closed(self, file: ScratchFile) -> None:
        file.handles -= 1
        self._drop_if_unused(file)

    def _unlink(self, directory: tuple[str, ...], name: str) -> ScratchFile:
        files = self._dirs[directory]
        file = files.pop(name)
        if not files:
            del self._dirs[directory]
        file.linked = False
        self._drop_if_unused(file)
        return file

    def _drop_if_unused(self, file: ScratchFile) -> None:
        if file.linked or file.handles > 0 or not file.counted:
            return
        file.counted = False
        self._count -= 1
        self._bytes -= len(file.data)
        file.data = bytearray()  # nothing can read a removed, closed file again

    def _check_size(self, name: str, size: int, growth: int) -> None:
        if size > self.file_limit:
            raise WriteRejected(
                errno.EFBIG,
                f"{name}: a file made in a session dir is held in memory, at most "
                f"{self.file_limit} bytes",
            )
        if growth > 0 and self._bytes + growth > self.total_limit:
            raise WriteRejected(
                errno.ENOSPC,
                f"{name}: the files made in session dirs (held in memory) may hold at most "
                f"{self.total_limit} bytes together",
            )
