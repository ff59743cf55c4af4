"""What a search answers: `Hit`, its snippet, and its one-line form (`format_hit`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from core.paths import ms_to_iso
from core.search_index.query import TOKEN_RE, QueryTerm

_SNIPPET_BEFORE = 60
_SNIPPET_CHARS = 200


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


class SnippetFinder:
    """Finds the first place a term occurs in a hit's text, tokens separated by any
    non-word run, case ignored. One case-sensitive pattern per term over the lowered
    text: each starts with a literal, which ``re`` scans for quickly, where an
    ``IGNORECASE`` alternation of the terms tries every position (5 ms on a 40 kB tool
    output, against 0.6). Patterns are compiled at the first hit (a 3,000-word pasted
    phrase takes ``re`` a quarter of a second), from at most `_PATTERN_TOKENS` tokens of
    a term: enough to place a snippet."""

    def __init__(self, terms: Sequence[QueryTerm]) -> None:
        self.tokens = [TOKEN_RE.findall(term.text)[:_PATTERN_TOKENS] for term in terms]
        self._lowered: list[re.Pattern[str]] | None = None
        self._any_case: re.Pattern[str] | None = None

    def first(self, text: str) -> int | None:
        lowered = text.lower()
        if len(lowered) != len(text):
            # Offsets in the lowered text would not be offsets in the text.
            if self._any_case is None:
                alternatives = "|".join(map(_term_pattern, self.tokens))
                self._any_case = re.compile(alternatives, re.IGNORECASE)
            match = self._any_case.search(text)
            return match.start() if match else None
        if self._lowered is None:
            self._lowered = [
                re.compile(_term_pattern([token.lower() for token in tokens]))
                for tokens in self.tokens
            ]
        matches = (pattern.search(lowered) for pattern in self._lowered)
        return min((match.start() for match in matches if match), default=None)


_PATTERN_TOKENS = 64


def _term_pattern(tokens: Sequence[str]) -> str:
    return r"[\W_]+".join(re.escape(token) for token in tokens)


def snippet(text: str, finder: SnippetFinder) -> str:
    first = finder.first(text)
    start = max(0, first - _SNIPPET_BEFORE) if first is not None else 0
    end = min(len(text), start + _SNIPPET_CHARS)
    body = " ".join(text[start:end].split())
    return ("…" if start else "") + body + ("…" if end < len(text) else "")


_FLATTEN = str.maketrans({"\t": " ", "\n": " ", "\r": " "})
_BREAKS = re.compile(r"[\t\n\r]")


def _one_line(value: str) -> str:
    # The search first: translate with a table costs a dict lookup per character,
    # and a hit's fields rarely hold a break (a snippet never does).
    return value.translate(_FLATTEN) if _BREAKS.search(value) else value


def format_hit(hit: Hit, entry_path: str) -> str:
    """``<iso time>\\t<entry path>\\t<role>\\t<snippet>`` (no newline); tabs and line
    breaks inside the fields become spaces, so one hit is always one line."""
    try:
        when = ms_to_iso(hit.timestamp_ms)
    except (OverflowError, OSError, ValueError):
        when = str(hit.timestamp_ms)
    fields = (entry_path, hit.role, hit.snippet)
    path, role, snippet = map(_one_line, fields)
    return f"{when}\t{path}\t{role}\t{snippet}"


def split_key(key: bytes) -> tuple[str, str]:
    """(project, stem) for display, undecodable bytes replaced; the stem without
    ``.jsonl`` (or an archived rollout's ``.jsonl.zst``)."""
    text = key.decode("utf-8", "replace")
    project, _, rest = text.partition("/")
    for suffix in (".jsonl", ".jsonl.zst"):
        if rest.endswith(suffix):
            return project, rest[: -len(suffix)]
    return project, rest
