"""Candidate scans: the matching rows of a query, newest first (`matching_rows`), the
check of candidates against the rest of a costly query (`Verifier`), and reading an
indexed line back from its session file (`LineReader`).
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from core.safe_open import open_regular_fd
from core.search_index.formats import FileFormat
from core.search_index.row_sessions import EntryReader, RowReader
from core.search_index.rowids import SEQ_BITS, TOP_ROWID
from core.search_index.rows import is_compressed, parse_object, read_at, read_decompressed_at
from core.search_index.schema import FTS_OPTIONS
from core.search_index.text import clean_text
from core.zstd_files import zstd_chunks

_COLUMNS = """
SELECT e.rowid, e.ts, e.entry_id, e.role, e.line_offset, e.line_length, e.line_crc, f.key,
    f.dev, f.ino, f.size, f.mtime_ns
FROM fts JOIN entries e ON e.rowid = fts.rowid JOIN files f ON f.id = e.file_id
"""
_SEARCH_SQL = _COLUMNS + "WHERE fts MATCH ? AND fts.rowid < ? ORDER BY fts.rowid DESC"
# One bucket's rows in match order, a page at a time (the page after the row whose
# order is given, when there is one): SQLite keeps the top of the sort in C.
_BUCKET_ORDER = "ORDER BY -e.ts, f.key, e.entry_id, e.rowid LIMIT ?"
_BUCKET_SQL = _COLUMNS + "WHERE fts MATCH ? AND fts.rowid >= ? AND fts.rowid < ? " + _BUCKET_ORDER
_BUCKET_AFTER_SQL = (
    _COLUMNS
    + "WHERE fts MATCH ? AND fts.rowid >= ? AND fts.rowid < ?"
    + " AND (-e.ts, f.key, e.entry_id, e.rowid) > (?, ?, ?, ?) "
    + _BUCKET_ORDER
)

_Rows = list[Any]
_Keep = Callable[[_Rows], _Rows]

#: The most decompressed text of archived ``.jsonl.zst`` files one search keeps, so that
#: many hits in one archive decompress it once; past it, each hit's line is read by
#: decompressing its archive from the start (`read_decompressed_at`).
DECOMPRESSED_KEEP = 32 * 1024 * 1024

#: Rows of the last bucket reached read in rowid order beyond the ``want`` asked for;
#: past them the bucket is read sorted by SQLite instead (`_bucket_rows`). Real
#: sessions rarely put that many matches in one 70-minute bucket; sessions generated
#: with the same times put every match there (40,000 rows: 110 ms in Python, 5 ms
#: sorted by SQLite), but a second statement costs a prefix's expansions again.
_BUCKET_REST_ROWS = 1024


def match_order(row: Any) -> tuple[int, bytes, str, int]:
    """Where a row's hit comes: newest first; rows of one millisecond by their session
    file's key, then entry id, then rowid (what `_bucket_rows` sorts by in SQL)."""
    return (-row[1], row[7], row[2], row[0])


def matching_rows(
    conn: sqlite3.Connection, match: str, want: int, keep: _Keep | None = None
) -> Iterator[Any]:
    """Every row ``match`` matches, in `match_order`, fetched about ``want`` at a time
    (``keep``, when given, filters each fetched slice)."""
    below = TOP_ROWID
    while below > 0:
        rows, next_below, big_bucket = newest_matches(conn, match, below, want, keep)
        yield from rows
        if big_bucket:
            yield from _bucket_rows(conn, match, (next_below, below), want, keep)
        below = next_below


def newest_matches(
    conn: sqlite3.Connection, match: str, below: int, want: int, keep: _Keep | None = None
) -> tuple[_Rows, int, bool]:
    """The ``want`` newest matching rows with rowid < ``below`` and the rest of their
    last bucket (fewer only when there are no more), in `match_order`; the rowid to
    continue below (0: no more); and whether that bucket's rows are left out because
    it holds too many (the caller reads them with `_bucket_rows`).
    ``keep`` (when given) filters each fetched slice of rows before they count.

    Rowid order is time order between buckets, not inside one: so the rest of the last
    bucket reached is read too, and the rows are sorted by their exact timestamps. One
    streamed statement, not a LIMIT query plus a second one for the bucket's rest: a
    prefix term costs FTS5 a merge of every expansion's postings per statement (unless
    the rest is longer than `_BUCKET_REST_ROWS`)."""
    rows: _Rows = []
    bucket_start = -1
    in_bucket = 0  # rows read of the last bucket
    next_below = 0
    cursor = conn.execute(_SEARCH_SQL, (match, below))
    try:
        while next_below == 0:
            chunk = cursor.fetchmany(max(want, 64))
            if not chunk:
                break
            for row in chunk if keep is None else keep(chunk):
                if row[0] < bucket_start:
                    next_below = bucket_start
                    break
                rows.append(row)
                if bucket_start >= 0:
                    in_bucket += 1
                    if in_bucket > _BUCKET_REST_ROWS:
                        newer = [kept for kept in rows if kept[0] >= bucket_start + (1 << SEQ_BITS)]
                        newer.sort(key=match_order)
                        return newer, bucket_start, True
                elif len(rows) == want:
                    bucket_start = (row[0] >> SEQ_BITS) << SEQ_BITS
                    in_bucket = sum(1 for kept in rows if kept[0] >= bucket_start)
    finally:
        cursor.close()
    rows.sort(key=match_order)
    return rows, next_below, False


def _bucket_rows(
    conn: sqlite3.Connection,
    match: str,
    rowids: tuple[int, int],
    want: int,
    keep: _Keep | None = None,
) -> Iterator[Any]:
    """The matching rows with a rowid in [``rowids``) (one bucket), in `match_order`,
    ``want`` (at least 64) a statement: each statement reads the bucket's matches again."""
    start, end = rowids
    size = max(want, 64)
    page = conn.execute(_BUCKET_SQL, (match, start, end, size)).fetchall()
    while page:
        yield from page if keep is None else keep(page)
        if len(page) < size:
            return
        last = match_order(page[-1])
        page = conn.execute(_BUCKET_AFTER_SQL, (match, start, end, *last, size)).fetchall()


class Verifier:
    """Checks candidate rows (see `QueryPlan`) against the plan's checks: their indexed
    text, read back from the session files, goes into a scratch in-memory FTS5 table
    with the index's own options, and each check runs there on what passed the one
    before. FTS5 itself decides, so a row is kept exactly when the index would have
    matched it."""

    def __init__(self, checks: Sequence[str], reader: EntryReader) -> None:
        self.checks = checks
        self.reader = reader
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(text, {FTS_OPTIONS})")

    def keep(self, rows: _Rows) -> _Rows:
        """The rows whose text matches every check (stale lines are dropped)."""
        texts: dict[int, str] = {}
        for rowid, _, entry_id, _, offset, length, crc, key, *indexed in rows:
            text = self.reader.text(key, entry_id, (offset, length, crc, *indexed))
            if text is not None:
                texts[rowid] = clean_text(text)
        for check in self.checks:
            if not texts:
                break
            texts = {rowid: texts[rowid] for rowid in self._matching(texts, check)}
        return [row for row in rows if row[0] in texts]

    def _matching(self, texts: dict[int, str], check: str) -> set[int]:
        self.conn.executemany("INSERT INTO scratch (rowid, text) VALUES (?, ?)", texts.items())
        try:
            found = self.conn.execute("SELECT rowid FROM scratch WHERE scratch MATCH ?", (check,))
            return {row[0] for row in found}
        finally:
            self.conn.execute("INSERT INTO scratch (scratch) VALUES ('delete-all')")

    def close(self) -> None:
        self.conn.close()


def entry_reader(root: str, file_format: FileFormat) -> EntryReader:
    """The reader of ``file_format``'s indexed texts under ``root``."""
    lines = LineReader(root, file_format.line_text)
    if file_format.row_sessions is not None:
        return RowReader(root, file_format.row_sessions, lines)
    return lines


class LineReader:
    """Reads indexed lines back for snippets, one open descriptor per file."""

    def __init__(self, root: str, line_text: Callable[[dict[str, Any]], str | None]) -> None:
        self.root = root
        #: the indexed text of one parsed line (`core.search_index.formats`)
        self.line_text = line_text
        # key -> (descriptor, its (dev, ino, size, mtime_ns)), None: cannot be read
        self.files: dict[bytes, tuple[int, list[int]] | None] = {}
        # key of a .zst -> its decompressed text, None: too big to keep (`DECOMPRESSED_KEEP`)
        self._archives: dict[bytes, bytes | None] = {}
        self._archived_bytes = 0

    def text(self, key: bytes, entry_id: str, place: Sequence[int]) -> str | None:
        """The entry's indexed text, or None when the line is not what was indexed.
        ``place`` is the line's offset, length and checksum, then the file's (dev,
        ino, size, mtime_ns) when the index read it: a file that still has them holds
        the same bytes, so the checksum (0.1 ms for a 60 kB tool output) is only
        computed for a file changed since."""
        offset, length, crc, *indexed = place
        if key not in self.files:
            self.files[key] = self._open(key)
        opened = self.files[key]
        if opened is None:
            return None
        fd, now = opened
        try:
            if is_compressed(key):
                line = self._read_archived(key, fd, offset, length)
            else:
                line = read_at(fd, offset, length)
        except OSError:  # gone, or (a .zst) not zstd data any more
            return None
        if len(line) != length or (now != list(indexed) and zlib.crc32(line) != crc):
            return None
        entry = parse_object(line)
        if entry is None:
            return None
        return self.line_text(entry)

    def _read_archived(self, key: bytes, fd: int, offset: int, length: int) -> bytes:
        if key not in self._archives:
            self._archives[key] = self._decompress(fd)
        text = self._archives[key]
        if text is None:
            return read_decompressed_at(fd, offset, length)
        return text[offset : offset + length]

    def _decompress(self, fd: int) -> bytes | None:
        """The whole decompressed text of the archive at ``fd``, or None when it would
        take the kept text past `DECOMPRESSED_KEEP`."""
        room = DECOMPRESSED_KEEP - self._archived_bytes
        chunks, size = [], 0
        for chunk in zstd_chunks(fd):
            size += len(chunk)
            if size > room:
                return None
            chunks.append(chunk)
        self._archived_bytes += size
        return b"".join(chunks)

    def _open(self, key: bytes) -> tuple[int, list[int]] | None:
        try:
            fd = open_regular_fd(os.path.join(self.root, os.fsdecode(key)))
        except OSError:
            return None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return None
        return fd, [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]

    def close(self) -> None:
        for opened in self.files.values():
            if opened is not None:
                os.close(opened[0])
