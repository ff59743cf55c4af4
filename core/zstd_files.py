"""Reading zstd-compressed files (Codex's archived ``.jsonl.zst`` rollouts) as streams.

The compressed file is never read whole: the text comes out a chunk at a time, so
what a reader keeps is up to it. Such a file is another agent's, so untrusted: bytes
that are not zstd data are `NotZstdData`, an ``OSError`` (``EBADMSG``) that readers
already treat as an unreadable file, never a crash. The ``zstandard`` binding is
imported on first use: only archived Codex sessions need it.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterator
from typing import BinaryIO, Final, NamedTuple

from core.safe_open import open_regular

__all__ = [
    "ASSUMED_RATIO",
    "MOST_RATIO",
    "MOST_UNSAID",
    "ZSTD_CHUNK",
    "ZSTD_SUFFIX",
    "NotZstdData",
    "TextPastItsBound",
    "TextSize",
    "file_text_info",
    "file_text_size",
    "most_text",
    "read_chunks",
    "text_size",
    "text_size_words",
    "zstd_chunks",
]

ZSTD_SUFFIX: Final = ".zst"
#: decompressed bytes asked of the stream per read
ZSTD_CHUNK: Final = 1 << 20
#: How many times its compressed size a file's text is taken to be when its frame
#: header does not say (JSONL compresses 10-20 times: the high end, so that a file
#: whose size is not known is rather streamed than held)
ASSUMED_RATIO: Final = 20
#: The most a file's text is let grow to when decompressed, as a multiple of its
#: compressed size, and at least `MOST_UNSAID` bytes (`most_text`): an archive is
#: another agent's file, and a few KB made to expand without end would fill the disk
#: the daemon decompresses it to (or its memory). JSONL compresses 5-20 times, logs
#: read again and again some 100 times (tests/fs/test_compressed_rollout.py's); 1,000
#: is ten times that, and the floor lets any archive of up to 1 MB hold a 1 GB text,
#: twice the biggest sessions seen.
MOST_RATIO: Final = 1000
MOST_UNSAID: Final = 1 << 30
#: how many files' `file_text_size` is remembered (a header read each, once)
_TEXT_SIZES_REMEMBERED: Final = 1024
#: a zstd frame's first bytes, and how many bytes its header takes at most
_FRAME_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_FRAME_HEADER_MAX: Final = 18


class NotZstdData(OSError):
    """A ``.zst`` file whose bytes do not decompress (``EBADMSG``)."""

    def __init__(self, detail: object) -> None:
        super().__init__(errno.EBADMSG, f"not zstd data: {detail}")


class TextSize(NamedTuple):
    """How big a session file's text is (`file_text_info`), and how sure that is."""

    #: its size (bytes): a plain file's own, a ``.zst``'s as its frame header says or
    #: as guessed
    size: int
    #: the size is the file's or its header's, not `ASSUMED_RATIO`'s guess
    said: bool


def most_text(compressed: int) -> int:
    """The most the decompression of a file of ``compressed`` bytes may yield
    (`read_chunks`): `MOST_RATIO` times that, or `MOST_UNSAID`, whichever is more,
    whatever its header says. Not the header's own size: a file may hold several
    frames (``zstd -c >> f``, pzstd), the first one's header gives only that frame's
    size, and one whose first frame compresses well cannot be told from a single
    frame without decompressing it (`text_size` takes it as one); refusing it would
    refuse an honest archive. A single frame that yields more than it says is
    corrupt, and libzstd stops at that frame's end."""
    return max(compressed * MOST_RATIO, MOST_UNSAID)


class TextPastItsBound(OSError):
    """A ``.zst`` file that decompresses to more than `most_text` of its size
    (``EFBIG``): corrupt, or made to fill the disk or memory it is decompressed into."""

    def __init__(self, compressed: int) -> None:
        why = (
            f"more than {most_text(compressed) / 2**20:,.0f} MB ({MOST_RATIO} times its "
            f"{compressed:,} bytes, or {MOST_UNSAID >> 30} GB): no session "
            "compresses so well; a decompression bomb"
        )
        super().__init__(errno.EFBIG, f"the compressed session file's text is {why}: not read")


def read_chunks(raw: BinaryIO, size: int = ZSTD_CHUNK) -> Iterator[bytes]:
    """The decompressed text of ``raw`` (every frame, one after another), at most
    ``size`` bytes a chunk, from where ``raw`` stands; `TextPastItsBound` once it
    yields more than `most_text` of the file's size on disk. Every reader is bounded
    so (the daemon's, its render workers', its search indexer's, the sync's): the
    file is another agent's, and a few KB of it may expand without end. The bound is
    taken from the open file itself (``fstat``), never from a size a caller passes
    or its header says."""
    import zstandard

    compressed = os.fstat(raw.fileno()).st_size
    most, out = most_text(compressed), 0
    with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as stream:
        try:
            while chunk := stream.read(size):
                out += len(chunk)
                if out > most:
                    raise TextPastItsBound(compressed)
                yield chunk
        except zstandard.ZstdError as exc:
            raise NotZstdData(exc) from None


def text_size(path: str | os.PathLike[str], compressed_size: int) -> int:
    """How big the text of the ``.zst`` file ``path`` (``compressed_size`` bytes) is,
    without decompressing it: the content size its frame header gives, else (not
    given, the file holds more than that frame, not a frame header at all, unreadable)
    ``compressed_size`` times `ASSUMED_RATIO`. For deciding how to read it, not a
    promise: a file made to expand more than that is not caught."""
    try:
        return _header_text_size(path, compressed_size).size
    except OSError:  # (NotRegularFileError included: its reading says why)
        return compressed_size * ASSUMED_RATIO


def _header_text_size(path: str | os.PathLike[str], compressed_size: int) -> TextSize:
    """`text_size`, or ``OSError`` when the file cannot be read (gone, not a regular
    file, or a passing failure such as ``EMFILE``: a guess then, not the file's
    answer, so not one to remember)."""
    assumed = TextSize(compressed_size * ASSUMED_RATIO, False)
    with open_regular(path) as raw:  # another agent's file: never a FIFO's wait
        head = raw.read(_FRAME_HEADER_MAX)
    if not head.startswith(_FRAME_MAGIC):  # a skippable frame first, or not zstd data
        return assumed
    import zstandard

    try:
        declared = zstandard.frame_content_size(head)
    except zstandard.ZstdError:
        return assumed
    # A frame's compressed bytes are at most its text's, stored raw, and a little more
    # (3 bytes a block of 128 KB, the header, a checksum): past that, more frames follow.
    if declared < 0 or compressed_size > declared + declared // 1024 + 1024:
        return assumed._replace(size=max(declared, assumed.size))
    return TextSize(declared, True)


def file_text_size(path: str | os.PathLike[str], size: int, mtime_ns: int) -> int:
    """How big the text of the session file ``path`` (``size`` bytes on disk, modified
    at ``mtime_ns``) is: what reading it whole, holding or rendering it costs grows
    with. ``size`` itself for a plain file (no look at the file); a ``.zst``'s
    `text_size`, its header read once per state of the file (its size and mtime: an
    archive is written once, not changed in place) and remembered, whoever asks: the
    daemon asks on every ``stat`` of a rendering whether it is too big to make in
    memory. A header that could not be read gives `ASSUMED_RATIO` times ``size``,
    not remembered: the next ask reads it again."""
    return file_text_info(path, size, mtime_ns).size


def file_text_info(path: str | os.PathLike[str], size: int, mtime_ns: int) -> TextSize:
    """`file_text_size`, and whether it is said or guessed (`TextSize`)."""
    name = os.fspath(path)
    if not name.endswith(ZSTD_SUFFIX):
        return TextSize(size, True)
    try:
        return _remembered_text_size(name, size, mtime_ns)
    except OSError:
        return TextSize(size * ASSUMED_RATIO, False)


@functools.lru_cache(maxsize=_TEXT_SIZES_REMEMBERED)  # (thread-safe: any thread asks)
def _remembered_text_size(path: str, size: int, mtime_ns: int) -> TextSize:
    return _header_text_size(path, size)  # (an OSError is raised, so not remembered)


def text_size_words(path: str | os.PathLike[str], text: TextSize) -> str:
    """How a refusal says how big the session file ``path`` is (``text``: its
    `file_text_info`): a compressed one (by its suffix) by its text, "about" that
    when the size is `ASSUMED_RATIO`'s guess rather than its header's."""
    size = f"{text.size / 2**20:.0f} MB"
    if not os.fspath(path).endswith(ZSTD_SUFFIX):
        return f"the session file is {size}"
    return f"the compressed session file's text is {'' if text.said else 'about '}{size}"


def zstd_chunks(fd: int) -> Iterator[bytes]:
    """`read_chunks` of the file open at ``fd``, from its start (the descriptor stays
    open; its position moves)."""
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(fd, "rb", closefd=False) as raw:
        yield from read_chunks(raw)
