"""What an append needs of a session file, found without parsing the file.

An append chains a new entry onto the leaf and gives it an id no entry has; it needs
nothing else of the entries already there. So an append to a session nobody has read
yet (issue 26 point 6: a 200,000-entry file, whose parse alone took 0.45 s) reads:

* the head: the title slot and the header (a current format version only: an older
  file is migrated by a full load, its ids exist nowhere on disk);
* the tail, from the end backwards: where its complete lines end (`consumed_length`'s
  rule, so lines another process appends later are caught up from there and nothing
  is glued onto a torn line) and the id of its last entry, the leaf after a load;
* for each id it asks about (a new id's uniqueness, an id a line refers to), the lines
  holding that id as a JSON string: one pass over the file with ``pread`` a chunk at
  a time, each hit's line parsed. Exact, and the loader's rule: the entry with that
  ``id`` (the last one of a repeated id), never the header.

`FileTail` holds the first two, `ScannedEntries` answers the third; a session already
held compact answers it from its index instead (`IndexedEntries`).
`core.manager.SessionManager.open_tail` builds the manager such an append goes through.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from core.jsonl import consumed_length, is_header, parse_jsonl_lenient
from core.migrate import CURRENT_SESSION_VERSION
from core.safe_open import PathArg, open_regular_fd
from core.title_slot import TITLE_SLOT_BYTES, Slot, fold_title_slot, split_title_slot

__all__ = [
    "FileTail",
    "IndexedEntries",
    "KnownEntries",
    "ScannedEntries",
    "TailIndex",
    "read_file_tail",
]

Entry = dict[str, Any]

#: How much of the file one ``pread`` takes (the scans' whole transient memory).
CHUNK_BYTES = 256 * 1024
#: How far back from the end the leaf is looked for; a file whose last this many bytes
#: hold no entry with an id is left to a full load.
LEAF_SEARCH_BYTES = 8 * 1024 * 1024


class KnownEntries(Protocol):
    """The entries of a session file that a manager does not hold, by id."""

    def get(self, entry_id: str) -> Entry | None: ...


@dataclass(frozen=True, slots=True)
class FileTail:
    """What an append needs of a session file besides its ids (module docstring)."""

    header: Entry  # title slot folded in
    title_slot: Slot | None
    leaf_id: str | None
    inode: int
    #: where the file's complete lines end (a catch-up reads from here)
    end: int
    #: where the first line after the header starts (entries live from here on)
    body_start: int


def _parse(line: bytes) -> Entry | None:
    found = parse_jsonl_lenient(line) if line and not line.isspace() else []
    return found[0] if found else None


def _current_version(header: Entry) -> bool:
    version = header.get("version")
    return (
        isinstance(version, int)
        and not isinstance(version, bool)
        and version >= CURRENT_SESSION_VERSION
    )


def read_file_tail(path: PathArg) -> FileTail | None:
    """The head and tail of the session file at ``path``; None when it is not the plain
    case an append can take without a load: no header on the first line (after a title
    slot), an older format version, no entry with an id in the last
    `LEAF_SEARCH_BYTES` while there are more lines before them. ``OSError`` when it
    cannot be read (a FIFO is refused without blocking)."""
    fd = open_regular_fd(path)
    try:
        st = os.fstat(fd)
        head = _read_line_at(fd, 0, st.st_size, TITLE_SLOT_BYTES)
        slot, body = split_title_slot(head + b"\n" if len(head) < st.st_size else head)
        header_line = _read_line_at(fd, body, st.st_size, CHUNK_BYTES) if body else head
        header = _parse(header_line)
        if header is None or not is_header(header) or not _current_version(header):
            return None
        body_start = body + len(header_line) + 1
        end = _consumed_end(fd, st.st_size)
        if end < body_start:  # only the header: no entry yet
            return FileTail(fold_title_slot(header, slot), slot, None, st.st_ino, end, end)
        found = _last_id(fd, body_start, end)
        if found is _NOT_FOUND:
            return None
        leaf = found if isinstance(found, str) else None
        return FileTail(fold_title_slot(header, slot), slot, leaf, st.st_ino, end, body_start)
    finally:
        os.close(fd)


def _read_line_at(fd: int, start: int, size: int, first_read: int) -> bytes:
    """The line starting at ``start`` (without its newline; up to ``size``)."""
    data = b""
    pos = start
    step = first_read
    while pos < size:
        piece = os.pread(fd, min(step, size - pos), pos)
        if not piece:
            break
        newline = piece.find(b"\n")
        if newline >= 0:
            return data + piece[:newline]
        data += piece
        pos += len(piece)
        step = CHUNK_BYTES
    return data


def _consumed_end(fd: int, size: int) -> int:
    """`consumed_length` of the whole file, reading only its end."""
    pos = size
    while pos > 0:
        begin = max(0, pos - CHUNK_BYTES)
        newline = os.pread(fd, pos - begin, begin).rfind(b"\n")
        if newline >= 0:
            last = begin + newline + 1
            return last + consumed_length(os.pread(fd, size - last, last))
        pos = begin
    return consumed_length(os.pread(fd, size, 0))


_NOT_FOUND = object()


def _last_id(fd: int, body_start: int, end: int) -> object:
    """The ``id`` of the last entry line in ``[body_start, end)`` that has a string
    one (None: no line has one), read back from ``end``; `_NOT_FOUND` after
    `LEAF_SEARCH_BYTES` without one."""
    pos = end
    carry = b""  # the start of a line whose beginning is not read yet
    while pos > body_start:
        if end - pos >= LEAF_SEARCH_BYTES:
            return _NOT_FOUND
        begin = max(body_start, pos - CHUNK_BYTES)
        lines = (os.pread(fd, pos - begin, begin) + carry).split(b"\n")
        pos = begin
        carry = lines[0] if pos > body_start else b""
        complete = lines[1:] if pos > body_start else lines
        for line in reversed(complete):
            entry = _parse(line)
            if entry is not None and isinstance(entry.get("id"), str):
                return entry["id"]
    return None


class ScannedEntries:
    """`KnownEntries` of a session file read for each id asked (module docstring):
    the entries in ``[tail.body_start, tail.end)`` of the file at ``path``. Answers
    are kept: the file only grows under an append, and what grew is caught up."""

    def __init__(self, path: PathArg, tail: FileTail) -> None:
        self.path = path
        self.start = tail.body_start
        self.end = tail.end
        self._found: dict[str, Entry | None] = {}

    def get(self, entry_id: str) -> Entry | None:
        if entry_id not in self._found:
            self._found[entry_id] = self._scan(entry_id)
        return self._found[entry_id]

    def _scan(self, entry_id: str) -> Entry | None:
        needle = orjson.dumps(entry_id)
        found = None
        fd = open_regular_fd(self.path)
        try:
            for line in _lines_holding(fd, needle, self.start, self.end):
                entry = _parse(line)
                if entry is not None and entry.get("id") == entry_id:
                    found = entry  # a repeated id: the last one, as a load keeps
        finally:
            os.close(fd)
        return found


def _lines_holding(fd: int, needle: bytes, start: int, end: int) -> Iterator[bytes]:
    """Each line in ``[start, end)`` of ``fd`` that holds ``needle``, once, in order.
    Read into one buffer and searched there (no copy of the file's bytes besides the
    read: the scan is the cost of an append to a session not read yet)."""
    overlap = len(needle) - 1  # a hit across two reads starts in the last ones kept
    buffer = bytearray(overlap + CHUNK_BYTES)
    view = memoryview(buffer)
    kept = 0  # bytes of the previous read kept before this one
    pos = start
    after_line = start  # a hit before this is on a line already given
    try:
        while pos < end:
            read = os.preadv(fd, [view[overlap : overlap + min(CHUNK_BYTES, end - pos)]], pos)
            if read <= 0:
                break
            stop = overlap + read
            hit = buffer.find(needle, overlap - kept, stop)
            while hit >= 0:
                at = pos - overlap + hit
                if at >= after_line:
                    line_start, line_end = _line_around(fd, at, start, end)
                    after_line = line_end + 1
                    yield os.pread(fd, line_end - line_start, line_start)
                hit = buffer.find(needle, hit + 1, stop)
            buffer[:overlap] = buffer[read:stop]
            kept = min(overlap, kept + read)
            pos += read
    finally:
        view.release()


def _line_around(fd: int, at: int, start: int, end: int) -> tuple[int, int]:
    """The span (without newline) of the line holding offset ``at``."""
    line_start = at
    while line_start > start:
        begin = max(start, line_start - CHUNK_BYTES)
        newline = os.pread(fd, line_start - begin, begin).rfind(b"\n")
        if newline >= 0:
            line_start = begin + newline + 1
            break
        line_start = begin
    line_end = at
    while line_end < end:
        piece = os.pread(fd, min(CHUNK_BYTES, end - line_end), line_end)
        newline = piece.find(b"\n")
        if newline >= 0:
            return line_start, line_end + newline
        line_end += len(piece)
    return line_start, end


class IndexedEntries:
    """`KnownEntries` of a session held compact: its id index and a parse of one line
    (`core.formats.xcsh_file.CompactSession`'s ``index_of_id`` and ``entry``)."""

    def __init__(self, index_of_id: Mapping[str, int], entry: Callable[[int], Entry]) -> None:
        self._index_of_id = index_of_id
        self._entry = entry

    def get(self, entry_id: str) -> Entry | None:
        position = self._index_of_id.get(entry_id)
        return self._entry(position) if position is not None else None


class TailIndex(dict[str, Entry]):
    """``by_id`` of a manager that holds only the entries appended (or caught up)
    through it: an id it does not hold is looked up in ``known``, the file's."""

    def __init__(self, known: KnownEntries) -> None:
        super().__init__()
        self.known = known

    def __contains__(self, entry_id: object) -> bool:
        if dict.__contains__(self, entry_id):
            return True
        return isinstance(entry_id, str) and self.known.get(entry_id) is not None

    def get(self, entry_id: str, default: Any = None) -> Any:
        found = dict.get(self, entry_id)
        if found is None and isinstance(entry_id, str):
            found = self.known.get(entry_id)
        return default if found is None else found
