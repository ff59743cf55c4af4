"""Reading zstd-compressed files (Codex's archived ``.jsonl.zst`` rollouts) as streams.

The compressed file is never read whole: the text comes out a chunk at a time, so
what a reader keeps is up to it. Such a file is another agent's, so untrusted: bytes
that are not zstd data are `NotZstdData`, an ``OSError`` (``EBADMSG``) that readers
already treat as an unreadable file, never a crash. The ``zstandard`` binding is
imported on first use: only archived Codex sessions need it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from typing import BinaryIO, Final

__all__ = ["ZSTD_CHUNK", "ZSTD_SUFFIX", "NotZstdData", "read_chunks", "zstd_chunks"]

ZSTD_SUFFIX: Final = ".zst"
#: decompressed bytes asked of the stream per read
ZSTD_CHUNK: Final = 1 << 20


class NotZstdData(OSError):
    """A ``.zst`` file whose bytes do not decompress (``EBADMSG``)."""

    def __init__(self, detail: object) -> None:
        super().__init__(errno.EBADMSG, f"not zstd data: {detail}")


def read_chunks(raw: BinaryIO, size: int = ZSTD_CHUNK) -> Iterator[bytes]:
    """The decompressed text of ``raw`` (every frame, one after another), at most
    ``size`` bytes a chunk, from where ``raw`` stands."""
    import zstandard

    with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as stream:
        try:
            while chunk := stream.read(size):
                yield chunk
        except zstandard.ZstdError as exc:
            raise NotZstdData(exc) from None


def zstd_chunks(fd: int) -> Iterator[bytes]:
    """`read_chunks` of the file open at ``fd``, from its start (the descriptor stays
    open; its position moves)."""
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(fd, "rb", closefd=False) as raw:
        yield from read_chunks(raw)
