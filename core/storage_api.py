"""The storage interface a session goes through, and the atomic write built on it.

Below both `core.storage` (its two implementations) and `core.rewrite` (the carrying
rewrite, which the file implementation uses): each imports this, neither the other's
internals, so there is no import circle.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "PathArg",
    "RewriteResult",
    "SessionStorage",
    "SessionWriter",
    "StorageStat",
    "Transform",
    "WriterMode",
    "atomic_write",
    "temp_path_for",
]

#: Maps the source's complete lines to the new file's bytes.
Transform = Callable[[bytes], bytes]


@dataclass(frozen=True, slots=True)
class RewriteResult:
    """What a rewrite wrote. ``transformed``: bytes the transform produced, at the start
    of the new file; lines carried from the old file (or appended by others to the new
    one) follow them. ``inode``: the new file's inode."""

    transformed: int
    carried: int
    inode: int


PathArg = str | os.PathLike[str]
#: "a": append (a file it creates is 0600); "w": write a new file, which must not
#: exist yet (`FileExistsError`): rewrites write their temp file so.
WriterMode = Literal["a", "w"]


@dataclass(frozen=True, slots=True)
class StorageStat:
    """What the manager needs to know about a file to detect change."""

    size: int
    mtime: float
    inode: int


@runtime_checkable
class SessionWriter(Protocol):
    """An append channel to one file. The first error is kept in `error`."""

    @property
    def error(self) -> BaseException | None: ...

    def write_line(self, line: str | bytes) -> None: ...

    def write(self, data: bytes) -> None: ...

    def flush(self) -> None: ...

    def fsync(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class SessionStorage(Protocol):
    """The file operations a session needs (spec section 10)."""

    def ensure_dir(self, path: PathArg) -> None: ...

    def exists(self, path: PathArg) -> bool: ...

    def is_dir(self, path: PathArg) -> bool: ...

    def write_text(self, path: PathArg, text: str) -> None: ...

    def stat(self, path: PathArg) -> StorageStat: ...

    def list_files(self, directory: PathArg, pattern: str = "*") -> list[str]: ...

    def list_dirs(self, directory: PathArg) -> list[str]: ...

    def read_text(self, path: PathArg) -> str: ...

    def read_bytes(self, path: PathArg) -> bytes: ...

    def read_bytes_with_stat(self, path: PathArg) -> tuple[bytes, StorageStat]: ...

    def read_bytes_from(self, path: PathArg, offset: int) -> bytes: ...

    def read_text_prefix(self, path: PathArg, max_bytes: int) -> str: ...

    def rename(self, src: PathArg, dst: PathArg) -> None: ...

    def unlink(self, path: PathArg) -> None: ...

    def fsync_dir(self, path: PathArg) -> None: ...

    def copy_permissions(self, src: PathArg, dst: PathArg) -> None: ...

    def open_writer(self, path: PathArg, mode: WriterMode = "a") -> SessionWriter: ...

    def overwrite_prefix(self, path: PathArg, data: bytes) -> None:
        """Write ``data`` over the file's first ``len(data)`` bytes in place (same inode,
        same size, nothing else moves) and make it durable: omp's title slot rename."""
        ...

    def rewrite(
        self,
        path: PathArg,
        transform: Transform,
        *,
        expected_inode: int | None = None,
        target: PathArg | None = None,
    ) -> RewriteResult:
        """Replace `path` (or move it to `target`) by `transform(its complete lines)`
        without losing lines other writers append meanwhile (`core.rewrite`)."""
        ...


# ---------------------------------------------------------------------------
# Atomic rewrite
# ---------------------------------------------------------------------------


def temp_path_for(path: PathArg) -> str:
    """`.<name>.<random>.tmp` next to `path` (same directory, so rename is atomic)."""
    directory, name = os.path.split(os.fspath(path))
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


def atomic_write(
    storage: SessionStorage,
    path: PathArg,
    chunks: Iterable[bytes],
    *,
    permissions_from: PathArg | None = None,
) -> None:
    """Replace `path` with `chunks`: temp file, fsync, rename, directory fsync.

    The new file keeps the old one's mode and owner, or takes those of
    `permissions_from` (a fork takes its source's: a private session stays private).
    This does not carry lines others append meanwhile: use `storage.rewrite` for a
    file that may have other writers.

    On any failure before the rename the temp file is removed and `path` is untouched.
    """
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    tmp = temp_path_for(path)
    writer = storage.open_writer(tmp, "w")
    try:
        model = permissions_from if permissions_from is not None else path
        if storage.exists(model):
            storage.copy_permissions(model, tmp)  # before any byte of the content exists
        writer.write(b"".join(chunks))
        writer.flush()
        writer.fsync()
        writer.close()
        storage.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(BaseException):
            writer.close()
        with contextlib.suppress(OSError):
            storage.unlink(tmp)
        raise
    storage.fsync_dir(directory)
