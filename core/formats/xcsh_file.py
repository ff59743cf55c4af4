"""``CompactSession``: an xcsh session that is only read, kept near its file size.

A browse-loaded ``SessionManager`` holds every entry as parsed dicts: about five to six
times the file's size in the daemon (issue 11), so ``--cache-mb 256`` held only ~45 MB
of sessions. A session that is only *read* does not need that. It keeps:

* ``data``: the file's bytes as read (one ``bytes`` object: its size is the file's;
  lines appended later grow it in place, a `GrownBytes`, so a catch-up costs what it
  appends), or
  for a file bigger than the reader's budget a `FileLines`: the open file, read a line
  at a time with ``pread`` (nothing of it stays in memory; the page cache is not the
  daemon's RSS);
* per entry: the byte span of its line, its id, its raw ``parentId`` and ``timestamp``;
* the few indexes reads ask for without touching entries: id -> position (the last
  occurrence wins, as ``SessionState.by_id``), labels, the leaf, the header.

Anything that needs an entry parses its one line (``entries/<id>.json``); a rendering
(``context.json``, ``transcript.md``...) parses every line, renders, and lets the dicts
go (`parse_entries`). What is parsed is exactly what ``SessionManager.open(browse=True,
resolve_blobs=False)`` holds for the same bytes -- the same lenient line parse, the
header check, the same leaf rule, the same catch-up rules for appended lines (``session``
lines and known ids skipped) -- so every file served from here is byte-identical to one
rendered from a manager (tests/view/test_compact_session.py).

Only files at the current format version are kept compact: migrating an older file
gives entries ids that exist only in memory, so those (and any session written through
the mount, but for appends to a big file: `core.session_tail`) keep the full manager
(`sessionfs.view.loaded_session`).
"""

from __future__ import annotations

import os
import weakref
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from core import CURRENT_SESSION_VERSION
from core.formats.grown_bytes import GrownBytes, grow
from core.jsonl import complete_prefix_length, consumed_length, is_header, parse_jsonl_lenient
from core.paths import iso_to_ms
from core.safe_open import open_regular
from core.title_slot import TITLE_SLOT_BYTES, fold_title_slot, split_title_slot
from core.tree import apply_label

__all__ = ["ENTRY_INDEX_BYTES", "CompactSession", "FileLines", "NotCompact", "read_file"]

#: What the index holds per entry besides the line's bytes (two offsets, the id and
#: parentId strings, the time, list slots, an id-index row), for the cache's budget.
#: Measured with tracemalloc (tests/view/test_compact_session.py checks it stays an
#: upper bound for corpus-shaped entries).
ENTRY_INDEX_BYTES = 360
#: How much of a `FileLines` file a scan reads at once: the scan's whole transient
#: memory (a chunk, its split lines, one line's parse).
SCAN_CHUNK_BYTES = 1 << 20
#: A ``parentId`` that is absent (not the same as ``null``: `path_to_root` stops there).
_ABSENT = object()


class NotCompact(Exception):
    """The file cannot be kept compact; ``not_a_session`` tells why."""

    def __init__(self, not_a_session: bool) -> None:
        super().__init__("not a session file" if not_a_session else "needs migration")
        self.not_a_session = not_a_session


def read_file(
    path: str | os.PathLike[str], whole_up_to: int | None = None
) -> tuple[bytes | FileLines, os.stat_result]:
    """The file's bytes and the stat of the very file they came from (a FIFO or other
    non-file is refused without blocking, as core's storage does). A file bigger than
    ``whole_up_to`` bytes is not read: it comes back as a `FileLines` over it."""
    with open_regular(path) as f:
        st = os.fstat(f.fileno())
        if whole_up_to is not None and st.st_size > whole_up_to:
            return FileLines(f.fileno(), st.st_size), st
        return f.read(), st


class FileLines:
    """A session file too big to hold, read where it is: ``lines[a:b]`` is ``pread``
    of those bytes (of the first ``size``: what was indexed, whatever was appended
    since). Holds its own descriptor of the file, so a rename or a replacement of the
    path does not change what it reads; closed when this is collected."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = os.dup(fd)
        self.size = size
        self._closer = weakref.finalize(self, os.close, self.fd)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, span: slice) -> bytes:
        start, stop, _ = span.indices(self.size)
        return os.pread(self.fd, stop - start, start) if stop > start else b""

    def complete_end(self, start: int) -> int:
        """Where the complete lines from ``start`` on end: after the last ``\\n``
        (``start`` when there is none), found reading back from the end."""
        stop = self.size
        while stop > start:
            begin = max(start, stop - SCAN_CHUNK_BYTES)
            newline = self[begin:stop].rfind(b"\n")
            if newline >= 0:
                return begin + newline + 1
            stop = begin
        return start

    def pieces(self, start: int) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of every ``\\n``-separated piece from ``start`` on, read a
        chunk at a time: the pieces ``data[start:].split(b"\\n")`` gives."""
        pos = carry_at = start
        carry = b""
        while pos < self.size:
            chunk = self[pos : min(pos + SCAN_CHUNK_BYTES, self.size)]
            if not chunk:
                break  # the file shrank under us: what is left is a tail
            pos += len(chunk)
            *lines, rest = (carry + chunk).split(b"\n")
            for line in lines:
                yield carry_at, line
                carry_at += len(line) + 1
            carry = rest
        yield carry_at, carry


def parse_line(line: bytes | memoryview) -> dict[str, Any] | None:
    """One line as core's lenient parser reads it: an object, or ``None`` (skipped; an
    empty or blank line too). ``line`` may be a view into the file's bytes (`_lines_in`)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        found = parse_jsonl_lenient(bytes(line))
        return found[0] if found else None
    return obj if isinstance(obj, dict) else None


def _object_lines(
    data: bytes | GrownBytes | FileLines, start: int = 0
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(start, end, object) of every line of ``data[start:]`` that is a JSON object,
    skipping what ``parse_jsonl_lenient`` skips."""
    # A `FileLines` is read a chunk at a time; bytes are parsed where they lie (the hot
    # path: every rendering of a session read whole goes through here).
    pieces: Iterator[tuple[int, bytes | memoryview]]
    if isinstance(data, bytes):
        pieces = _lines_in(data, start)
    elif isinstance(data, FileLines):
        pieces = data.pieces(start)
    else:
        pieces = _split_pieces(data, start)
    for pos, line in pieces:
        if line:  # (a blank line is no object either: `parse_line`)
            obj = parse_line(line)
            if obj is not None:
                yield pos, pos + len(line), obj


def _lines_in(data: bytes, start: int) -> Iterator[tuple[int, memoryview]]:
    """The pieces ``data[start:].split(b"\\n")`` gives, as views into ``data``: the
    split copied the whole file into a ``bytes`` per line (~15 % of the time to index
    a session read whole, the parse of every line included), and orjson parses a view
    as it parses bytes."""
    view = memoryview(data)
    find = data.find
    pos = start
    end = find(b"\n", pos)
    while end >= 0:
        yield pos, view[pos:end]
        pos = end + 1
        end = find(b"\n", pos)
    yield pos, view[pos:]


def _split_pieces(data: GrownBytes, start: int) -> Iterator[tuple[int, bytes]]:
    pos = start
    for line in data[start:].split(b"\n"):
        yield pos, line
        pos += len(line) + 1


def _consumed_length_of(data: FileLines) -> int:
    """`consumed_length` of the whole file, reading only its end."""
    end = data.complete_end(0)
    return end + consumed_length(data[end:])


def _starts_with_an_older_header(data: bytes, start: int) -> bool:
    """True when the line at ``start`` (the first, or the one after a title slot) is a
    header of an older format version (the usual place of the header; anything else
    is left to the full scan)."""
    newline = data.find(b"\n", start)
    first = parse_line(data[start : newline if newline >= 0 else len(data)])
    return first is not None and is_header(first) and not _current_version(first)


def _current_version(header: dict[str, Any]) -> bool:
    version = header.get("version")
    return (
        isinstance(version, int)
        and not isinstance(version, bool)
        and version >= CURRENT_SESSION_VERSION
    )


@dataclass(slots=True, eq=False)
class CompactSession:
    """One session file's bytes plus a per-entry index (see the module docstring)."""

    #: the file's bytes, grown in place by catch-ups (`GrownBytes`), or a `FileLines`
    data: bytes | GrownBytes | FileLines
    header: dict[str, Any]
    inode: int
    #: bytes of ``data`` that hold complete lines (a later catch-up reads from here)
    consumed: int = 0
    starts: array[int] = field(default_factory=lambda: array("q"))
    ends: array[int] = field(default_factory=lambda: array("q"))
    ids: list[Any] = field(default_factory=list)
    parents: list[Any] = field(default_factory=list)
    #: each entry's raw ``timestamp`` value (parsed to ms only when a stat asks)
    timestamps: list[Any] = field(default_factory=list)
    index_of_id: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    leaf_id: str | None = None
    #: a catch-up skipped lines a full load would keep (a ``session`` line, a known id):
    #: a manager built from the file now would not hold the same entries
    diverged: bool = False
    #: omp 18's title slot the file starts with (its title is folded into ``header``)
    title_slot: dict[str, Any] | None = None

    # -- building --------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        data: bytes | FileLines,
        st: os.stat_result,
        keep_entries: bool = True,
        visit: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[CompactSession, list[dict[str, Any]] | None]:
        """Index ``data`` (the file's bytes or a `FileLines` over it, ``st`` its stat).
        Returns the session and the entries parsed on the way (a caller about to render
        uses them instead of parsing again, then lets them go; ``None`` for a
        `FileLines`: a file too big to hold is not held parsed either, even for a
        moment; ``None`` too when ``keep_entries`` is False). `NotCompact` when it
        cannot be kept so.

        A caller that renders nothing passes ``keep_entries=False``: each line's dict
        then goes as soon as it is indexed, instead of all of them living until the
        end -- about five times the file's size at the peak, and for a 200,000-entry
        session twice the time (issue 26 point 6: the first ``ls entries/``). ``visit`` is
        called with each entry indexed, in order, as it is parsed (a listing measures
        it) when they are not kept."""
        head = data if isinstance(data, bytes) else data[:TITLE_SLOT_BYTES]
        slot, body = split_title_slot(head)  # entry offsets stay offsets in the file
        if isinstance(data, bytes) and _starts_with_an_older_header(data, body):
            raise NotCompact(not_a_session=False)  # before splitting every line
        lines = _object_lines(data, body)
        first = next(lines, None)
        if first is None or not is_header(first[2]):
            raise NotCompact(not_a_session=True)
        header = fold_title_slot(first[2], slot)
        if not _current_version(header):
            raise NotCompact(not_a_session=False)
        session = cls(data=data, header=header, inode=st.st_ino, title_slot=slot)
        entries: list[dict[str, Any]] | None = None
        if isinstance(data, bytes) and keep_entries:
            entries = [session._add(start, end, obj) for start, end, obj in lines]
        else:
            for start, end, obj in lines:
                session._add(start, end, obj)
                if visit is not None:
                    visit(obj)
        session.consumed = (
            consumed_length(data) if isinstance(data, bytes) else _consumed_length_of(data)
        )
        session.leaf_id = next((i for i in reversed(session.ids) if isinstance(i, str)), None)
        return session, entries

    def _add(self, start: int, end: int, entry: dict[str, Any]) -> dict[str, Any]:
        """Index one entry (as ``SessionState.index`` does for by_id and labels)."""
        entry_id = entry.get("id")
        position = len(self.ids)
        self.starts.append(start)
        self.ends.append(end)
        self.ids.append(entry_id)
        self.parents.append(entry.get("parentId", _ABSENT))
        self.timestamps.append(entry.get("timestamp"))
        if isinstance(entry_id, str):
            self.index_of_id[entry_id] = position
        if entry.get("type") == "label":
            apply_label(self.labels, entry)
        return entry

    # -- other processes' appends ------------------------------------------------------

    def catch_up(self, path: str | os.PathLike[str]) -> int | None:
        """Index the complete lines appended since the last look, as core's catch-up
        does (``session`` lines and already known ids are skipped; the leaf moves to
        the last new id). Returns how many entries were added, or ``None`` when the
        file was replaced or shrank, or its title slot was rewritten in place (the
        caller loads it again)."""
        with open_regular(path) as f:
            st = os.fstat(f.fileno())
            if st.st_ino != self.inode or st.st_size < self.consumed:
                return None
            # omp renames in place: same inode, same size, only the title slot changes.
            if (
                self.title_slot is not None
                and split_title_slot(f.read(TITLE_SLOT_BYTES))[0] != self.title_slot
            ):
                return None
            if st.st_size == self.consumed:
                return 0
            if isinstance(self.data, FileLines):
                return self._catch_up_in_place(f.fileno(), st.st_size)
            f.seek(self.consumed)
            new = f.read()
        end = complete_prefix_length(new)
        if end == 0:
            return 0
        base = self.consumed
        assert not isinstance(self.data, FileLines)  # (taken in place above)
        self.data = grow(self.data, base, new[:end])  # copies only what was appended
        self.consumed = base + end
        return self._index_appended(base)

    def _catch_up_in_place(self, fd: int, size: int) -> int:
        """`catch_up` of a `FileLines`: the complete lines appended, read a chunk at a
        time from the file as it is now (same inode: the indexed part is unchanged)."""
        base = self.consumed
        grown = FileLines(fd, size)
        end = grown.complete_end(base)
        if end == base:
            return 0
        grown.size = self.consumed = end
        self.data = grown
        return self._index_appended(base)

    def _index_appended(self, base: int) -> int:
        """Index the objects from ``base`` on (`catch_up`'s rules)."""
        known_before = len(self.ids)  # ids first seen in this batch are not "known"
        added = 0
        last = None
        for start, stop, obj in _object_lines(self.data, base):
            entry_id = obj.get("id")
            if obj.get("type") == "session" or (
                isinstance(entry_id, str)
                and self.index_of_id.get(entry_id, known_before) < known_before
            ):
                self.diverged = True
                continue
            self._add(start, stop, obj)
            added += 1
            if isinstance(entry_id, str):
                last = entry_id
        if last is not None:
            self.leaf_id = last
        return added

    # -- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    def entry(self, index: int) -> dict[str, Any]:
        """Entry ``index`` parsed from its line (a new dict each time)."""
        obj = parse_line(self.data[self.starts[index] : self.ends[index]])
        assert obj is not None  # indexed only because it parsed to an object
        return obj

    def time_ms(self, index: int) -> int | None:
        """Entry ``index``'s time in ms since the epoch (``None``: it has none)."""
        return iso_to_ms(self.timestamps[index])

    def times_ms(self) -> list[int | None]:
        """`time_ms` of every entry, in order."""
        return [iso_to_ms(timestamp) for timestamp in self.timestamps]

    def parse_entries(self) -> list[dict[str, Any]]:
        """Every entry, parsed now (the caller lets them go when done)."""
        return list(self.iter_entries())

    def iter_entries(self) -> Iterator[dict[str, Any]]:
        """Every entry parsed, one at a time (`entry` of each, in order; the lines of
        bytes held whole are parsed where they lie, as `_lines_in` does)."""
        if isinstance(self.data, FileLines):
            yield from self._entries_in_place(self.data)
            return
        data = memoryview(self.data) if isinstance(self.data, bytes) else self.data
        for start, end in zip(self.starts, self.ends, strict=True):
            obj = parse_line(data[start:end])
            assert obj is not None  # indexed only because it parsed to an object
            yield obj

    def _entries_in_place(self, data: FileLines) -> Iterator[dict[str, Any]]:
        """`iter_entries` of a file read where it is: the lines of up to
        `SCAN_CHUNK_BYTES` read at once (one ``pread`` a line cost a 350,000-entry
        ``stats.json`` ~0.4 s of its ~1.4 s CPU); a longer line alone. The lines are
        indexed in file order (a catch-up adds those after ``consumed``), so ``ends``
        is sorted."""
        starts, ends = self.starts, self.ends
        count, first = len(starts), 0
        while first < count:
            base = starts[first]
            # (at least first + 1, where the search starts: a longer line alone)
            after = bisect_right(ends, base + SCAN_CHUNK_BYTES, first + 1)
            chunk = memoryview(data[base : ends[after - 1]])
            for index in range(first, after):
                obj = parse_line(chunk[starts[index] - base : ends[index] - base])
                assert obj is not None  # indexed only because it parsed to an object
                yield obj
            first = after

    def path_indexes(self, leaf_id: str | None) -> list[int]:
        """Positions of the entries from the root down to ``leaf_id``: core's own walk
        (`path_to_root`: up each ``parentId`` to the last entry of that id, stopping
        at one without a string parent, at an unknown id, or at an entry met before),
        over the index's arrays (no stand-in an entry: tests/view/test_xcsh_stats.py
        holds it to core's walk)."""
        index_of_id, parents = self.index_of_id, self.parents
        met = bytearray(len(parents))
        path: list[int] = []
        position = index_of_id.get(leaf_id) if isinstance(leaf_id, str) else None
        while position is not None and not met[position]:
            met[position] = 1
            path.append(position)
            parent = parents[position]
            position = index_of_id.get(parent) if isinstance(parent, str) else None
        path.reverse()
        return path

    def memory_cost(self) -> int:
        """Bytes this holds: the file's bytes (none of a `FileLines`) plus the index
        (`ENTRY_INDEX_BYTES` an entry, the parsed header counted as one more)."""
        held = 0 if isinstance(self.data, FileLines) else len(self.data)
        return held + (len(self.ids) + 1) * ENTRY_INDEX_BYTES
