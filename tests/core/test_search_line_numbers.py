"""Search names lines as ``entries/`` does, whatever the bytes: a line of spaces, an
empty line, junk, a torn or blank tail, an object without its newline at the end.
Codex's, Gemini's and Cursor transcripts' rows are named by line number
(``NNNNNN-<kind>``), so a hit's name must be one the file's reader
(`core.formats.lines.LineFile`) gives an entry."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.cursor import CursorTranscriptSession
from core.formats.cursor_agent import CURSOR_SEARCH
from core.formats.gemini import GeminiSession
from core.formats.gemini_search import GEMINI_SEARCH
from core.formats.lines import LineFile
from core.search_index import SearchIndex
from core.search_index.formats import CLAUDE, CODEX, FileFormat, numbered_lines
from core.search_index.rows import ChunkedLines

#: one line each that says the word (what the readers name ``NNNNNN-<kind>``)
CODEX_SAID = (
    b'{"timestamp":"2026-03-01T10:00:01.000Z","type":"response_item","payload":'
    b'{"type":"message","role":"assistant","content":[{"type":"output_text","text":"quokka"}]}}'
)
CURSOR_SAID = b'{"role":"assistant","message":{"content":[{"type":"text","text":"quokka"}]}}'
GEMINI_SAID = b'{"id":"m1","type":"gemini","timestamp":"2026-03-01T10:00:01Z","content":"quokka"}'

# The pieces a file is made of: a line each (its newline added), or a last piece
# without one (an object, a torn half, blanks).
LINE = st.sampled_from(
    [b"", b" ", b"   ", b"\t ", b" \r", b"\r", b"junk", b"{", b"[1]", b"{}", b"OBJ", b"OBJ  "]
)
TAIL = st.sampled_from([b"", b"OBJ", b"  ", b"\t", b'{"type":"resp', b"junk", b"OBJ \n  "])
#: where the index's reads of a file end (`_chunks`)
CUTS = st.lists(st.integers(min_value=0, max_value=4000), max_size=4)


def _file(lines: list[bytes], tail: bytes, said: bytes) -> bytes:
    return b"".join(line + b"\n" for line in lines).replace(b"OBJ", said) + tail.replace(
        b"OBJ", said
    )


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut where the index's reads may end (its chunks)."""
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _check(
    path: Path,
    data: bytes,
    cuts: list[int],
    file_format: FileFormat,
    reader: Callable[[Path], SessionSource],
) -> None:
    """Search's numbers of ``data`` (read in ``cuts``) are LineFile's, and its hits
    are the entries ``reader`` (what ``entries/`` shows) has that say the word."""
    path.write_bytes(data)
    source = reader(path)
    names = [source.entry_name(i) for i in range(len(source))]
    read = list(LineFile(path).load())
    numbered = numbered_lines(ChunkedLines(_chunks(data, cuts)))
    assert [n for n, _, line in numbered if not line.isspace()] == [x.number for x in read]
    key = os.fsencode(path.name)
    _, rows = file_format.of_file(key).whole_file_rows(ChunkedLines(_chunks(data, cuts)))
    hits = [row.entry_id for row in rows]
    assert set(hits) <= set(names), (hits, names)
    assert len(hits) == sum(b"quokka" in data[x.start : x.end] for x in read)


#: (file name, a line that says the word, search's format, the reader)
BY_NUMBER = {
    "codex": ("rollout-x.jsonl", CODEX_SAID, CODEX, CodexSession),
    "cursor": ("transcript.jsonl", CURSOR_SAID, CURSOR_SEARCH, CursorTranscriptSession),
}


@pytest.mark.parametrize("agent", sorted(BY_NUMBER))
@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINE, max_size=12), tail=TAIL, cuts=CUTS)
def test_hits_name_entries_the_mount_shows(
    tmp_path_factory: pytest.TempPathFactory,
    agent: str,
    lines: list[bytes],
    tail: bytes,
    cuts: list[int],
) -> None:
    name, said, file_format, reader = BY_NUMBER[agent]
    path = tmp_path_factory.mktemp(agent) / name
    _check(path, _file(lines, tail, said), cuts, file_format, reader)


#: first lines that once made search read a ``.jsonl`` as an older document: a
#: pretty-printed start, an object holding a ``messages`` list
GEMINI_FIRST = st.sampled_from(
    [
        b"",
        b"  ",
        b"{",
        b'{"sessionId":"s","projectHash":"p","messages":[{"id":"u","type":"user","content":"hi"}]}',
    ]
)


@settings(max_examples=300, deadline=None)
@given(first=GEMINI_FIRST, lines=st.lists(LINE, max_size=12), tail=TAIL, cuts=CUTS)
def test_gemini_hits_name_entries_the_mount_shows(
    tmp_path_factory: pytest.TempPathFactory,
    first: bytes,
    lines: list[bytes],
    tail: bytes,
    cuts: list[int],
) -> None:
    """A ``.jsonl`` is records whatever its first line holds, for search as for the
    mount (`core.formats.gemini_dirs.is_document_chat`: the name decides)."""
    path = tmp_path_factory.mktemp("gemini") / "session-x.jsonl"
    data = _file([first, *lines], tail, GEMINI_SAID)
    _check(path, data, cuts, GEMINI_SEARCH, GeminiSession)


def test_a_line_of_spaces_is_one_line() -> None:
    """The file of the bug report: search numbered it [1, 6]."""
    data = b'{"a":1}\n   \n{"b":2}\n'
    assert [n for n, _, line in numbered_lines(ChunkedLines([data])) if line.strip()] == [1, 3]


# A Claude Code line saying the word, its uuid numbered (``{n}``) so every one differs.
CLAUDE_SAID = (
    b'{"type":"user","uuid":"u{n}","parentUuid":null,"sessionId":"s1",'
    b'"timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"user","content":"quokka"}}'
)
CLAUDE_LINE = st.sampled_from([b"", b"  ", b"junk", b"OBJ", b"OBJ ", b"OBJOBJ"])


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(CLAUDE_LINE, max_size=8), tail=TAIL, cuts=CUTS)
def test_appended_claude_hits_are_the_entries_a_fresh_read_shows(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    """A growing Claude file indexed at random cuts (a cut may fall inside a line,
    after an object without its newline, or between two objects of one line): the
    hits are the entries a fresh read shows that say the word."""
    base = tmp_path_factory.mktemp("claude")
    path = base / "claude" / "projects" / "-w" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    data = _file(lines, tail, b"OBJ")
    for n in range(data.count(b"OBJ")):
        data = data.replace(b"OBJ", CLAUDE_SAID.replace(b"{n}", str(n).encode()), 1)
    path.write_bytes(b"")
    with SearchIndex(base / "db", file_format=CLAUDE) as index:
        for piece in _chunks(data, cuts):
            with path.open("ab") as f:
                f.write(piece)
            index.update(str(base / "claude"))
        hits = sorted(h.entry_id for h in index.search("quokka"))
    source = ClaudeSession(path)
    names = [source.entry_name(i) for i in range(len(source))]
    read = [x.obj for x in LineFile(path).load() if x.obj is not None]
    assert hits == sorted(str(obj["uuid"]) for obj in read if "uuid" in obj)
    assert set(hits) <= set(names)


def test_an_object_without_its_newline_then_more_on_its_line(tmp_path: Path) -> None:
    """Indexed while it had no newline, the object is a line (entries/ shows it); then
    a second object is written on the same line: a fresh read sees one junk line, and
    the index reads the file again rather than keep the first or add the second."""
    path = tmp_path / "claude" / "projects" / "-w" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    first, second = (CLAUDE_SAID.replace(b"{n}", n) for n in (b"1", b"2"))
    path.write_bytes(first)
    with SearchIndex(tmp_path / "db", file_format=CLAUDE) as index:
        index.update(str(tmp_path / "claude"))
        assert [h.entry_id for h in index.search("quokka")] == ["u1"]
        with path.open("ab") as f:
            f.write(second + b"\n")
        assert index.update(str(tmp_path / "claude")).files_indexed == 1
        assert index.search("quokka") == []
    assert [x.obj for x in LineFile(path).load()] == [None]
