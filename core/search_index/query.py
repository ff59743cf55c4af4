"""From what a user types to what FTS5 evaluates: `parse_query`, `build_match_query`
and `plan_query`.

Costly queries
--------------
FTS5 walks one posting list per token of a query and checks the positions of every
phrase token in every entry that has them all, so its cost grows with the query: a
pasted 3,000-word phrase took 40 s. `plan_query` keeps repeated terms once and, beyond
`_MAX_INDEX_PHRASES` phrases or `_MAX_PHRASE_TOKENS` tokens a phrase, runs a bounded
part of the query on the index (the longest-worded runs of the phrases, every single
word) and checks each candidate's text against the rest (``QueryPlan.checks``, run by
`core.search_index.scan.Verifier`), so what a query finds does not change. The phrases
and words a query runs on the index are one NEAR group of a distance no entry reaches
(`_phrases_checked_last`): the same matches, with positions checked only in entries
that have every word.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from core.search_index.text import clean_text

_MAX_QUERY_TERMS = 64
# A shorter last word is matched whole: "a*" or "to*" would make FTS5 merge the postings
# of a good part of the vocabulary (100+ ms on a large index) to find what "a" finds.
_MIN_PREFIX_CHARS = 3

# unicode61 splits on everything that is not a letter, a number or a private-use char;
# a term without any of those would be an empty FTS5 phrase.
TOKEN_RE = re.compile(r"[^\W_]+")


class QueryTerm(NamedTuple):
    text: str  # what the user typed for this term, without quotes
    phrase: bool  # came from "quoted phrase"
    prefix: bool  # the last plain word: matches as a word prefix
    #: the index's terms a prefix term stands for, when the index looked them up
    #: (core.search_index.terms); None: FTS5 expands the prefix itself
    expansions: tuple[str, ...] | None = None


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
            if TOKEN_RE.search(segment):
                terms.append(QueryTerm(" ".join(segment.split()), True, False))
        else:
            terms.extend(QueryTerm(w, False, False) for w in segment.split() if TOKEN_RE.search(w))
    terms = terms[:_MAX_QUERY_TERMS]
    if terms and not terms[-1].phrase and _last_token_length(terms[-1].text) >= _MIN_PREFIX_CHARS:
        terms[-1] = terms[-1]._replace(prefix=True)
    return terms


def _last_token_length(text: str) -> int:
    tokens = TOKEN_RE.findall(text)
    return len(tokens[-1]) if tokens else 0


def _quoted(text: str) -> str:
    return '"' + clean_text(text).replace('"', '""') + '"'


def _term_match(term: QueryTerm) -> str:
    """One term as an FTS5 string: quoted (a ``"`` inside doubled), so no user text is
    ever FTS syntax; a prefix term the index expanded is an OR of its exact terms."""
    if term.prefix and term.expansions is not None:
        return "(" + " OR ".join(_quoted(text) for text in term.expansions) + ")"
    return _quoted(term.text) + ("*" if term.prefix else "")


def _all_of(parts: Iterable[str]) -> str:
    """FTS5 ANDs adjacent strings, but a group in parentheses needs an explicit AND."""
    listed = list(parts)
    return (" AND " if any(part.startswith("(") for part in listed) else " ").join(listed)


def build_match_query(terms: Sequence[QueryTerm]) -> str | None:
    """The FTS5 MATCH expression for ``terms``: each one a quoted string (so no user
    text is ever FTS syntax: ``AND``, ``NEAR(``, ``col:``, ``*``, ``^`` are words),
    adjacent strings ANDed, ``*`` after the prefix term (or, when the index expanded
    it, the OR of its ``expansions`` in parentheses); a term repeated is kept once
    (ANDing it again changes nothing). None when there are none."""
    if not terms:
        return None
    return _all_of(dict.fromkeys(_term_match(term) for term in terms))


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
        return QueryPlan(_phrases_checked_last([_term_match(term) for term in unique]))
    candidates = _candidate_parts(unique)
    if not candidates:
        # Nothing fits the bounds (one unbreakable run of 5+ tokens): the full query.
        return QueryPlan(full)
    return QueryPlan(_phrases_checked_last(candidates), (*_tile_checks(unique, full), full))


# FTS5 evaluates an AND of phrases one part at a time: each phrase checks the positions
# of its words in every entry that has them all, even where the rest of the query is
# missing (4 two-word phrases of the commonest words, no hit: 60 ms on 400,000 entries).
# A NEAR group first finds the entries that have every word of every phrase in it and
# checks positions there only (28 ms, the cost of the plain AND of the words). With a
# distance no entry can reach it is an AND: a row's text is one SQLite string, at most
# 10**9 bytes, so it has fewer tokens than that (FTS5 reads the distance as a C int).
_ANY_DISTANCE = 1_000_000_000


def _phrases_checked_last(parts: Sequence[str]) -> str:
    """The AND of ``parts`` (FTS5 strings from `_term_match`), its quoted strings in
    one NEAR group of `_ANY_DISTANCE` when one of them is a phrase (a prefix or an
    OR of expansions cannot be in a NEAR group: ANDed beside it)."""
    strings = [part for part in parts if part.startswith('"') and part.endswith('"')]
    if len(strings) < 2 or all(_token_count(part) < 2 for part in strings):
        return _all_of(parts)
    rest = [part for part in parts if part not in strings]
    near = f"NEAR({' '.join(strings)}, {_ANY_DISTANCE})"
    return " AND ".join([near, *rest])


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
            parts[f'"{clean_text(run)}"'] = None
    return _all_of(parts)


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


# Planning a pasted 3,000-word phrase asks for the same pieces and counts once per
# check size: remembered, they cost a tenth.
@functools.lru_cache(maxsize=4096)
def _token_count(text: str) -> int:
    return len(TOKEN_RE.findall(text))


def _candidate_parts(terms: Sequence[QueryTerm]) -> list[str]:
    """The parts of a query every match of ``terms`` also matches, within the index
    bounds: the most selective-looking phrases (longest words; at most
    `_MAX_INDEX_PHRASES`, each cut to a run of at most `_MAX_PHRASE_TOKENS` tokens),
    then single words, longest first. Empty when no part of ``terms`` fits."""
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
    return list(dict.fromkeys(parts))


def _selectivity(text: str) -> int:
    """A guess at how rare a term is without asking the index: long words are rare
    (common words are short in every language the agents write)."""
    return sum(len(token) for token in TOKEN_RE.findall(text))


# Characters that end a token for FTS5's unicode61 as surely as for `TOKEN_RE`: ASCII
# other than letters and digits, whitespace, and (checked one by one) punctuation.
# Splitting elsewhere could split what unicode61 keeps as one token (a letter and its
# combining accent), and the candidate query would miss hits.
_ASCII_SEPARATORS_RE = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f\s]+")


@functools.lru_cache(maxsize=64)
def _pieces(text: str) -> tuple[str, ...]:
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
    return tuple(piece for piece in pieces if TOKEN_RE.search(piece))


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
    return None if best is None else f'"{clean_text(best)}"'
