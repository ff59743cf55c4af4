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


def snippet_pattern(terms: Sequence[QueryTerm]) -> re.Pattern[str]:
    """Finds the first place a term occurs, tokens separated by any non-word run."""
    alternatives = []
    for term in terms:
        tokens = TOKEN_RE.findall(term.text)
        alternatives.append(r"[\W_]+".join(re.escape(token) for token in tokens))
    return re.compile("|".join(alternatives), re.IGNORECASE)


def snippet(text: str, pattern: re.Pattern[str]) -> str:
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


def split_key(key: bytes) -> tuple[str, str]:
    """(project, stem) for display, undecodable bytes replaced."""
    text = key.decode("utf-8", "replace")
    project, _, rest = text.partition("/")
    return project, rest[: -len(".jsonl")] if rest.endswith(".jsonl") else rest
