"""Full-text search over every session's messages: an SQLite FTS5 index in a cache dir.

The mount's ``search/<words>`` and ``sessionfs search`` read it; a background indexer
keeps it current with `SearchIndex.update`. It is a *cache*: every answer can be
rebuilt from the session files. One FTS row per entry, at most `MAX_INDEXED_CHARS` of
text each; hits come newest first.

One job per module:

- `text`: what text an entry is indexed under;
- `query`: from what a user types to the FTS5 query (`parse_query`,
  `build_match_query`, `plan_query` for costly queries);
- `sources`: which files under a sessions root are indexed;
- `rows`: reading one session file into rows, and how much of it to read again;
- `rowids`: rowids that follow time, so FTS5's rowid order is newest-first order;
- `terms`: the index's term list, so a prefix is looked up and ORed, not merged;
- `schema`: the database's tables, version, error classes, per-file state and rows;
- `scan`: candidate scans — the newest matches of a query, the check of candidates
  of a costly query, the indexed lines read back;
- `hits`: a `Hit`, its snippet and its one-line form;
- `index`: `SearchIndex`, which opens, updates and searches the database file.
"""

from typing import TYPE_CHECKING

from core.lazy_exports import lazy_exports

#: Where each name lives, imported at its first use (`core.lazy_exports`): the prompt
#: history needs the query builder, not the index and its SQLite code.
MODULES = {
    "core.search_index.hits": ("Hit", "format_hit"),
    "core.search_index.index": ("MAX_LIMIT", "SearchIndex", "UpdateStats"),
    "core.search_index.query": (
        "QueryPlan",
        "QueryTerm",
        "build_match_query",
        "parse_query",
        "plan_query",
    ),
    "core.search_index.schema": ("SCHEMA_VERSION",),
    "core.search_index.sources": ("session_file_keys", "subagent_file_keys"),
    "core.search_index.text": ("MAX_INDEXED_CHARS", "entry_search_text"),
}

if TYPE_CHECKING:
    from core.search_index.hits import Hit, format_hit
    from core.search_index.index import MAX_LIMIT, SearchIndex, UpdateStats
    from core.search_index.query import (
        QueryPlan,
        QueryTerm,
        build_match_query,
        parse_query,
        plan_query,
    )
    from core.search_index.schema import SCHEMA_VERSION
    from core.search_index.sources import session_file_keys, subagent_file_keys
    from core.search_index.text import MAX_INDEXED_CHARS, entry_search_text
else:
    __getattr__, __dir__ = lazy_exports(__name__, MODULES)

__all__ = [
    "MAX_INDEXED_CHARS",
    "MAX_LIMIT",
    "SCHEMA_VERSION",
    "Hit",
    "QueryPlan",
    "QueryTerm",
    "SearchIndex",
    "UpdateStats",
    "build_match_query",
    "entry_search_text",
    "format_hit",
    "parse_query",
    "plan_query",
    "session_file_keys",
    "subagent_file_keys",
]
