"""``search/<q>``'s fast path (`search_result`: each index's hits read back one at a
time, merged across indexes by time) against a straightforward reference: every row
FTS5 matches, with its own syntax (prefixes expanded by FTS5 itself), sorted by time,
the newest kept.

Two agent dirs of random sessions from a small vocabulary, so common words match far
more than 100 entries; timestamps are unique, spread over many of the index's time
buckets, and written out of order inside each file (rowid order is not time order).
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.agent_homes import AgentHome
from core.paths import ms_to_iso
from core.search_index import scan
from sessionfs.view.agent_sources import agent_search_view, catalog_for
from sessionfs.view.other_agent_index import OtherAgentIndex
from sessionfs.view.search_view import SearchView, search_result
from tests.support.other_agents import fake_home

WORDS = [
    "the",
    "to",
    "and",
    "of",
    "fix",
    "test",
    "file",
    "error",
    "session",
    "cache",
    "render",
    "branch",
    "output",
    "config",
    "use",
    "user",
    "used",
    "useful",
    "usage",
    "value",
    "values",
    "tree",
    "context",
]
_START_MS = 1_767_225_600_000
_SESSIONS = 4
_ENTRIES = 150

# (query as typed, the same query in FTS5's own syntax: the last plain word of 3+
# letters is a prefix; quoted phrases stay phrases)
QUERIES = [
    ("the", '"the"*'),
    ("to", '"to"'),
    ("use", '"use"*'),
    ("us", '"us"'),
    ("ses", '"ses"*'),
    ("valu", '"valu"*'),
    ("fix the", '"fix" "the"*'),
    ("error file cache", '"error" "file" "cache"*'),
    ('"fix the"', '"fix the"'),
    ('"to the" use', '"to the" "use"*'),
    ('"the a" "to b" "of c" "is d" "and e"', '"the a" "to b" "of c" "is d" "and e"'),
    ('"the to" "and of" "fix test" "file error" "session cache"', None),
    ("nowhere", '"nowhere"*'),
    # The adversarial shapes of the benchmark (bench/corpus.py), in this vocabulary:
    # a phrase of 5 common words, 4 common phrases ANDed (one NEAR group on the
    # index), phrases beside words and a prefix, many common words, short prefixes.
    ('"the to and of fix"', '"the to and of fix"'),
    ('"the to" "to the" "the the" "of the"', '"the to" "to the" "the the" "of the"'),
    ('"the to" fix "of the" use', '"the to" "fix" "of the" "use"*'),
    ('"the to" "to the" the', '"the to" "to the" "the"*'),
    (" ".join(WORDS[:12]), " ".join(f'"{word}"' for word in WORDS[:11]) + ' "render"*'),
    ("th", '"th"'),
    ("the to", '"the" "to"'),
    # ... and as the benchmark has them (its words are not all in this vocabulary).
    ('"the a to and of"', '"the a to and of"'),
    ('"the a" "to and" "of in" "is it"', '"the a" "to and" "of in" "is it"'),
]

PHRASES_THAT_MATCH = ('"the to" "to the" "the the" "of the"', '"the to" fix "of the" use')


def _write_session(sessions: Path, session_id: str, entries: list[tuple[str, int, str]]) -> None:
    """A v3 session file of user/assistant messages: (entry id, time in ms, text) each."""
    out = [{"type": "session", "version": 3, "id": session_id, "timestamp": ms_to_iso(0)}]
    for n, (entry_id, ms, text) in enumerate(entries):
        role = "user" if n % 2 else "assistant"
        out.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": None,
                "timestamp": ms_to_iso(ms),
                "message": {"role": role, "content": [{"type": "text", "text": text}]},
            }
        )
    path = sessions / f"2026-01-01T00-00-00-000Z_{session_id}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in out))


def _text(rng: random.Random) -> str:
    """3-12 words, common ones far more often (a Zipf-like spread)."""
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights, k=rng.randint(3, 12)))


def _write_agent_dir(agent: Path, project: str, rng: random.Random, stamps: list[int]) -> None:
    sessions = agent / "sessions" / project
    sessions.mkdir(parents=True)
    for number in range(_SESSIONS):
        session_id = f"{project}-{number}"
        # Out of time order inside the file: rowids within a bucket follow file order.
        mine = stamps[number * _ENTRIES : (number + 1) * _ENTRIES]
        rng.shuffle(mine)
        entries = [(f"{session_id}-e{n}", ms, _text(rng)) for n, ms in enumerate(mine)]
        _write_session(sessions, session_id, entries)


def _indexed(tmp_path: Path, write: Callable[[Path, str], None]) -> list[SearchView]:
    """Two agent dirs written by ``write`` (agent dir, project), each indexed."""
    made = []
    for number, project in enumerate(("--work-one--", "--work-two--")):
        agent = tmp_path / f"agent{number}"
        write(agent, project)
        view = SearchView(tmp_path / "cache", agent)
        assert view.refresh().error is None
        made.append(view)
    return made


@pytest.fixture
def views(tmp_path: Path):
    rng = random.Random(26)
    # Unique times over ~3 days: many 70-minute buckets, several entries in each.
    stamps = rng.sample(range(_START_MS, _START_MS + 3 * 86_400_000), 2 * _SESSIONS * _ENTRIES)
    halves = iter((stamps[: len(stamps) // 2], stamps[len(stamps) // 2 :]))
    made = _indexed(
        tmp_path, lambda agent, project: _write_agent_dir(agent, project, rng, next(halves))
    )
    yield made
    for view in made:
        view.close()


def reference(views: list[SearchView], match: str, limit: int) -> list[tuple[str, ...]]:
    """(time, project, session, entry id) of the ``limit`` newest rows FTS5 matches,
    newest first; those of one millisecond in the order of the indexes, then by
    session file and entry id (the documented tie rule)."""
    found = []
    for number, view in enumerate(views):
        with sqlite3.connect(f"{view.db_path.as_uri()}?mode=ro", uri=True) as conn:
            found += [
                (-ts, number, key, entry_id)
                for ts, key, entry_id in conn.execute(
                    "SELECT e.ts, f.key, e.entry_id FROM fts JOIN entries e"
                    " ON e.rowid = fts.rowid JOIN files f ON f.id = e.file_id WHERE fts MATCH ?",
                    (match,),
                )
            ]
        conn.close()
    found.sort()
    return [(ms_to_iso(-ts), *_session(key), entry_id) for ts, _, key, entry_id in found[:limit]]


def _session(key: bytes) -> tuple[str, str]:
    project, name = os.fsdecode(key).split("/")
    return project, name.removesuffix(".jsonl")


def shown(text: bytes) -> list[tuple[str, ...]]:
    """(time, project, session, entry id) of each line of a result."""
    rows = []
    for line in text.decode().splitlines():
        when, path, _role, _snippet = line.split("\t")
        parts = path.split("/")
        assert parts[0] == "sessions" and parts[3] == "entries"
        rows.append((when, parts[1], parts[2], parts[4].removesuffix(".json")))
    return rows


@pytest.mark.parametrize("query, match", QUERIES)
@pytest.mark.parametrize("limit", [1, 7, 100])
def test_the_fast_path_shows_the_newest_matches_of_every_index(views, query, match, limit):
    match = match or " ".join(f'"{phrase}"' for phrase in query.strip('"').split('" "'))
    expected = reference(views, match, limit)
    assert shown(search_result(views, query, None, limit)) == expected
    if query == "the":
        assert len(expected) == limit  # the common word matches more than shown
    if query in PHRASES_THAT_MATCH:
        assert expected  # phrases of common words in a NEAR group: found where they are


def test_a_query_of_only_punctuation_shows_nothing(views):
    assert search_result(views, "!@#$%^&*()[]{};:,.<>?|~`'-+=_" * 6, None, 100) == b""


def test_one_index_alone_gives_the_same_as_its_share_of_the_reference(views):
    for view in views:
        assert shown(view.result("use")) == reference([view], '"use"*', 100)


def test_hits_whose_lines_changed_are_skipped_and_older_ones_fill_in(views):
    # The newest session file of the first agent dir rewritten: its lines no longer
    # match what was indexed, so its hits drop out until the next update.
    sessions = sorted((views[0].sessions_root / "--work-one--").iterdir())
    changed = sessions[0]
    changed.write_bytes(changed.read_bytes().replace(b"the", b"xyz"))
    text = search_result(views, "the", None, 100)
    rows = shown(text)
    assert len(rows) == 100
    gone = changed.name.removesuffix(".jsonl").split("_", 1)[1]
    assert not any(entry_id.startswith(gone + "-") for *_, entry_id in rows)
    everything = reference(views, '"the"*', 10_000)
    assert rows == [row for row in everything if not row[3].startswith(gone + "-")][:100]


def test_another_agents_listing_is_made_after_the_first_build_not_at_the_first_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    trees = fake_home(tmp_path)
    index = OtherAgentIndex(catalog_for(AgentHome("claude", trees.claude)))
    scans = []
    scan = index.catalog.scan
    monkeypatch.setattr(index.catalog, "scan", lambda: scans.append(1) or scan())
    view = agent_search_view(tmp_path / "cache", index)
    try:
        assert view.refresh().error is None
        assert len(scans) == 1  # the listing, made by the indexer after its build
        text = search_result([view], "the", None, 100)
        assert text.startswith(b"20") and b"\tagents/claude/sessions/" in text
        assert len(scans) == 1  # the search used it, no scan of its own
    finally:
        view.close()


# --- many hits of one millisecond (sessions generated with the same times) -------------

_TIED_SESSIONS = 24
_TIED_ENTRIES = 60


def _write_tied_agent_dir(agent: Path, project: str, rng: random.Random) -> None:
    """Sessions whose entries all carry the same times: entry n of every session (and
    of both agent dirs) at ``_START_MS + n // 2`` seconds, so each millisecond has
    dozens of hits and every one is in the same rowid bucket. Files are written in a
    shuffled order, so rowid order is not file order."""
    sessions = agent / "sessions" / project
    sessions.mkdir(parents=True)
    numbers = list(range(_TIED_SESSIONS))
    rng.shuffle(numbers)
    for number in numbers:
        # The same entry ids in every session: the session file decides.
        entries = [
            (f"e{n:02d}", _START_MS + n // 2 * 1000, _text(rng)) for n in range(_TIED_ENTRIES)
        ]
        _write_session(sessions, f"{project.strip('-')}-{number:02d}", entries)


@pytest.fixture
def tied_views(tmp_path: Path):
    rng = random.Random(262)
    made = _indexed(tmp_path, lambda agent, project: _write_tied_agent_dir(agent, project, rng))
    yield made
    for view in made:
        view.close()


class CountedReads:
    """Counts the lines a search reads back from the session files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = scan.LineReader.text

        def counted(reader: scan.LineReader, *args: Any) -> str | None:
            self.count += 1
            return real(reader, *args)

        monkeypatch.setattr(scan.LineReader, "text", counted)


TIED_QUERIES = [
    ("the", '"the"*'),
    ("fix the", '"fix" "the"*'),
    ('"the to" use', '"the to" "use"*'),
    ('"the to" "and of" "fix test" "file error" "session cache"', None),
    ("nowhere", '"nowhere"*'),
]


@pytest.mark.parametrize("query, match", TIED_QUERIES)
@pytest.mark.parametrize("limit", [1, 7, 100])
# How many rows of the last bucket are read in rowid order before SQLite sorts the
# bucket instead: both ways give the same hits.
@pytest.mark.parametrize("rest_rows", [4, 10**6])
def test_hits_of_one_millisecond_come_by_index_file_and_entry_and_stop_at_the_limit(
    tied_views, monkeypatch, query, match, limit, rest_rows
):
    monkeypatch.setattr(scan, "_BUCKET_REST_ROWS", rest_rows)
    match = match or " ".join(f'"{phrase}"' for phrase in query.strip('"').split('" "'))
    expected = reference(tied_views, match, limit)
    reads = CountedReads(monkeypatch)
    assert shown(search_result(tied_views, query, None, limit)) == expected
    if query == "the":
        assert len(expected) == limit
        ties = reference(tied_views, match, 10_000)
        last = expected[-1][0]
        # The last millisecond shown has more hits than are shown: the rule picks.
        assert sum(row[0] == last for row in ties) > sum(row[0] == last for row in expected)
    if "session cache" not in query:  # (that one checks candidates' lines too)
        # Read back: the lines shown and the next one of the other index, no more.
        assert reads.count <= limit + len(tied_views) - 1


@pytest.mark.parametrize("rest_rows", [4, 10**6])
def test_tied_hits_whose_lines_changed_are_skipped_and_the_next_fill_in(
    tied_views, monkeypatch, rest_rows
):
    monkeypatch.setattr(scan, "_BUCKET_REST_ROWS", rest_rows)
    # Every other session file of the second agent dir rewritten: their lines no longer
    # match what was indexed, so their hits drop out (until the next update) and the
    # next ones of the same milliseconds take their places; the index reads further
    # than one page of its bucket for them.
    changed = sorted((tied_views[1].sessions_root / "--work-two--").iterdir())[::2]
    for path in changed:
        path.write_bytes(path.read_bytes().replace(b"the", b"xyz"))
    stems = {path.stem for path in changed}
    for views in (tied_views, tied_views[1:]):
        rows = shown(search_result(views, "the", None, 100))
        everything = reference(views, '"the"*', 10_000)
        assert len(rows) == 100
        assert rows == [row for row in everything if row[2] not in stems][:100]
        assert sum(row[2] in stems for row in everything[:100]) > 20  # they had hits shown
