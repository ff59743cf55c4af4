"""Reading one session file into index rows, and deciding how much of it to read.

Incremental updates
-------------------
Per file the index remembers device, inode, size, mtime, how many bytes of complete
lines it indexed, and fingerprints (a hash) of the first and last 4 KiB of those bytes.
Unchanged stat -> nothing is read. Grown, same inode, same fingerprints -> only the
new complete lines are read (a torn last line waits for its newline; a whole object
without one is a line, as ``entries/`` reads it). Shrunk, other inode, other
fingerprints, or grown after a last line without its newline -> the file's rows are
dropped and it is indexed again (`update_action`). Version-1 files (no entry ids) get
the ids core's migration derives; a changed v1 file is reindexed whole (current agents
never append to one).
"""

from __future__ import annotations

import errno
import hashlib
import os
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, Final, NamedTuple

from core.jsonl import is_header, lines_length, loads
from core.migrate import migrate_session_entries
from core.paths import iso_to_ms
from core.search_index.rowids import MAX_MS
from core.search_index.text import entry_search_text, rename_hook_message
from core.title_slot import parse_title_slot
from core.zstd_files import ZSTD_SUFFIX, zstd_chunks

FINGERPRINT_BYTES: Final = 4096

# Files are read and their rows inserted in slices of these sizes: memory stays small
# whatever the size of one session file.
_READ_CHUNK = 4 * 1024 * 1024
#: The longest line the indexer holds (bytes) while it waits for the line's newline:
#: no session writes one so long (a Claude Code line of pasted images is a few MB),
#: and another agent's file may be made so (a few KB of ``.zst`` expanding to a GB of
#: spaces without a newline): past it the file is refused (`LineTooLong`), not held
#: whole.
LONGEST_LINE: Final = 64 << 20


class LineTooLong(OSError):
    """A file with a line longer than `LONGEST_LINE` (``EFBIG``): not indexed."""

    def __init__(self) -> None:
        super().__init__(errno.EFBIG, f"a line longer than {LONGEST_LINE >> 20} MB: not indexed")


# A file's mode: what may be done when it grows.
MODE_NOT_SESSION = 0  # no header (yet): any change -> read it whole again
MODE_LEGACY = 1  # v1: ids are derived from positions -> any change -> read it whole
MODE_APPENDABLE = 2  # ids in the file: index only the new lines


class FileState(NamedTuple):
    file_id: int
    dev: int
    ino: int
    size: int
    mtime_ns: int
    indexed_to: int
    head_hash: int
    tail_hash: int
    mode: int


class Row(NamedTuple):
    ms: int
    entry_id: str
    role: str
    offset: int
    length: int
    crc: int
    text: str


def _hash(data: bytes) -> int:
    # 63 bits so the value fits an SQLite integer.
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1


def read_at(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def fingerprints(fd: int, indexed_to: int) -> tuple[int, int]:
    """Hashes of the first and of the last 4 KiB of the indexed bytes."""
    head = read_at(fd, 0, min(FINGERPRINT_BYTES, indexed_to))
    tail_start = max(0, indexed_to - FINGERPRINT_BYTES)
    tail = read_at(fd, tail_start, indexed_to - tail_start)
    return _hash(head), _hash(tail)


def _lines(data: bytes, base: int) -> Iterator[tuple[int, bytes]]:
    """(file offset, line) of every complete non-empty line of ``data`` (which starts
    at file offset ``base``). A line of only spaces is handed out too (it parses as
    nothing): then every line left out is a lone newline, one byte, and a line's
    number is known from offsets alone, as ``entries/`` numbers it
    (`core.search_index.formats.numbered_lines`)."""
    start = 0
    end = data.rfind(b"\n") + 1
    while start < end:
        newline = data.index(b"\n", start)
        if newline > start:
            yield base + start, data[start:newline]
        start = newline + 1


def parse_object(line: bytes) -> dict[str, Any] | None:
    try:
        obj = loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _row(entry: dict[str, Any], offset: int, line: bytes) -> Row | None:
    entry_id = entry.get("id")
    if not isinstance(entry_id, str) or entry.get("type") == "session":
        return None
    found = entry_search_text(entry)
    if found is None:
        return None
    role, text = found
    return Row(entry_ms(entry), entry_id, role, offset, len(line), zlib.crc32(line), text)


def _file_chunks(fd: int, start: int, end: int) -> Iterator[bytes]:
    offset = start
    while offset < end:
        chunk = os.pread(fd, min(_READ_CHUNK, end - offset), offset)
        if not chunk:
            return
        offset += len(chunk)
        yield chunk


class ChunkedLines:
    """The complete lines of a stream of chunks, one chunk at a time so that a huge
    session file never has to fit in memory: a file region (`of_file`), or the
    decompressed text of an archived ``.jsonl.zst`` (offsets are then offsets in that
    text: `read_decompressed_at` reads a line back). The lines are those ``entries/``
    reads (`core.jsonl.lines_length`): a last line without its newline is one when it
    is a whole object (what then follows it on its line makes the file read whole
    again: `update_action`)."""

    def __init__(self, chunks: Iterable[bytes], start: int = 0) -> None:
        self.chunks, self.start = chunks, start
        #: the end of the last complete line read so far (an offset in the stream)
        self.complete_to = start
        self.bytes_read = 0

    @classmethod
    def of_file(cls, fd: int, start: int, end: int) -> ChunkedLines:
        return cls(_file_chunks(fd, start, end), start)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        offset, carry = self.start, b""
        for chunk in self.chunks:
            self.bytes_read += len(chunk)
            data = carry + chunk if carry else chunk
            base = offset - len(carry)
            offset += len(chunk)
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if len(carry) > LONGEST_LINE:
                raise LineTooLong
            if cut:
                yield from _lines(data[:cut], base)
                self.complete_to = base + cut
        if carry and lines_length(carry) == len(carry):
            # A whole object without its newline at the end: a line, as entries/ has it.
            yield offset - len(carry), carry
            self.complete_to = offset


def read_decompressed_at(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` of the decompressed text of the ``.zst`` file open
    at ``fd``: decompressed from its start as a stream, only the chunks that hold them
    kept (an archived rollout has no offsets of its own to read at)."""
    wanted, position, end = [], 0, offset + length
    for chunk in zstd_chunks(fd):
        following = position + len(chunk)
        if following > offset:
            wanted.append(chunk[max(0, offset - position) : end - position])
        position = following
        if position >= end:
            break
    return b"".join(wanted)


def is_compressed(key: bytes) -> bool:
    """A ``.jsonl.zst`` file (archived Codex rollouts): read through zstd, whole."""
    return key.endswith(ZSTD_SUFFIX.encode())


def whole_file_rows(lines: Iterable[tuple[int, bytes]]) -> tuple[int, Iterator[Row]]:
    """(mode, rows) of a file read from its start, ids as core's loader gives them."""
    stream = iter(lines)
    first: dict[str, Any] | None = None
    for offset, line in stream:
        first = parse_object(line)
        if offset == 0 and first is not None and parse_title_slot(line) is not None:
            first = None  # omp 18's title slot: the header is the next line
            continue
        if first is not None:
            break
    if first is None or not is_header(first):
        return MODE_NOT_SESSION, iter(())
    version = first.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version >= 2:
        # v2 -> v3 only renames a role, entry by entry: the file can be streamed.
        return MODE_APPENDABLE, appended_rows(stream)
    # v1: ids come from positions in the whole file, exactly as core's migration
    # derives them (so they are the ids the mount shows).
    objects: list[dict[str, Any]] = [first]
    places: list[tuple[int, bytes]] = []
    for offset, line in stream:
        obj = parse_object(line)
        if obj is not None:
            objects.append(obj)
            places.append((offset, line))
    migrate_session_entries(objects)
    rows = (
        _row(obj, offset, line) for obj, (offset, line) in zip(objects[1:], places, strict=True)
    )
    return MODE_LEGACY, (row for row in rows if row is not None)


def appended_rows(lines: Iterable[tuple[int, bytes]]) -> Iterator[Row]:
    for offset, line in lines:
        obj = parse_object(line)
        if obj is not None:
            rename_hook_message(obj)
            row = _row(obj, offset, line)
            if row is not None:
                yield row


def update_action(state: FileState | None, st: os.stat_result, fd: int) -> str:
    if state is None or (st.st_dev, st.st_ino) != (state.dev, state.ino):
        return "full"
    if st.st_size < state.indexed_to:
        return "full"  # truncated
    if fingerprints(fd, state.indexed_to) != (state.head_hash, state.tail_hash):
        return "full"  # rewritten in place
    if st.st_size == state.indexed_to:
        return "touch"  # same bytes, new mtime
    if state.mode != MODE_APPENDABLE:
        return "full"
    if state.indexed_to and read_at(fd, state.indexed_to - 1, 1) != b"\n":
        # The last line indexed had no newline: what follows on its line may make it
        # junk (``{...}{...}``), as a fresh read sees it.
        return "full"
    return "append"


def entry_ms(entry: dict[str, Any]) -> int:
    ms = iso_to_ms(entry.get("timestamp"))
    if ms is None:
        message = entry.get("message")
        stamp = message.get("timestamp") if isinstance(message, dict) else None
        try:
            ms = int(stamp) if isinstance(stamp, int | float) else 0
        except (OverflowError, ValueError):  # inf, nan
            ms = 0
    return min(max(ms, 0), MAX_MS)
