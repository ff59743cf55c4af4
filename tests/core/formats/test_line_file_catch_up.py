"""``LineFile`` caught up while another agent appends: the lines (their numbers, which
name Claude Code's ``meta-N-*`` and Codex's ``NNNNNN-*`` entries) are the same whether
the file is read fresh or caught up piece by piece, wherever the writes were cut -- a
torn half-line, a lone newline, a blank tail or trailing blanks are no lines of their
own."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import claude_code as cc
from support import codex_cli as cx

from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.jsonl_source import JsonlSession
from core.formats.lines import Line, LineFile, set_whole_read_limit

#: what a `Line` is, compared between a fresh load and catch-ups: its number, where it
#: starts, its object and its text (blanks after a whole object that was caught up
#: before its newline came are not part of its span then)
Seen = tuple[int, int, Any, bytes]


@pytest.fixture(autouse=True, scope="module", params=["whole", "in place"])
def read_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test twice: files read whole, and read where they are (limit 0: the
    daemon's way with a file too big to hold)."""
    previous = set_whole_read_limit(None if request.param == "whole" else 0)
    try:
        yield request.param
    finally:
        set_whole_read_limit(previous)


def _seen(held: LineFile, lines: Iterable[Line]) -> list[Seen]:
    return [(ln.number, ln.start, ln.obj, held.raw(ln.start, ln.end).rstrip()) for ln in lines]


def _fresh(path: Path) -> list[Seen]:
    held = LineFile(path)
    return _seen(held, held.load())


def _caught_up(path: Path, pieces: list[bytes]) -> list[Seen]:
    """The lines of ``pieces`` written one after another to ``path``, read after each."""
    path.write_bytes(pieces[0])
    held = LineFile(path)
    seen = _seen(held, held.load())
    for piece in pieces[1:]:
        with path.open("ab") as f:
            f.write(piece)
        new = held.read_new()
        assert new is not None  # an append never asks for a reload
        seen += _seen(held, new)
    return seen


def _cut(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(points)]


def test_a_torn_half_line_is_no_line_until_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    pieces = [b'{"a":1}\n', b'{"b":', b'2}\n{"c":3}\n']  # a writer caught mid-append
    assert _caught_up(path, pieces) == _fresh(path)
    assert [number for number, *_ in _fresh(path)] == [1, 2, 3]


def test_the_newline_of_a_line_read_whole_is_no_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    pieces = [b'{"a":1}', b"\n", b'{"b":2}\n']  # the object first, its newline later
    assert _caught_up(path, pieces) == _fresh(path)
    assert [number for number, *_ in _fresh(path)] == [1, 2]


def test_blanks_after_a_line_read_whole_are_still_that_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    pieces = [b'{"a":1}', b"  ", b" \t\n", b'{"b":2}\n']
    assert _caught_up(path, pieces) == _fresh(path)
    assert [number for number, *_ in _fresh(path)] == [1, 2]


def test_what_follows_an_object_read_whole_before_its_newline_is_still_that_line(
    tmp_path: Path,
) -> None:
    # A fresh load reads ``{"a":1} {"b":2}`` as one junk line; caught up, the object
    # was handed out before the rest came and is not taken back -- but the rest is no
    # line of its own, so the lines after it keep their numbers.
    path = tmp_path / "s.jsonl"
    caught_up = _caught_up(path, [b'{"a":1}', b' {"b":2}', b'\n{"c":3}\n'])
    assert [(n, obj) for n, _, obj, _ in caught_up] == [(1, {"a": 1}), (2, {"c": 3})]
    assert [(n, obj) for n, _, obj, _ in _fresh(path)] == [(1, None), (2, {"c": 3})]


def test_a_blank_tail_waits_for_what_follows_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    # the blanks begin the next line (an indented object), not a blank line of their own
    assert _caught_up(path, [b'{"a":1}\n  ', b'{"b":2}\n']) == _fresh(path)
    assert [number for number, *_ in _fresh(path)] == [1, 2]
    # and a blank line written in two pieces is one line
    assert _caught_up(path, [b'{"a":1}\n ', b" \n", b'{"b":2}\n']) == _fresh(path)
    assert [number for number, *_ in _fresh(path)] == [1, 3]


# -- any file, cut anywhere ---------------------------------------------------------------

_values = st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5)
_objects = st.dictionaries(st.text("abc", min_size=1, max_size=3), _values, max_size=3).map(
    orjson.dumps
)
_blanks = st.sampled_from([b"", b" ", b"\t", b"  \r"])
#: lines a well-behaved writer or a known junk line makes: an object (indented or with
#: trailing blanks at times), a blank line, JSON that is not an object, not JSON
_lines = st.one_of(
    st.tuples(_blanks, _objects, _blanks).map(b"".join),
    _blanks,
    st.sampled_from([b"[1, 2]", b'"text"', b"42", b"not json", b"{ not json"]),
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_lines, min_size=1, max_size=12),
    ends_with_newline=st.booleans(),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
def test_any_cuts_give_the_lines_of_a_fresh_load(
    lines: list[bytes], ends_with_newline: bool, cuts: list[int]
) -> None:
    data = b"\n".join(lines) + (b"\n" if ends_with_newline else b"")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        assert _caught_up(path, _cut(data, cuts)) == _fresh(path)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
def test_any_bytes_cut_anywhere_keep_the_line_numbers(lines: list[bytes], cuts: list[int]) -> None:
    # Junk such as ``{}x`` may be read as ``{}`` when caught up before its ``x`` came (a
    # line read whole is never taken back), but it keeps its number all the same.
    data = b"".join(line + b"\n" for line in lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        caught_up = [number for number, *_ in _caught_up(path, _cut(data, cuts))]
        assert caught_up == [number for number, *_ in _fresh(path)]


# -- the readers' entry names -------------------------------------------------------------


def _names(session: JsonlSession[Any]) -> list[str]:
    return [session.entry_name(i) for i in range(len(session))]


def _names_caught_up(path: Path, data: bytes, cuts: Iterable[int], reader: Any) -> list[str]:
    pieces = _cut(data, cuts)
    path.write_bytes(pieces[0])
    session = reader(path)
    for piece in pieces[1:]:
        with path.open("ab") as f:
            f.write(piece)
        session.catch_up()
    return _names(session)


def _claude_bytes(tmp_path: Path) -> bytes:
    lines = [
        {"type": "summary", "summary": "Earlier", "leafUuid": "a1"},
        cc.user("u1", None, "Fix the bug", 1),
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        cc.assistant("a1", "u1", "msg_1", cc.text("Fixed."), 2),
        {"type": "custom-title", "customTitle": "Bug fix", "sessionId": cc.SESSION_ID},
        {"type": "last-prompt", "lastPrompt": "Fix the bug"},
    ]
    return cc.write_jsonl(tmp_path / "whole.jsonl", lines).read_bytes()


def _codex_bytes(tmp_path: Path) -> bytes:
    lines = [
        cx.session_meta(),
        cx.turn_context("gpt-5-codex", 1),
        cx.item(cx.message("user", "List the files"), 2),
        cx.event({"type": "user_message", "message": "List the files", "images": []}, 2),
        cx.item(cx.message("assistant", "Two files."), 3),
        cx.token_count(100, 40, 20, 4),
    ]
    return cx.write_jsonl(tmp_path / "whole.jsonl", lines).read_bytes()


def test_claude_meta_names_do_not_shift_while_the_file_is_written(tmp_path: Path) -> None:
    data = _claude_bytes(tmp_path)
    fresh = _names(ClaudeSession(tmp_path / "whole.jsonl"))
    assert "meta-5-custom-title" in fresh
    # every line written in two halves, each half read as soon as it is there
    halves = [c for n in range(data.count(b"\n")) for c in _line_halves(data, n)]
    assert _names_caught_up(tmp_path / "s.jsonl", data, halves, ClaudeSession) == fresh


def test_codex_names_do_not_shift_while_the_file_is_written(tmp_path: Path) -> None:
    data = _codex_bytes(tmp_path)
    fresh = _names(CodexSession(tmp_path / "whole.jsonl"))
    assert fresh[-1] == "000006-event_msg-token_count"
    halves = [c for n in range(data.count(b"\n")) for c in _line_halves(data, n)]
    assert _names_caught_up(tmp_path / "rollout-s.jsonl", data, halves, CodexSession) == fresh


def _line_halves(data: bytes, n: int) -> tuple[int, int]:
    """Cut points in the middle of line ``n`` (0-based) and right after its newline."""
    start = 0
    for _ in range(n):
        start = data.index(b"\n", start) + 1
    end = data.index(b"\n", start) + 1
    return (start + end) // 2, end
