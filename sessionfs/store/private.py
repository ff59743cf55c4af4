"""Files and directories only their owner can read, from the first byte, whatever the umask.

Session files hold what people paste into their agents, so everything the sync and the
store mirror put on disk is created ``0700``/``0600``: with that mode passed to
``mkdir``/``open`` (a umask can only take bits away), never chmod-ed after. Temporary
names are made by ``mkstemp`` (``O_EXCL | O_NOFOLLOW``), so a link planted in a shared
directory is never followed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from core.private_files import make_private_dirs

__all__ = [
    "PrivateTemp",
    "make_private_dirs",
    "private_temp",
    "replace_privately",
]


class PrivateTemp:
    """A new ``0600`` temp file open for writing; :meth:`commit` renames it into place."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path, self.handle = path, handle
        self.committed = False

    def commit(self, target: Path) -> None:
        self.handle.flush()
        os.replace(self.path, target)
        self.committed = True


@contextlib.contextmanager
def private_temp(directory: Path, name: str) -> Iterator[PrivateTemp]:
    """A temp file in ``directory`` (named after ``name``); removed at the end of the
    block unless it was committed."""
    fd, temp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    with os.fdopen(fd, "wb") as handle:
        temp = PrivateTemp(Path(temp_name), handle)
        try:
            yield temp
        finally:
            if not temp.committed:
                with contextlib.suppress(FileNotFoundError):
                    temp.path.unlink()


def replace_privately(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a private temp file renamed over it)."""
    with private_temp(path.parent, path.name) as temp:
        temp.handle.write(data)
        temp.commit(path)
