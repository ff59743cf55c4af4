"""The index's vocabulary, so that a prefix is looked up, not merged.

FTS5 answers a prefix query (``"sess"*``) by merging the posting lists of every term
that starts with it over the whole index before it yields a single row: 20-110 ms for
a common stem over 400,000 entries, whatever the LIMIT. The same query as an OR of the
exact terms (``"sess" OR "session" OR "sessions"``) streams newest first and stops at
LIMIT like any word: 1-3 ms. So the index keeps the list of its terms (``terms``), a
prefix is expanded there (`expand_prefix`) and FTS5 evaluates the OR.

The list must hold every term the FTS table has (a term missing from it would lose
hits; a term that is no longer in the table costs nothing). Small updates add the
terms of the rows they insert in the same transaction (`TermReader.add_terms`); a big
one (a first build) would spend more on that than on reading the FTS table's own
vocabulary once at its end (`rebuild_terms`: 3 s for 400,000 entries, against 13 s
of tokenizing the text twice), so it marks the list incomplete and rebuilds it. While
it is incomplete, a prefix is left to FTS5 as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from core.search_index.schema import TOKENIZER, get_meta, set_meta
from core.search_index.text import clean_text

#: A prefix with more terms than this is left to FTS5: an OR of N terms costs N seeks
#: (about 13 ms for 100, 80 ms for 1,000 on the 400,000-entry bench index).
MAX_EXPANSIONS: Final = 128

_READY_KEY = "terms_complete"


class TermReader:
    """Turns text into the index's terms, exactly as the FTS table's tokenizer does:
    through a scratch in-memory FTS5 table with the same tokenizer (``detail=none``:
    only the terms are wanted)."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.execute(
            "CREATE VIRTUAL TABLE scratch USING fts5(text, content='', columnsize=0,"
            f" detail=none, {TOKENIZER})"
        )
        self.conn.execute("CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, row)")

    def terms(self, texts: Sequence[str]) -> list[str]:
        """The distinct terms of ``texts``, sorted."""
        insert = "INSERT INTO scratch (rowid, text) VALUES (?, ?)"
        self.conn.execute("BEGIN")
        try:
            try:
                self.conn.executemany(insert, enumerate(texts))
            except UnicodeEncodeError:
                self.conn.executemany(insert, enumerate(clean_text(text) for text in texts))
            return [row[0] for row in self.conn.execute("SELECT term FROM scratch_terms")]
        finally:
            self.conn.execute("INSERT INTO scratch (scratch) VALUES ('delete-all')")
            self.conn.execute("COMMIT")

    def add_terms(self, conn: sqlite3.Connection, texts: Sequence[str]) -> None:
        """Add the terms of ``texts`` to the index's list (inside the caller's
        transaction, the one that inserts their rows)."""
        conn.executemany(
            "INSERT OR IGNORE INTO terms (term) VALUES (?)",
            ((term,) for term in self.terms(texts)),
        )

    def close(self) -> None:
        self.conn.close()


def terms_complete(conn: sqlite3.Connection) -> bool:
    return bool(get_meta(conn, _READY_KEY))


def mark_terms_incomplete(conn: sqlite3.Connection) -> None:
    """Before a big update (inside a transaction): its rows' terms are not added one
    batch at a time; `rebuild_terms` reads them all at its end."""
    set_meta(conn, _READY_KEY, 0)


def rebuild_terms(conn: sqlite3.Connection) -> None:
    """The list from the FTS table's own vocabulary (inside the caller's transaction,
    so no insert of another writer slips between the read and the flag)."""
    conn.execute("DELETE FROM terms")
    conn.execute("INSERT INTO terms (term) SELECT term FROM temp.fts_terms")
    set_meta(conn, _READY_KEY, 1)


def open_vocabulary(conn: sqlite3.Connection) -> None:
    """The FTS table's vocabulary as ``temp.fts_terms`` (per connection, outside any
    transaction)."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, fts, row)"
    )


def fold_term(reader: TermReader, text: str) -> str | None:
    """``text`` as the index's one term for it (None: not exactly one term). ASCII
    letters and digits fold to lower case and nothing else (unicode61 on ASCII), so
    the common case skips the tokenizer's five statements."""
    if text.isascii() and text.isalnum():
        return text.lower()
    folded = reader.terms([text])
    return folded[0] if len(folded) == 1 else None


def expand_prefix(
    conn: sqlite3.Connection, reader: TermReader, prefix: str
) -> tuple[str, ...] | None:
    """The index's terms that start with ``prefix`` (a single token as the user typed
    it; folded by the tokenizer first), or None when FTS5 must expand it itself: the
    list is incomplete, the text is not exactly one term, or more than
    `MAX_EXPANSIONS` terms start with it."""
    if not terms_complete(conn):
        return None
    low = fold_term(reader, prefix)
    if low is None:
        return None
    last = ord(low[-1])
    if last == 0x10FFFF:
        return None
    # Text compares as UTF-8 bytes, which order as code points: every term that starts
    # with ``low`` sorts before ``low`` with its last character incremented.
    high = low[:-1] + chr(last + 1 if last + 1 != 0xD800 else 0xE000)
    rows = conn.execute(
        "SELECT term FROM terms WHERE term >= ? AND term < ? LIMIT ?",
        (low, high, MAX_EXPANSIONS + 1),
    ).fetchall()
    if len(rows) > MAX_EXPANSIONS:
        return None
    return tuple(row[0] for row in rows)
