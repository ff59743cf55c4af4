"""Reading zstd-compressed files (Codex's archived ``.jsonl.zst`` rollouts) as streams.

The compressed file is never read whole: the text comes out a chunk at a time, so
what a reader keeps is up to it. The ``zstandard`` binding is imported on first use:
only archived Codex sessions need it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO, Final

__all__ = ["ZSTD_CHUNK", "ZSTD_SUFFIX", "zstd_chunks", "zstd_stream"]

ZSTD_SUFFIX: Final = ".zst"
#: decompressed bytes asked of the stream per read
ZSTD_CHUNK: Final = 1 << 20


def zstd_stream(raw: BinaryIO) -> BinaryIO:
    """A reader of the decompressed text of ``raw`` (every frame, one after another)."""
    import zstandard

    reader: BinaryIO = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return reader


def zstd_chunks(fd: int) -> Iterator[bytes]:
    """The decompressed text of the file open at ``fd``, chunk by chunk from its start
    (the descriptor stays open; its position moves). `ValueError` when it is not zstd
    data (anything in another agent's directory is untrusted input)."""
    import zstandard

    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(fd, "rb", closefd=False) as raw, zstd_stream(raw) as stream:
        try:
            while chunk := stream.read(ZSTD_CHUNK):
                yield chunk
        except zstandard.ZstdError as exc:
            raise ValueError(f"not zstd data: {exc}") from None
