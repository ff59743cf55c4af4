"""A JSONL file held as its bytes plus what was consumed of it, read again as it grows.

Claude Code and Codex append to their session files while they run. `LineFile` keeps
the bytes of the complete lines read so far (``data``), hands each line out once as a
`Line` (its 1-based number, its span in ``data``, its object or ``None`` when it is not
a JSON object), and on `LineFile.read_new` reads only what was appended. The torn-last-
line rule is core's one rule (`core.jsonl.lines_length`; blanks after the last
newline wait too). Line numbers name entries (Claude Code's ``meta-N-*``, Codex's
``NNNNNN-*``), so they are the same however the appends were cut: a torn part, a
lone newline or blanks are never a line of their own.

A ``.jsonl.zst`` file (Codex's archived sessions) is decompressed as a stream, chunk
by chunk: the compressed file is never read whole and no second copy of the text is
made. Such a file is not expected to grow: any change reads it again.

A plain file bigger than `set_whole_read_limit`'s limit (the daemon sets it from its
cache budget; a compressed one's text bigger than it, `core.zstd_files.file_text_size`)
is not read into memory at all: its lines are indexed a megabyte at a
time and each is read from the file when asked (`core.formats.xcsh_file.FileLines`,
``pread``), so a 200 MB session of another agent costs its per-line index, not its
size (issue 26 point 6). A compressed one over the limit is read so too when a dir
to decompress it into is set (`decompressing_into`: a render worker's cache dir, the
daemon's): it
is decompressed once, a chunk at a time, into a file of that dir that has no name
(``O_TMPFILE``, 0600: sessions hold secrets), gone when the reading is. Read whole or
so, a compressed file's text stops at `core.zstd_files.most_text` (a ceiling of
1,000 times its compressed size, at least 1 GB): past it the read is refused (`TextPastItsBound`,
``EFBIG``) and nothing of it is kept, so that a file made to expand without end fills
neither the disk nor the memory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from core.formats.grown_bytes import GrownBytes, grow
from core.formats.xcsh_file import FileLines
from core.jsonl import lines_length, parse_object_line
from core.private_files import make_private_dirs
from core.safe_open import PathArg, open_regular
from core.zstd_files import ZSTD_CHUNK, ZSTD_SUFFIX, file_text_size, read_chunks

__all__ = [
    "ZSTD_SUFFIX",
    "Line",
    "LineFile",
    "decompressing_into",
    "read_zstd_prefix",
    "set_whole_read_limit",
]

#: Plain files bigger than this (bytes) are read where they are (None: every file is
#: read whole); `set_whole_read_limit`.
_whole_read_limit: list[int | None] = [None]
#: Where a compressed file over that limit is decompressed to be read where it is
#: (None: it is read whole); `decompressing_into`.
_decompress_dir: list[str | None] = [None]


def set_whole_read_limit(limit: int | None) -> int | None:
    """Read plain session files bigger than ``limit`` bytes a line at a time from now
    on (the daemon: the largest file its cache renders in memory); returns the limit
    it replaces."""
    previous, _whole_read_limit[0] = _whole_read_limit[0], limit
    return previous


def decompressing_into(directory: str | None) -> str | None:
    """Decompress compressed files over the whole-read limit into ``directory``
    (module docstring) from now on (``None``: read them whole); returns the dir it
    replaces."""
    previous, _decompress_dir[0] = _decompress_dir[0], directory
    return previous


@dataclass(frozen=True, slots=True)
class Line:
    """One non-blank line: its 1-based number in the file, its span in
    ``LineFile.data`` and its object (``None``: not a JSON object, a malformed line)."""

    number: int
    start: int
    end: int
    obj: dict[str, Any] | None


def _read_zstd(raw: BinaryIO, limit: int | None = None) -> bytes:
    """The decompressed text of ``raw``, read chunk by chunk (at most ``limit`` bytes);
    `NotZstdData` when it is not zstd data; `TextPastItsBound` past its bound."""
    out = bytearray()
    chunk_size = ZSTD_CHUNK if limit is None else min(ZSTD_CHUNK, limit)
    for chunk in read_chunks(raw, chunk_size):
        out += chunk
        if limit is not None and len(out) >= limit:
            return bytes(out[:limit])
    return bytes(out)


def read_zstd_prefix(path: PathArg, limit: int) -> bytes:
    """The first ``limit`` decompressed bytes of a ``.zst`` file (listings read only a
    session's first line)."""
    with open_regular(path) as raw:
        return _read_zstd(raw, limit)


class LineFile:
    """One session file's complete lines (see the module docstring)."""

    def __init__(self, path: PathArg) -> None:
        self.path = os.fspath(path)
        self.compressed = self.path.endswith(ZSTD_SUFFIX)
        #: the complete lines' bytes, or for a file over the limit the file itself
        self.data: bytes | GrownBytes | FileLines = b""
        #: bytes of ``data`` that are complete lines (the rest waits for its newline)
        self.consumed = 0
        #: lines (blank ones included) consumed so far: the next line's number - 1
        self.line_count = 0
        self._identity: tuple[int, int, int] = (0, 0, 0)  # inode, size, mtime_ns

    def load(self) -> Iterator[Line]:
        """Read the whole file (again); its lines, parsed one by one as they are taken
        (a reader keeps what it needs of each and lets the object go)."""
        with open_regular(self.path) as f:
            st = os.fstat(f.fileno())
            self.data, self.consumed, self.line_count = b"", 0, 0
            self._identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            limit = _whole_read_limit[0]
            # A compressed file by its text: what reading it whole would hold.
            if limit is not None and file_text_size(self.path, st.st_size, st.st_mtime_ns) > limit:
                if not self.compressed:
                    return self._take_in_place(f.fileno(), st.st_size)
                if _decompress_dir[0] is not None:
                    return self._take_decompressed(f, _decompress_dir[0])
            data = _read_zstd(f) if self.compressed else f.read()
        return self._take(data)

    def _take_decompressed(self, raw: BinaryIO, directory: str) -> Iterator[Line]:
        """`_take_in_place` of the decompressed text of ``raw``, written a chunk at a
        time into a file of ``directory`` without a name (module docstring): the
        reading holds it open (`FileLines` keeps its own descriptor), and when that
        goes, so does the file. The dir is made if it is not there (a cache dir
        cleaned meanwhile)."""
        make_private_dirs(directory)
        with tempfile.TemporaryFile(dir=directory) as copy:  # O_TMPFILE, 0600
            for chunk in read_chunks(raw):  # (refused past its bound: gone)
                copy.write(chunk)
            copy.flush()
            return self._take_in_place(copy.fileno(), copy.tell())

    def read_new(self) -> Iterator[Line] | None:
        """The lines appended since the last read (none: nothing new, or only a torn
        part), or ``None`` when the file was replaced or shrank (or a ``.zst`` changed
        at all): the caller then loads it again. ``OSError`` when it is gone."""
        with open_regular(self.path) as f:
            st = os.fstat(f.fileno())
            identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            if identity == self._identity:
                return iter(())
            if self.compressed or st.st_ino != self._identity[0] or st.st_size < self.consumed:
                return None
            self._identity = identity
            if isinstance(self.data, FileLines):
                return self._take_in_place(f.fileno(), st.st_size)
            f.seek(self.consumed)
            new = f.read()
        return self._take(new)

    def _take(self, new: bytes) -> Iterator[Line]:
        r"""Keep the complete lines of ``new`` (appended at ``consumed``) now; their
        `Line`\ s as they are iterated."""
        used = lines_length(new)
        base = self.consumed
        chunk = new[:used]
        assert not isinstance(self.data, FileLines)  # (it takes `_take_in_place`)
        if used:  # the held bytes grow in place: an append copies what it appends
            self.data = grow(self.data, base, chunk)
        self.consumed = base + used
        return self._lines(base, chunk)

    def _take_in_place(self, fd: int, size: int) -> Iterator[Line]:
        r"""`_take` of a file read where it is (``fd``, ``size`` bytes now): the
        complete lines from ``consumed`` on (the same rule: `lines_length` of what
        follows the last newline), their `Line`\ s read a chunk at a time as they are
        iterated."""
        base = self.consumed
        grown = FileLines(fd, size)
        end = grown.complete_end(base)
        end += lines_length(grown[end:size])
        grown.size = self.consumed = end
        self.data = grown
        return self._lines_in_place(grown, base, end)

    def _lines_in_place(self, data: FileLines, base: int, end: int) -> Iterator[Line]:
        """`_lines` of ``data[base:end]`` (``end``: ``data.size``), read a chunk at a time."""
        position = base
        if base and data[base - 1 : base] != b"\n":
            # The rest of a last line handed out whole without its newline (`_lines`).
            start, rest = next(data.pieces(base))
            position = min(start + len(rest) + 1, end)
        if position >= end:
            return
        for start, text in data.pieces(position):
            if start >= end:
                break  # after the last newline: nothing, not a line
            self.line_count += 1
            if text and not text.isspace():
                yield Line(self.line_count, start, start + len(text), parse_object_line(text))

    def _lines(self, base: int, chunk: bytes) -> Iterator[Line]:
        position = base
        if base and self.data[base - 1 : base] != b"\n":
            # The last line was whole without its newline and was handed out: what
            # comes up to its newline (blanks, or junk after an object) is the rest of
            # it, no line of its own -- as a fresh load of the file would read it.
            rest = chunk.find(b"\n") + 1 or len(chunk)
            position += rest
            chunk = chunk[rest:]
        if not chunk:
            return  # nothing whole yet (a torn part): no line, nothing counted
        pieces = chunk.split(b"\n")
        if chunk.endswith(b"\n"):
            pieces.pop()  # after the last newline: nothing, not a line
        for text in pieces:
            end = position + len(text)
            self.line_count += 1
            if text and not text.isspace():
                yield Line(self.line_count, position, end, parse_object_line(text))
            position = end + 1

    def raw(self, start: int, end: int) -> bytes:
        return self.data[start:end]

    def memory_cost(self) -> int:
        return 0 if isinstance(self.data, FileLines) else len(self.data)
