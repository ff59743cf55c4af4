"""Full-text search over every session's messages: an SQLite FTS5 index in a cache dir.

The mount's ``search/<words>`` and ``sessionfs search`` read it; a background indexer
keeps it current with `SearchIndex.update`. It is a *cache*: every answer can be
rebuilt from the session files, so a corrupt, foreign or outdated database file is
replaced, never trusted, and a database that cannot be written (full disk, read-only
dir) makes the index report itself unavailable instead of failing its callers.

What is indexed (one FTS row per entry, at most `MAX_INDEXED_CHARS` of text each):
user and assistant messages (text, **thinking included**: "why did it decide that"
is a question people search for, and tool calls as name + argument values), tool
results, bash/python executions (command/code + output), custom messages, compaction
and branch summaries, labels, and a sub-agent's ``session_init`` task. Image data and
blob refs are not text and are skipped. Capping the text keeps a 500 kB tool output
(a log, a generated file) from dominating the index; what lies beyond the cap is
still found by ``grep`` over ``transcripts/``.

Layout and size
---------------
The FTS table is *contentless* (``content=''``): it stores only the inverted index,
not a second copy of the text. Hits are turned into snippets by re-reading the one
line of the session file they came from (offset, length and a checksum are kept per
row; a line that no longer matches is a stale hit and is not shown). That keeps the
index near 30 % of the session files' size with ``detail=full``, which phrase queries
need.

SQLite 3.40 cannot delete rows from a contentless table, so dropping a file's rows
marks them dead in ``entries`` (``file_id`` NULL) and queries skip them; when dead rows
outnumber half the live ones the whole index is rebuilt from the files.

Order
-----
FTS5 streams matches in rowid order and stops at LIMIT, so rowids follow time: a rowid
is ``bucket << 32 | n`` where the bucket is the entry's timestamp in ~70-minute steps
and ``n`` counts the rows ever given to that bucket. Every row of a newer bucket is
newer than every row of an older one, so the newest ``limit`` matches are the first
``limit`` in rowid order plus the rest of the last bucket touched, sorted by their
exact timestamps. (A plain ``timestamp_ms << k`` rowid would order exactly too, but
FTS5 stores rowid *deltas* per posting: dense rowids within a bucket keep the index
about half the size.) Rowids are never reused: dead rows keep theirs until a rebuild.

Costly queries
--------------
FTS5 walks one posting list per token of a query and checks the positions of every
phrase token in every entry that has them all, so its cost grows with the query: a
pasted 3,000-word phrase took 40 s. `plan_query` keeps repeated terms once and, beyond
`_MAX_INDEX_PHRASES` phrases or `_MAX_PHRASE_TOKENS` tokens a phrase, runs a bounded
part of the query on the index (the longest-worded runs of the phrases, every single
word) and checks each candidate's text against the rest in a scratch FTS5 table with
the same options (`_Verifier`), so what a query finds does not change.

Incremental updates
-------------------
Per file the index remembers device, inode, size, mtime, how many bytes of complete
lines it indexed, and fingerprints (a hash) of the first and last 4 KiB of those bytes.
Unchanged stat -> nothing is read. Grown, same inode, same fingerprints -> only the
new complete lines are read (a torn last line waits for its newline). Shrunk, other
inode, or other fingerprints -> the file's rows are dropped and it is indexed again.
Gone -> its rows are dropped. Version-1 files (no entry ids) get the ids core's
migration derives; a changed v1 file is reindexed whole (current agents never append
to one).

Concurrency
-----------
WAL mode and ``busy_timeout``: readers (threads or processes) search while an indexer
writes. Every write transaction is ``BEGIN IMMEDIATE`` and re-reads a file's state
under the lock, so two indexers never index the same lines twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
import threading
import time
import unicodedata
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from core.blobs import BLOB_REF_PREFIX
from core.jsonl import is_header, loads
from core.migrate import migrate_session_entries
from core.paths import iso_to_ms, ms_to_iso
from core.safe_open import open_regular_fd

__all__ = [
    "MAX_INDEXED_CHARS",
    "MAX_LIMIT",
    "SCHEMA_VERSION",
    "Hit",
    "QueryPlan",
    "SearchIndex",
    "UpdateStats",
    "build_match_query",
    "entry_search_text",
    "format_hit",
    "parse_query",
    "plan_query",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 1
#: ``PRAGMA application_id`` of our databases ("SFSI"): anything else is foreign.
APPLICATION_ID: Final = 0x53465349
MAX_INDEXED_CHARS: Final = 64 * 1024
MAX_LIMIT: Final = 1000
BUSY_TIMEOUT_MS: Final = 5000
FINGERPRINT_BYTES: Final = 4096

# One write transaction holds at most this much file data: large enough that commits
# are rare, small enough that the write lock is held for well under a second.
_BATCH_BYTES = 16 * 1024 * 1024
_BATCH_FILES = 400
# Files are read and their rows inserted in slices of these sizes: memory stays small
# whatever the size of one session file.
_READ_CHUNK = 4 * 1024 * 1024
_INSERT_CHARS = 4 * 1024 * 1024
# Sub-agent session files live in a session's artifacts dir, which may hold its own
# sub-agents' dirs; deeper than this is not a real layout.
_MAX_NESTING = 8
_SEQ_BITS = 32
# 2**22 ms: about 70 minutes per bucket. Wider buckets make a query read more rows of
# its last bucket; narrower ones cost a large rowid delta per posting more often.
_BUCKET_SHIFT = 22
_MAX_MS = (1 << (63 - _SEQ_BITS + _BUCKET_SHIFT)) - 1
_TOP_ROWID = (1 << 63) - 1
# Dead rows are rebuilt away once they exceed max(this, half the live rows).
_MIN_DEAD_FOR_REBUILD = 20_000
_SNIPPET_BEFORE = 60
_SNIPPET_CHARS = 200
_MAX_QUERY_TERMS = 64
# A shorter last word is matched whole: "a*" or "to*" would make FTS5 merge the postings
# of a good part of the vocabulary (100+ ms on a large index) to find what "a" finds.
_MIN_PREFIX_CHARS = 3

# A file's mode: what may be done when it grows.
_MODE_NOT_SESSION = 0  # no header (yet): any change -> read it whole again
_MODE_LEGACY = 1  # v1: ids are derived from positions -> any change -> read it whole
_MODE_APPENDABLE = 2  # ids in the file: index only the new lines

# The candidate check (`_Verifier`) builds a table with the same options, so a query
# means the same thing there as in the index.
_FTS_OPTIONS = "content='', columnsize=0, detail=full, tokenize='unicode61 remove_diacritics 2'"

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    """CREATE TABLE files (
        id INTEGER PRIMARY KEY,
        key BLOB NOT NULL UNIQUE,
        dev INTEGER NOT NULL, ino INTEGER NOT NULL,
        size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
        indexed_to INTEGER NOT NULL,
        head_hash INTEGER NOT NULL, tail_hash INTEGER NOT NULL,
        mode INTEGER NOT NULL)""",
    # rowid = FTS rowid = bucket << 32 | n (module docstring). file_id NULL: a dead row.
    """CREATE TABLE entries (
        rowid INTEGER PRIMARY KEY,
        file_id INTEGER,
        ts INTEGER NOT NULL,
        entry_id TEXT NOT NULL, role TEXT NOT NULL,
        line_offset INTEGER NOT NULL, line_length INTEGER NOT NULL,
        line_crc INTEGER NOT NULL)""",
    # Rows handed out per time bucket so far (never decreases until a rebuild).
    "CREATE TABLE buckets (bucket INTEGER PRIMARY KEY, used INTEGER NOT NULL)",
    "CREATE INDEX entries_by_file ON entries(file_id) WHERE file_id IS NOT NULL",
    "CREATE VIRTUAL TABLE fts USING fts5(text, " + _FTS_OPTIONS + ")",
)
_SCHEMA_TABLES = frozenset({"meta", "files", "entries", "buckets", "fts"})

_SEARCH_SQL = """
SELECT e.rowid, e.ts, e.entry_id, e.role, e.line_offset, e.line_length, e.line_crc, f.key
FROM fts JOIN entries e ON e.rowid = fts.rowid JOIN files f ON f.id = e.file_id
WHERE fts MATCH ? AND fts.rowid < ?
ORDER BY fts.rowid DESC
"""

# SQLite primary result codes (``exc.sqlite_errorcode & 0xff``).
_SQLITE_PERM, _SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY = 3, 5, 6, 8
_SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN = 10, 11, 13, 14
_SQLITE_NOTADB = 26
_CORRUPT_CODES = frozenset({_SQLITE_CORRUPT, _SQLITE_NOTADB})
_UNWRITABLE_CODES = frozenset(
    {_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN}
)


class Hit(NamedTuple):
    """One matching entry. ``stem`` is the session file's path below its project dir
    without ``.jsonl``: ``<stem>`` for a session, ``<stem>/<task>`` for a sub-agent
    session file in its artifacts dir."""

    timestamp_ms: int
    project: str
    stem: str
    entry_id: str
    role: str
    snippet: str


#: The write-ahead log is cut back to this size after each checkpoint.
_WAL_SIZE_LIMIT = 4 << 20
#: An update that read this much session data folds the log into the index at its end.
_FOLD_LOG_AFTER_BYTES = 16 << 20


@dataclass
class UpdateStats:
    """What one `SearchIndex.update` did."""

    files_seen: int = 0
    files_unchanged: int = 0
    files_appended: int = 0  # only new lines read
    files_indexed: int = 0  # read whole: new, replaced, truncated, rewritten, v1
    files_removed: int = 0
    bytes_read: int = 0
    entries_indexed: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    #: why the update stopped early (the index is then unavailable or busy), or None.
    error: str | None = None
    #: files that could not be read (path: reason); they are retried next time.
    skipped: list[str] = field(default_factory=list)


# --- text of an entry ----------------------------------------------------------------


def _strings(value: Any, out: list[str], depth: int = 0) -> None:
    """Every string leaf of a JSON value (tool call arguments), blob refs excluded."""
    if isinstance(value, str):
        if value and not value.startswith(BLOB_REF_PREFIX):
            out.append(value)
    elif depth < 32:
        if isinstance(value, dict):
            for item in value.values():
                _strings(item, out, depth + 1)
        elif isinstance(value, list):
            for item in value:
                _strings(item, out, depth + 1)


def _content_strings(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        if not content.startswith(BLOB_REF_PREFIX):
            out.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, str):
            out.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "toolCall":
                name = block.get("name")
                if isinstance(name, str):
                    out.append(name)
                _strings(block.get("arguments"), out)
                continue
            text = block.get("thinking") if kind == "thinking" else block.get("text")
            if isinstance(text, str) and not text.startswith(BLOB_REF_PREFIX):
                out.append(text)


def _message_strings(message: dict[str, Any], out: list[str]) -> None:
    if message.get("role") in ("bashExecution", "pythonExecution"):
        for key in ("command", "code", "output"):
            value = message.get(key)
            if isinstance(value, str):
                out.append(value)
        return
    _content_strings(message.get("content"), out)


def _entry_strings(entry: dict[str, Any], out: list[str]) -> str | None:
    """Append the entry's searchable strings to ``out``; return its role, or None when
    the entry is not a kind that is searched."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            return None
        _message_strings(message, out)
        role = message.get("role")
        return role if isinstance(role, str) else "message"
    if kind in ("compaction", "branch_summary"):
        for key in ("summary", "shortSummary"):
            value = entry.get(key)
            if isinstance(value, str):
                out.append(value)
    elif kind == "custom_message":
        _content_strings(entry.get("content"), out)
    elif kind == "label":
        value = entry.get("label")
        if isinstance(value, str):
            out.append(value)
    elif kind == "session_init":
        value = entry.get("task")
        if isinstance(value, str):
            out.append(value)
    else:
        return None
    return str(kind)


def entry_search_text(entry: dict[str, Any]) -> tuple[str, str] | None:
    """``(role, text)`` an entry is indexed under, or None when it has no text.

    ``role`` is the message role for ``message`` entries, else the entry type
    (``compaction``, ``branch_summary``, ``custom_message``, ``label``,
    ``session_init``). The text is capped at `MAX_INDEXED_CHARS`.
    """
    parts: list[str] = []
    role = _entry_strings(entry, parts)
    if role is None or not parts:
        return None
    text = "\n".join(parts)
    if len(text) > MAX_INDEXED_CHARS:
        text = text[:MAX_INDEXED_CHARS]
    return (role, text) if text and not text.isspace() else None


def _entry_ms(entry: dict[str, Any]) -> int:
    ms = iso_to_ms(entry.get("timestamp"))
    if ms is None:
        message = entry.get("message")
        stamp = message.get("timestamp") if isinstance(message, dict) else None
        try:
            ms = int(stamp) if isinstance(stamp, int | float) else 0
        except (OverflowError, ValueError):  # inf, nan
            ms = 0
    return min(max(ms, 0), _MAX_MS)


# --- queries ---------------------------------------------------------------------------

# unicode61 splits on everything that is not a letter, a number or a private-use char;
# a term without any of those would be an empty FTS5 phrase.
_TOKEN_RE = re.compile(r"[^\W_]+")


class QueryTerm(NamedTuple):
    text: str  # what the user typed for this term, without quotes
    phrase: bool  # came from "quoted phrase"
    prefix: bool  # the last plain word: matches as a word prefix


def parse_query(query: str) -> list[QueryTerm]:
    """Split user text into terms: whitespace-separated words, ``"quoted phrases"``
    (an unclosed quote runs to the end), NUL as whitespace; terms without any letter or
    digit are dropped; the last term, when it is a plain word of at least 3 letters or
    digits, matches as a prefix.
    At most 64 terms are kept (a longer query only narrows further in practice)."""
    text = query.replace("\x00", " ")
    terms: list[QueryTerm] = []
    for index, segment in enumerate(text.split('"')):
        if index % 2:
            if _TOKEN_RE.search(segment):
                terms.append(QueryTerm(" ".join(segment.split()), True, False))
        else:
            terms.extend(QueryTerm(w, False, False) for w in segment.split() if _TOKEN_RE.search(w))
    terms = terms[:_MAX_QUERY_TERMS]
    if terms and not terms[-1].phrase and _last_token_length(terms[-1].text) >= _MIN_PREFIX_CHARS:
        terms[-1] = terms[-1]._replace(prefix=True)
    return terms


def _last_token_length(text: str) -> int:
    tokens = _TOKEN_RE.findall(text)
    return len(tokens[-1]) if tokens else 0


def _clean_text(text: str) -> str:
    """Lone surrogates (from odd JSON escapes) cannot be bound as SQLite text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _term_match(term: QueryTerm) -> str:
    """One term as an FTS5 string: quoted, so no user text is ever FTS syntax."""
    return f'"{_clean_text(term.text)}"' + ("*" if term.prefix else "")


def build_match_query(terms: Sequence[QueryTerm]) -> str | None:
    """The FTS5 MATCH expression for ``terms``: each one a quoted string (so no user
    text is ever FTS syntax: ``AND``, ``NEAR(``, ``col:``, ``*``, ``^`` are words),
    adjacent strings ANDed, ``*`` after the prefix term; a term repeated is kept once
    (ANDing it again changes nothing). None when there are none."""
    if not terms:
        return None
    return " ".join(dict.fromkeys(_term_match(term) for term in terms))


class QueryPlan(NamedTuple):
    """How one query runs. ``match`` is what FTS5 evaluates on the index; when the
    full query is too costly for that (``checks`` not empty), ``match`` is a cheaper
    query that every hit of the full one also matches, and each candidate's text must
    also match every query of ``checks`` (cheap ones first, the full query last)."""

    match: str
    checks: tuple[str, ...] = ()


# FTS5 walks one posting list per token of the query (a token repeated inside a phrase
# is walked again), and checks the positions of every token of a phrase in every entry
# that has them all: a 3,000-word pasted phrase took 40 s, 64 phrases of common words
# half a second, where a query within these bounds takes at most ~25 ms on 120,000
# entries. A larger query runs a part of it within them on the index and checks the rest
# on the candidates' text.
_MAX_INDEX_PHRASES = 4
_MAX_PHRASE_TOKENS = 4


def plan_query(terms: Sequence[QueryTerm]) -> QueryPlan | None:
    """The `QueryPlan` for ``terms`` (see `parse_query`); None when there are none."""
    full = build_match_query(terms)
    if full is None:
        return None
    unique = list({_term_match(term): term for term in terms}.values())
    phrases = [term for term in unique if _token_count(term.text) > 1]
    tokens = sum(_token_count(term.text) for term in phrases)
    if tokens <= _MAX_PHRASE_TOKENS * _MAX_INDEX_PHRASES and len(phrases) <= _MAX_INDEX_PHRASES:
        return QueryPlan(full)
    candidates = _candidate_match(unique)
    if candidates is None:
        # Nothing fits the bounds (one unbreakable run of 5+ tokens): the full query.
        return QueryPlan(full)
    return QueryPlan(candidates, (*_tile_checks(unique, full), full))


def _tile_checks(terms: Sequence[QueryTerm], full: str) -> Iterator[str]:
    """Cheap checks before the full query when a phrase is long: runs of 4, 8, 16, …
    tokens of it, each check on the rows that passed the one before (so a row that
    has the first words of a 3,000-word phrase but not the rest is dropped for the
    cost of a few dozen tokens, not 3,000)."""
    longest = max(_token_count(term.text) for term in terms)
    size = _MAX_PHRASE_TOKENS
    while size < longest:
        check = _tile_check(terms, size)
        if check != full:
            yield check
        size *= 2


# A check holds at most this many tokens: checks grow 4, 8, 16… tokens a run.
_MAX_CHECK_TOKENS = 512


def _tile_check(terms: Sequence[QueryTerm], size: int) -> str:
    """A query every match of ``terms`` also matches: each term of more than ``size``
    tokens as its distinct runs of at most ``size`` tokens (the first ones, up to
    `_MAX_CHECK_TOKENS` tokens in all)."""
    parts: dict[str, None] = {}
    budget = _MAX_CHECK_TOKENS
    for term in terms:
        if _token_count(term.text) <= size:
            parts[_term_match(term)] = None
            continue
        pieces = _pieces(term.text)
        if term.prefix:
            pieces = pieces[:-1]
        for run in _runs(pieces, size):
            if budget <= 0:
                break
            if f'"{run}"' not in parts:
                budget -= _token_count(run)
            parts[f'"{_clean_text(run)}"'] = None
    return " ".join(parts)


def _runs(pieces: Sequence[str], size: int) -> Iterator[str]:
    """Consecutive pieces grouped into runs of at most ``size`` tokens (a longer piece
    is left out: it cannot be cut safely)."""
    run: list[str] = []
    tokens = 0
    for piece in pieces:
        count = _token_count(piece)
        if count > size:
            run, tokens = [], 0
            continue
        if tokens + count > size:
            yield " ".join(run)
            run, tokens = [], 0
        run.append(piece)
        tokens += count
    if run:
        yield " ".join(run)


def _token_count(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def _candidate_match(terms: Sequence[QueryTerm]) -> str | None:
    """A query every match of ``terms`` also matches, within the index bounds: the
    most selective-looking phrases (longest words; at most `_MAX_INDEX_PHRASES`, each
    cut to a run of at most `_MAX_PHRASE_TOKENS` tokens), then single words, longest
    first, while the token budget lasts. None when no part of ``terms`` fits."""
    phrases = sorted(
        (term for term in terms if _token_count(term.text) > 1),
        key=lambda term: -_selectivity(term.text),
    )
    words = sorted(
        (term for term in terms if _token_count(term.text) == 1),
        key=lambda term: -_selectivity(term.text),
    )
    parts: list[str] = []
    for term in phrases:
        if len(parts) == _MAX_INDEX_PHRASES:
            break
        window = _phrase_window(term)
        if window is not None:
            parts.append(window)
    parts.extend(_term_match(term) for term in words)
    return " ".join(parts) if parts else None


def _selectivity(text: str) -> int:
    """A guess at how rare a term is without asking the index: long words are rare
    (common words are short in every language the agents write)."""
    return sum(len(token) for token in _TOKEN_RE.findall(text))


# Characters that end a token for FTS5's unicode61 as surely as for `_TOKEN_RE`: ASCII
# other than letters and digits, whitespace, and (checked one by one) punctuation.
# Splitting elsewhere could split what unicode61 keeps as one token (a letter and its
# combining accent), and the candidate query would miss hits.
_ASCII_SEPARATORS_RE = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\s]+")


def _pieces(text: str) -> list[str]:
    """``text`` cut at characters that separate tokens for certain."""
    pieces: list[str] = []
    for chunk in _ASCII_SEPARATORS_RE.split(text):
        if chunk.isascii():
            pieces.append(chunk)
            continue
        current: list[str] = []
        for char in chunk:
            if unicodedata.category(char)[0] in "PZ":
                pieces.append("".join(current))
                current = []
            else:
                current.append(char)
        pieces.append("".join(current))
    return [piece for piece in pieces if _TOKEN_RE.search(piece)]


def _phrase_window(term: QueryTerm) -> str | None:
    """A phrase the term always contains, of at most `_MAX_PHRASE_TOKENS` tokens: the
    run of its pieces with the most letters, as an FTS5 string (the term itself when
    it is that short). A prefix term's last piece is only a prefix, so it is left out
    of a run. None when no piece is short enough."""
    if _token_count(term.text) <= _MAX_PHRASE_TOKENS:
        return _term_match(term)
    pieces = _pieces(term.text)
    if term.prefix:
        pieces = pieces[:-1]
    sizes = [_token_count(piece) for piece in pieces]
    best: str | None = None
    best_score = -1
    for start in range(len(pieces)):
        end, tokens = start, 0
        while end < len(pieces) and tokens + sizes[end] <= _MAX_PHRASE_TOKENS:
            tokens += sizes[end]
            end += 1
        run = " ".join(pieces[start:end])
        if run and _selectivity(run) > best_score:
            best, best_score = run, _selectivity(run)
    return None if best is None else f'"{_clean_text(best)}"'


def _snippet_pattern(terms: Sequence[QueryTerm]) -> re.Pattern[str]:
    """Finds the first place a term occurs, tokens separated by any non-word run."""
    alternatives = []
    for term in terms:
        tokens = _TOKEN_RE.findall(term.text)
        alternatives.append(r"[\W_]+".join(re.escape(token) for token in tokens))
    return re.compile("|".join(alternatives), re.IGNORECASE)


def _snippet(text: str, pattern: re.Pattern[str]) -> str:
    match = pattern.search(text)
    start = max(0, match.start() - _SNIPPET_BEFORE) if match else 0
    end = min(len(text), start + _SNIPPET_CHARS)
    body = " ".join(text[start:end].split())
    return ("…" if start else "") + body + ("…" if end < len(text) else "")


_FLATTEN = str.maketrans({"\t": " ", "\n": " ", "\r": " "})


def format_hit(hit: Hit, entry_path: str) -> str:
    """``<iso time>\\t<entry path>\\t<role>\\t<snippet>`` (no newline); tabs and line
    breaks inside the fields become spaces, so one hit is always one line."""
    try:
        when = ms_to_iso(hit.timestamp_ms)
    except (OverflowError, OSError, ValueError):
        when = str(hit.timestamp_ms)
    fields = (entry_path, hit.role, hit.snippet)
    path, role, snippet = (value.translate(_FLATTEN) for value in fields)
    return f"{when}\t{path}\t{role}\t{snippet}"


# --- the files under a sessions root -----------------------------------------------------


def _scan_sessions(
    directory: str, prefix: tuple[str, ...], depth: int
) -> Iterator[tuple[str, ...]]:
    """Keys (path parts below the root) of ``*.jsonl`` files in ``directory`` and in the
    artifacts dirs (``<stem>/`` next to ``<stem>.jsonl``) found there."""
    try:
        with os.scandir(directory) as scan:
            children = list(scan)
    except OSError:
        return
    stems = set()
    for child in children:
        if child.name.endswith(".jsonl") and _is_file(child):
            stems.add(child.name[: -len(".jsonl")])
            yield (*prefix, child.name)
    if depth >= _MAX_NESTING:
        return
    for child in children:
        # Not following symlinked dirs: a link loop must not recurse for ever.
        if child.name in stems and _is_dir(child, follow=False):
            yield from _scan_sessions(child.path, (*prefix, child.name), depth + 1)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str], *, follow: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def session_file_keys(root: str) -> Iterator[tuple[str, ...]]:
    """Every session file under a sessions root: ``<project>/<file>.jsonl`` and the
    sub-agent files in artifacts dirs, as path parts relative to ``root``."""
    try:
        with os.scandir(root) as scan:
            projects = [child for child in scan if _is_dir(child)]
    except OSError:
        return
    for project in projects:
        yield from _scan_sessions(project.path, (project.name,), 0)


def _key_bytes(parts: Sequence[str]) -> bytes:
    return os.fsencode("/".join(parts))


def _split_key(key: bytes) -> tuple[str, str]:
    """(project, stem) for display, undecodable bytes replaced."""
    text = key.decode("utf-8", "replace")
    project, _, rest = text.partition("/")
    return project, rest[: -len(".jsonl")] if rest.endswith(".jsonl") else rest


# --- reading one file --------------------------------------------------------------------


class _FileState(NamedTuple):
    file_id: int
    dev: int
    ino: int
    size: int
    mtime_ns: int
    indexed_to: int
    head_hash: int
    tail_hash: int
    mode: int


class _Row(NamedTuple):
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


def _read_at(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _fingerprints(fd: int, indexed_to: int) -> tuple[int, int]:
    """Hashes of the first and of the last 4 KiB of the indexed bytes."""
    head = _read_at(fd, 0, min(FINGERPRINT_BYTES, indexed_to))
    tail_start = max(0, indexed_to - FINGERPRINT_BYTES)
    tail = _read_at(fd, tail_start, indexed_to - tail_start)
    return _hash(head), _hash(tail)


def _lines(data: bytes, base: int) -> Iterator[tuple[int, bytes]]:
    """(file offset, line) of every complete non-blank line of ``data`` (which starts
    at file offset ``base``)."""
    start = 0
    end = data.rfind(b"\n") + 1
    while start < end:
        newline = data.index(b"\n", start)
        line = data[start:newline]
        if line and not line.isspace():
            yield base + start, line
        start = newline + 1


def _parse_object(line: bytes) -> dict[str, Any] | None:
    try:
        obj = loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _row(entry: dict[str, Any], offset: int, line: bytes) -> _Row | None:
    entry_id = entry.get("id")
    if not isinstance(entry_id, str) or entry.get("type") == "session":
        return None
    found = entry_search_text(entry)
    if found is None:
        return None
    role, text = found
    return _Row(_entry_ms(entry), entry_id, role, offset, len(line), zlib.crc32(line), text)


class _ChunkedLines:
    """The complete lines of a file region, read a chunk at a time so that a huge
    session file never has to fit in memory."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        self.fd, self.start, self.end = fd, start, end
        #: the end of the last complete line read so far (a file offset)
        self.complete_to = start
        self.bytes_read = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        offset, carry = self.start, b""
        while offset < self.end:
            chunk = os.pread(self.fd, min(_READ_CHUNK, self.end - offset), offset)
            if not chunk:
                break
            self.bytes_read += len(chunk)
            data = carry + chunk if carry else chunk
            base = offset - len(carry)
            offset += len(chunk)
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if cut:
                yield from _lines(data[:cut], base)
                self.complete_to = base + cut


def _whole_file_rows(lines: Iterable[tuple[int, bytes]]) -> tuple[int, Iterator[_Row]]:
    """(mode, rows) of a file read from its start, ids as core's loader gives them."""
    stream = iter(lines)
    first: dict[str, Any] | None = None
    for _, line in stream:
        first = _parse_object(line)
        if first is not None:
            break
    if first is None or not is_header(first):
        return _MODE_NOT_SESSION, iter(())
    version = first.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version >= 2:
        # v2 -> v3 only renames a role, entry by entry: the file can be streamed.
        return _MODE_APPENDABLE, _appended_rows(stream)
    # v1: ids come from positions in the whole file, exactly as core's migration
    # derives them (so they are the ids the mount shows).
    objects: list[dict[str, Any]] = [first]
    places: list[tuple[int, bytes]] = []
    for offset, line in stream:
        obj = _parse_object(line)
        if obj is not None:
            objects.append(obj)
            places.append((offset, line))
    migrate_session_entries(objects)
    rows = (
        _row(obj, offset, line) for obj, (offset, line) in zip(objects[1:], places, strict=True)
    )
    return _MODE_LEGACY, (row for row in rows if row is not None)


def _rename_hook_message(entry: dict[str, Any]) -> None:
    """The v2 -> v3 step for one entry read on its own (an appended line of a v2 file,
    a line read back for a snippet): ``hookMessage`` is now ``custom``."""
    message = entry.get("message")
    if isinstance(message, dict) and message.get("role") == "hookMessage":
        message["role"] = "custom"


def _appended_rows(lines: Iterable[tuple[int, bytes]]) -> Iterator[_Row]:
    for offset, line in lines:
        obj = _parse_object(line)
        if obj is not None:
            _rename_hook_message(obj)
            row = _row(obj, offset, line)
            if row is not None:
                yield row


def _plan(state: _FileState | None, st: os.stat_result, fd: int) -> str:
    if state is None or (st.st_dev, st.st_ino) != (state.dev, state.ino):
        return "full"
    if st.st_size < state.indexed_to:
        return "full"  # truncated
    if _fingerprints(fd, state.indexed_to) != (state.head_hash, state.tail_hash):
        return "full"  # rewritten in place
    if st.st_size == state.indexed_to:
        return "touch"  # same bytes, new mtime
    return "append" if state.mode == _MODE_APPENDABLE else "full"


# --- the index ---------------------------------------------------------------------------


def _error_code(exc: sqlite3.Error) -> int:
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def _is_corrupt(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if _error_code(exc) in _CORRUPT_CODES:
        return True
    text = str(exc)
    return "malformed" in text or "not a database" in text


def _is_unwritable(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and _error_code(exc) in _UNWRITABLE_CODES


class _Corrupt(Exception):
    """The database file is not (or no longer) ours: rebuild it."""


class SearchIndex:
    """The search index in ``db_path`` (see the module docstring).

    ``read_only=True`` never writes (no schema work, no rebuild): for ``--read-only``
    mounts and CLI searches; a missing or unusable file then makes it unavailable.
    Thread-safe: searches share one connection under a lock, updates use their own.
    """

    def __init__(self, db_path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(db_path)
        self.read_only = read_only
        self._read_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._unavailable: str | None = None
        self._closed = False
        self._open()

    # -- state --------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return self._unavailable is None

    @property
    def unavailable_reason(self) -> str | None:
        """Why searches return nothing (unwritable or corrupt cache), else None."""
        return self._unavailable

    def _mark_unavailable(self, reason: str) -> None:
        if self._unavailable is None:
            log.warning("search index %s unavailable: %s", self.path, reason)
        self._unavailable = reason

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            self._closed = True
            for conn in (self._reader, self._writer):
                if conn is not None:
                    conn.close()
            self._reader = self._writer = None

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- opening --------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        return conn

    def _open(self) -> None:
        """Open (creating, or replacing what is not ours) and validate; on failure the
        index is unavailable with the reason."""
        try:
            if self.read_only:
                if not self.path.is_file():
                    raise FileNotFoundError(f"no search index at {self.path}")
                reader = self._connect()
                try:
                    _validate(reader)
                except BaseException:
                    reader.close()
                    raise
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                reader = self._open_writable()
        except _Corrupt as exc:
            self._mark_unavailable(f"not a usable search index: {exc}")
            return
        except (OSError, sqlite3.Error) as exc:
            self._mark_unavailable(f"cannot open {self.path}: {exc}")
            return
        self._reader = reader
        self._unavailable = None

    def _open_writable(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            if _is_empty(conn):
                _create_schema(conn)
            else:
                _validate(conn)
            return conn
        except (_Corrupt, sqlite3.DatabaseError) as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not _is_corrupt(exc):
                raise
            log.warning("search index %s is not usable (%s); rebuilding it", self.path, exc)
        self._delete_files()
        conn = self._connect()
        _create_schema(conn)
        return conn

    def _delete_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def _close_connections(self) -> None:
        """Drop both connections (the caller holds the write lock) so the next use reopens."""
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _reopen_if_needed(self) -> bool:
        """Before an update: retry an unavailable index (space may have been freed)."""
        if self._unavailable is None and self._reader is not None:
            return True
        if self.read_only:
            return False
        self._close_connections()
        self._unavailable = None
        self._open()
        return self._unavailable is None

    # -- updating -----------------------------------------------------------------------

    def update(
        self,
        sessions_root: str | os.PathLike[str],
        paths: Iterable[str | os.PathLike[str]] | None = None,
    ) -> UpdateStats:
        """Bring the index up to date with the session files under ``sessions_root``
        (``<agent>/sessions``). With ``paths``, only those files are looked at (each
        must be under the root; a missing one is dropped); without, every session file
        is, and files gone from disk are dropped. Never raises for I/O or database
        trouble: ``stats.error`` says what stopped it."""
        started = time.perf_counter()
        stats = UpdateStats()
        with self._write_lock:
            if self._closed:
                stats.error = "search index is closed"
                return stats
            if self.read_only:
                stats.error = "search index is read-only"
                return stats
            if not self._reopen_if_needed():
                stats.error = self._unavailable
                return stats
            try:
                self._update(os.path.abspath(sessions_root), paths, stats)
                if stats.bytes_read >= _FOLD_LOG_AFTER_BYTES:
                    self._fold_log_locked()
            except Exception as exc:
                self._update_failed(exc, stats)
        stats.seconds = time.perf_counter() - started
        return stats

    def _update_failed(self, exc: Exception, stats: UpdateStats) -> None:
        conn = self._writer
        if conn is not None and conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        stats.error = f"{type(exc).__name__}: {exc}"
        if _is_corrupt(exc):
            # Rebuilt on the next update; no answers from a broken index meanwhile.
            self._mark_unavailable(f"corrupt search index: {exc}")
            self._delete_on_reopen()
        elif _is_unwritable(exc):
            self._mark_unavailable(f"cannot write the search index: {exc}")
        elif not isinstance(exc, sqlite3.OperationalError):
            log.exception("search index %s: update failed", self.path)

    def _delete_on_reopen(self) -> None:
        self._close_connections()
        self._delete_files()

    def _writer_conn(self) -> sqlite3.Connection:
        if self._writer is None:
            self._writer = self._connect()
            self._writer.execute("PRAGMA synchronous=NORMAL")
            # A big first build grows the write-ahead log far past the auto-checkpoint
            # size while readers pin it; without a limit SQLite keeps that file at its
            # largest size for ever (20 MB beside a 28 MB index in the bench).
            self._writer.execute(f"PRAGMA journal_size_limit={_WAL_SIZE_LIMIT}")
        return self._writer

    def _fold_log_locked(self) -> None:
        conn = self._writer
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def fold_log(self) -> None:
        """Copy the write-ahead log into the index and shrink it (after a big update,
        or a build made of many small ones). Best effort: a reader mid-query only
        makes it partial."""
        with self._write_lock:
            self._fold_log_locked()

    def _update(
        self, root: str, paths: Iterable[str | os.PathLike[str]] | None, stats: UpdateStats
    ) -> None:
        conn = self._writer_conn()
        self._reset_if_needed(conn, root, stats)
        states = _load_states(conn)
        if paths is None:
            wanted = {_key_bytes(parts): parts for parts in session_file_keys(root)}
            gone = [key for key in states if key not in wanted]
        else:
            wanted = {}
            for path in paths:
                relative = os.path.relpath(os.path.abspath(path), root)
                if relative.startswith(os.pardir) or os.path.isabs(relative):
                    stats.skipped.append(f"{path}: not under {root}")
                    continue
                parts = tuple(Path(relative).parts)
                wanted[_key_bytes(parts)] = parts
            gone = []
        changed = self._changed_files(root, wanted, states, stats, gone)
        if gone:
            self._in_transaction(conn, lambda: self._drop_files(conn, gone, stats))
        self._index_changed(conn, changed, stats)

    def _changed_files(
        self,
        root: str,
        wanted: dict[bytes, tuple[str, ...]],
        states: dict[bytes, _FileState],
        stats: UpdateStats,
        gone: list[bytes],
    ) -> list[tuple[bytes, str]]:
        """The files whose stat differs from what was indexed: one stat per file."""
        changed = []
        for key, parts in wanted.items():
            path = os.path.join(root, *parts)
            try:
                st = os.stat(path)
            except OSError:
                if key in states:
                    gone.append(key)
                continue
            stats.files_seen += 1
            state = states.get(key)
            if state is not None and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
                state.dev,
                state.ino,
                state.size,
                state.mtime_ns,
            ):
                stats.files_unchanged += 1
            else:
                changed.append((key, path))
        return changed

    def _index_changed(
        self,
        conn: sqlite3.Connection,
        changed: Sequence[tuple[bytes, str]],
        stats: UpdateStats,
    ) -> None:
        """Index the changed files, a transaction per `_BATCH_FILES` / `_BATCH_BYTES`."""
        pending = deque(changed)
        while pending:
            self._in_transaction(conn, lambda: self._index_some(conn, pending, stats))

    def _index_some(
        self, conn: sqlite3.Connection, pending: deque[tuple[bytes, str]], stats: UpdateStats
    ) -> None:
        read = files = 0
        while pending and read < _BATCH_BYTES and files < _BATCH_FILES:
            key, path = pending.popleft()
            read += self._index_file(conn, key, path, stats)
            files += 1

    def _in_transaction(self, conn: sqlite3.Connection, work: Callable[[], None]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            work()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _index_file(
        self, conn: sqlite3.Connection, key: bytes, path: str, stats: UpdateStats
    ) -> int:
        """Bring one file up to date (inside the caller's transaction); bytes read."""
        try:
            fd = open_regular_fd(path)
        except OSError as exc:
            stats.skipped.append(f"{path}: {exc.strerror or exc}")
            return 0
        try:
            st = os.fstat(fd)
            # Re-read under the write lock: another indexer may have just done it.
            state = _load_state(conn, key)
            action = _plan(state, st, fd)
            if action == "touch" and state is not None:
                conn.execute(
                    "UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?",
                    (st.st_size, st.st_mtime_ns, state.file_id),
                )
                stats.files_unchanged += 1
                return 0
            return self._index_lines(conn, key, fd, st, state, stats, whole=action != "append")
        except OSError as exc:
            stats.skipped.append(f"{path}: {exc.strerror or exc}")
            return 0
        finally:
            os.close(fd)

    def _index_lines(
        self,
        conn: sqlite3.Connection,
        key: bytes,
        fd: int,
        st: os.stat_result,
        state: _FileState | None,
        stats: UpdateStats,
        *,
        whole: bool,
    ) -> int:
        """Index the file from its start (``whole``; its old rows die) or its new lines
        only; returns the bytes read."""
        start = 0 if whole or state is None else state.indexed_to
        lines = _ChunkedLines(fd, start, st.st_size)
        if whole or state is None:
            mode, rows = _whole_file_rows(lines)
        else:
            mode, rows = state.mode, _appended_rows(lines)
        if whole and state is not None:
            _kill_rows(conn, state.file_id)
        file_id = state.file_id if state is not None else _new_file(conn, key)
        stats.entries_indexed += _insert_all(conn, file_id, rows)
        indexed_to = 0 if mode == _MODE_NOT_SESSION else lines.complete_to
        head, tail = _fingerprints(fd, indexed_to)
        stat = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        _save_state(conn, file_id, (*stat, indexed_to, head, tail, mode))
        if whole:
            stats.files_indexed += 1
        else:
            stats.files_appended += 1
        stats.bytes_read += lines.bytes_read
        return lines.bytes_read

    def _drop_files(
        self, conn: sqlite3.Connection, keys: Sequence[bytes], stats: UpdateStats
    ) -> None:
        for key in keys:
            state = _load_state(conn, key)
            if state is not None:
                _kill_rows(conn, state.file_id)
                conn.execute("DELETE FROM files WHERE id = ?", (state.file_id,))
                stats.files_removed += 1

    def _reset_if_needed(self, conn: sqlite3.Connection, root: str, stats: UpdateStats) -> None:
        """Start from empty when the root changed or dead rows pile up."""
        stored_root = _meta(conn, "root")
        dead = int(_meta(conn, "dead") or 0)
        reset = stored_root != root
        if not reset and dead > _MIN_DEAD_FOR_REBUILD:
            live = conn.execute(
                "SELECT count(*) FROM entries WHERE file_id IS NOT NULL"
            ).fetchone()[0]
            reset = dead > live // 2
        if not reset:
            return

        def clear() -> None:
            conn.execute("DELETE FROM entries")
            conn.execute("DELETE FROM files")
            conn.execute("DELETE FROM buckets")
            conn.execute("INSERT INTO fts(fts) VALUES('delete-all')")
            _set_meta(conn, "dead", 0)
            _set_meta(conn, "root", root)

        self._in_transaction(conn, clear)
        stats.rebuilt = stored_root is not None

    # -- searching ------------------------------------------------------------------------

    def search(self, query: str, limit: int = 100) -> list[Hit]:
        """Entries containing every word of ``query`` (see `parse_query`), newest first.

        Never raises: an unavailable index or a query without words gives ``[]``.
        Hits whose line changed on disk since it was indexed are left out.
        """
        terms = parse_query(query)
        plan = plan_query(terms)
        try:
            limit = max(0, min(MAX_LIMIT, int(limit)))
        except (TypeError, ValueError, OverflowError):
            return []
        if plan is None or limit == 0:
            return []
        root = None
        try:
            with self._read_lock:
                conn = self._reader
                if conn is None or self._unavailable is not None:
                    return []
                root = _meta(conn, "root")
                if root is None:
                    return []
                return self._search(conn, root, plan, _snippet_pattern(terms), limit)
        except Exception as exc:
            if _is_corrupt(exc):
                self._mark_unavailable(f"corrupt search index: {exc}")
            else:
                log.exception("search index %s: search failed", self.path)
            return []

    def _search(
        self,
        conn: sqlite3.Connection,
        root: str,
        plan: QueryPlan,
        pattern: re.Pattern[str],
        limit: int,
    ) -> list[Hit]:
        hits: list[Hit] = []
        below = _TOP_ROWID
        reader = _LineReader(root)
        verifier = _Verifier(plan.checks, reader) if plan.checks else None
        try:
            while len(hits) < limit and below > 0:
                keep = None if verifier is None else verifier.keep
                rows, below = _newest_matches(conn, plan.match, below, limit - len(hits), keep)
                for _, ts, entry_id, role, offset, length, crc, key in rows:
                    text = reader.text(key, offset, length, crc)
                    if text is None:
                        continue  # the line changed since it was indexed
                    project, stem = _split_key(key)
                    hits.append(Hit(ts, project, stem, entry_id, role, _snippet(text, pattern)))
                    if len(hits) == limit:
                        break
        finally:
            reader.close()
            if verifier is not None:
                verifier.close()
        return hits


_Rows = list[Any]


def _newest_matches(
    conn: sqlite3.Connection,
    match: str,
    below: int,
    want: int,
    keep: Callable[[_Rows], _Rows] | None = None,
) -> tuple[_Rows, int]:
    """At least the ``want`` newest matching rows with rowid < ``below`` (fewer only when
    there are no more), newest first, and the rowid to continue below (0: no more).
    ``keep`` (when given) filters each fetched slice of rows before they count.

    Rowid order is time order between buckets, not inside one: so the rest of the last
    bucket reached is read too, and the rows are sorted by their exact timestamps. One
    streamed statement, not a LIMIT query plus a second one for the bucket's rest: a
    prefix term costs FTS5 a merge of every expansion's postings per statement."""
    rows: _Rows = []
    bucket_start = -1
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
                if len(rows) == want:
                    bucket_start = (row[0] >> _SEQ_BITS) << _SEQ_BITS
    finally:
        cursor.close()
    rows.sort(key=lambda row: (row[1], row[0]), reverse=True)
    return rows, next_below


class _Verifier:
    """Checks candidate rows (see `QueryPlan`) against the plan's checks: their indexed
    text, read back from the session files, goes into a scratch in-memory FTS5 table
    with the index's own options, and each check runs there on what passed the one
    before. FTS5 itself decides, so a row is kept exactly when the index would have
    matched it."""

    def __init__(self, checks: Sequence[str], reader: _LineReader) -> None:
        self.checks = checks
        self.reader = reader
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(text, {_FTS_OPTIONS})")

    def keep(self, rows: _Rows) -> _Rows:
        """The rows whose text matches every check (stale lines are dropped)."""
        texts: dict[int, str] = {}
        for rowid, _, _, _, offset, length, crc, key in rows:
            text = self.reader.text(key, offset, length, crc)
            if text is not None:
                texts[rowid] = _clean_text(text)
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


class _LineReader:
    """Reads indexed lines back for snippets, one open descriptor per file."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.fds: dict[bytes, int | None] = {}

    def text(self, key: bytes, offset: int, length: int, crc: int) -> str | None:
        """The entry's indexed text, or None when the line is not what was indexed."""
        fd = self.fds.get(key, -1)
        if fd == -1:
            try:
                fd = open_regular_fd(os.path.join(self.root, os.fsdecode(key)))
            except OSError:
                fd = None
            self.fds[key] = fd
        if fd is None:
            return None
        try:
            line = _read_at(fd, offset, length)
        except OSError:
            return None
        if len(line) != length or zlib.crc32(line) != crc:
            return None
        entry = _parse_object(line)
        if entry is None:
            return None
        _rename_hook_message(entry)
        found = entry_search_text(entry)
        return found[1] if found is not None else None

    def close(self) -> None:
        for fd in self.fds.values():
            if fd is not None:
                os.close(fd)


# --- schema and rows ----------------------------------------------------------------------


def _is_empty(conn: sqlite3.Connection) -> bool:
    """A brand-new (zero-page) database: ours to set up."""
    return bool(
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        and conn.execute("PRAGMA application_id").fetchone()[0] == 0
    )


def _validate(conn: sqlite3.Connection) -> None:
    """Raise `_Corrupt` unless this is our schema at our version."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        if _is_corrupt(exc):
            raise _Corrupt(str(exc)) from exc
        raise
    if app_id != APPLICATION_ID:
        raise _Corrupt(f"application_id {app_id:#x} is not a sessionfs search index")
    if version != SCHEMA_VERSION:
        raise _Corrupt(f"schema version {version}, expected {SCHEMA_VERSION}")
    if not tables >= _SCHEMA_TABLES:
        raise _Corrupt(f"missing tables {sorted(_SCHEMA_TABLES - tables)}")


def _create_schema(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    _validate(conn)  # another process may have created something else meanwhile


def _meta(conn: sqlite3.Connection, key: str) -> Any:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _set_meta(conn: sqlite3.Connection, key: str, value: Any) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


_STATE_COLUMNS = "id, dev, ino, size, mtime_ns, indexed_to, head_hash, tail_hash, mode"


def _load_states(conn: sqlite3.Connection) -> dict[bytes, _FileState]:
    rows = conn.execute(f"SELECT key, {_STATE_COLUMNS} FROM files").fetchall()
    return {bytes(row[0]): _FileState(*row[1:]) for row in rows}


def _load_state(conn: sqlite3.Connection, key: bytes) -> _FileState | None:
    row = conn.execute(f"SELECT {_STATE_COLUMNS} FROM files WHERE key = ?", (key,)).fetchone()
    return _FileState(*row) if row else None


def _save_state(conn: sqlite3.Connection, file_id: int, values: tuple[int, ...]) -> None:
    conn.execute(
        "UPDATE files SET dev = ?, ino = ?, size = ?, mtime_ns = ?, indexed_to = ?,"
        " head_hash = ?, tail_hash = ?, mode = ? WHERE id = ?",
        (*values, file_id),
    )


def _kill_rows(conn: sqlite3.Connection, file_id: int) -> None:
    """Mark a file's rows dead (their FTS postings stay until a rebuild)."""
    cursor = conn.execute("UPDATE entries SET file_id = NULL WHERE file_id = ?", (file_id,))
    if cursor.rowcount > 0:
        dead = int(_meta(conn, "dead") or 0) + cursor.rowcount
        _set_meta(conn, "dead", dead)


def _new_file(conn: sqlite3.Connection, key: bytes) -> int:
    """A files row for ``key`` (its state is saved once its lines are indexed)."""
    cursor = conn.execute(
        "INSERT INTO files (key, dev, ino, size, mtime_ns, indexed_to, head_hash, tail_hash,"
        " mode) VALUES (?, 0, 0, -1, 0, 0, 0, 0, 0)",
        (key,),
    )
    return int(cursor.lastrowid or 0)


def _insert_all(conn: sqlite3.Connection, file_id: int, rows: Iterable[_Row]) -> int:
    """Insert rows in slices of about `_INSERT_CHARS` of text; returns how many."""
    count = chars = 0
    batch: list[_Row] = []
    for row in rows:
        batch.append(row)
        chars += len(row.text)
        if chars >= _INSERT_CHARS:
            _insert_rows(conn, file_id, batch)
            count += len(batch)
            batch, chars = [], 0
    _insert_rows(conn, file_id, batch)
    return count + len(batch)


def _insert_rows(conn: sqlite3.Connection, file_id: int, rows: Sequence[_Row]) -> None:
    if not rows:
        return
    rowids = _assign_rowids(conn, rows)
    _insert_entries(conn, file_id, rows, rowids)
    texts = [row.text for row in rows]
    try:
        conn.executemany(
            "INSERT INTO fts (rowid, text) VALUES (?, ?)", zip(rowids, texts, strict=True)
        )
    except UnicodeEncodeError:
        texts = [_clean_text(text) for text in texts]
        conn.executemany(
            "INSERT INTO fts (rowid, text) VALUES (?, ?)", zip(rowids, texts, strict=True)
        )


def _assign_rowids(conn: sqlite3.Connection, rows: Sequence[_Row]) -> list[int]:
    """``bucket << 32 | n`` for each row, ``n`` the bucket's next unused number."""
    used: dict[int, int] = {}
    rowids = []
    for row in rows:
        bucket = row.ms >> _BUCKET_SHIFT
        n = used.get(bucket)
        if n is None:
            found = conn.execute("SELECT used FROM buckets WHERE bucket = ?", (bucket,)).fetchone()
            n = int(found[0]) if found else 0
        # 2**32 rows in one 70-minute bucket cannot come from real files.
        rowids.append(bucket << _SEQ_BITS | n)
        used[bucket] = n + 1
    conn.executemany("INSERT OR REPLACE INTO buckets (bucket, used) VALUES (?, ?)", used.items())
    return rowids


def _insert_entries(
    conn: sqlite3.Connection, file_id: int, rows: Sequence[_Row], rowids: Sequence[int]
) -> None:
    values = [
        (
            rowid,
            file_id,
            row.ms,
            _clean_text(row.entry_id),
            _clean_text(row.role),
            row.offset,
            row.length,
            row.crc,
        )
        for rowid, row in zip(rowids, rows, strict=True)
    ]
    conn.executemany(
        "INSERT INTO entries (rowid, file_id, ts, entry_id, role, line_offset, line_length,"
        " line_crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        values,
    )
