"""``context.json``, ``tree.txt`` and ``stats.json`` of a session file over half the
size the daemon renders (`STREAMED_CONTEXT_FRACTION`) are made without every entry
parsed at once (issue 26 point 6: a 49 MB session of 200,000 short entries took the
daemon to 442-451 MB for its first read of each): ``context.json`` written a message
at a time into memory, ``tree.txt`` and ``stats.json`` entry by entry. The bytes are
those of the rendering from the whole parse, at the first read (the load renders it)
and at a later one (the session held compact), and the peak is a fraction of it."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.fixture_paths import fixture_files
from support.long_sessions import Chain, a_long_session

from core import SessionManager
from core.formats.xcsh import XcshSession
from sessionfs.view.loaded_session import STREAMED_CONTEXT_FRACTION, LoadedSession
from sessionfs.view.session_ref import SessionRef

LEAN = ("context.json", "tree.txt", "stats.json")
#: A lean first read's traced peak at most, in times the file (short entries).
LEAN_PEAK_TIMES_THE_FILE = {"context.json": 7, "tree.txt": 4, "stats.json": 3.5}


def loaded(path: Path, read_limit: int | None) -> LoadedSession:
    ref = SessionRef(path.parent.name, path.stem, path, {}, 0, 0)
    session = LoadedSession(ref=ref)
    session.whole_read_limit = read_limit
    return session


def from_the_parse(path: Path, what: str) -> bytes:
    """The rendering from every entry parsed (no read limit: never lean)."""
    session = loaded(path, None)
    session.load()
    return session.rendered(what)


def lean_limit(path: Path) -> int:
    """A read limit under which ``path`` is over the lean size but still read whole."""
    size = path.stat().st_size
    return size * STREAMED_CONTEXT_FRACTION - 1


def lean_first_read(path: Path, what: str, read_limit: int) -> bytes:
    session = loaded(path, read_limit)
    session.load(warm=what)  # the first read: the load renders it
    found = session.cached(what)
    assert found is not None
    return found


def lean_later_read(path: Path, what: str, read_limit: int) -> bytes:
    session = loaded(path, read_limit)
    session.load()  # held compact (a listing, a stat), then read
    return session.rendered(what)


def odd_sessions(tmp_path: Path) -> list[Path]:
    """Stats and trees of odd entries: no role, a message not a dict, an unhashable
    role, no parentId, no type, no id, a repeated id, two roots, a self parent."""
    odd = Chain()
    odd.message("user", content="first")
    odd.add("message", message={"content": "no role"})
    odd.add("message", message="not a dict")
    odd.add("message", message={"role": ["unhashable"], "content": "x"})
    odd.add("message", message={"role": "assistant", "usage": {"input": 3, "cost": 0.5}})
    odd.lines.append({"type": "message", "id": "noparent", "message": {"role": "user"}})
    odd.lines.append({"id": "notype", "parentId": "noparent"})
    odd.lines.append({"type": "custom", "parentId": "notype"})
    odd.lines.append({"type": "message", "id": "self", "parentId": "self", "message": {}})
    odd.lines.append({"type": "message", "id": "00000001", "parentId": None, "message": {}})
    odd.last = "00000001"
    odd.message("assistant", content="after the repeat", usage={"output": 7})
    rooted = Chain()
    rooted.message("user", content="first root")
    rooted.add("message", parent=None, message={"role": "user", "content": "second root"})
    paths = [odd.write(tmp_path / "odd.jsonl"), rooted.write(tmp_path / "rooted.jsonl")]
    empty = tmp_path / "empty.jsonl"
    header = {"type": "session", "version": 3, "id": "e", "cwd": "/", "timestamp": "t"}
    empty.write_bytes(orjson.dumps(header) + b"\n")
    return [*paths, empty]


def sessions(tmp_path: Path) -> list[Path]:
    found = [a_long_session(tmp_path), *odd_sessions(tmp_path)]
    for fixture in fixture_files():
        path = tmp_path / fixture.name
        path.write_bytes(fixture.read_bytes())
        SessionManager.open(str(path))  # migrated to the current version, as agents do
        found.append(path)
    return found


@pytest.mark.parametrize("what", LEAN)
def test_lean_renderings_are_the_bytes_of_the_whole_parse(tmp_path: Path, what: str) -> None:
    for path in sessions(tmp_path):
        expected = from_the_parse(path, what)
        limit = lean_limit(path)
        assert lean_first_read(path, what, limit) == expected, (path.name, what)
        assert lean_later_read(path, what, limit) == expected, (path.name, what)
        # A file over the read limit (read where it is, a line at a time): the same.
        assert lean_later_read(path, what, 1) == expected, (path.name, what)


def many_short_entries(tmp_path: Path, count: int) -> Path:
    """The shape that costs most parsed per byte: short messages (bench_huge_session's)."""
    chain = Chain()
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        chain.message(role, content=[{"type": "text", "text": f"message {i} about the cache"}])
    return chain.write(tmp_path / "short.jsonl")


def first_read_peak(path: Path, what: str, read_limit: int | None) -> int:
    """tracemalloc's peak over a fresh session's first read of ``what`` (its load)."""
    session = loaded(path, read_limit)
    tracemalloc.start()
    try:
        session.load(warm=what)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert session.cached(what) is not None
    return peak


@pytest.mark.parametrize("what", LEAN)
def test_a_lean_first_read_peaks_at_a_fraction_of_the_whole_parse(
    tmp_path: Path, what: str
) -> None:
    path = many_short_entries(tmp_path, 20_000)
    size = path.stat().st_size
    assert size > 3_000_000
    whole = first_read_peak(path, what, None)
    lean = first_read_peak(path, what, lean_limit(path))
    # Every entry parsed at once costs ~7-10 times a file of short entries; made
    # lean, what is held is the file, its index (a few hundred bytes an entry), the
    # rendering, and for context.json a small stand-in an entry. Measured: whole
    # 7.3-9.1 times the file; lean context.json 5.6, tree.txt 3.2 (its lines encoded a
    # piece at a time), stats.json 2.7 (the file and its index: the stats' own work
    # is the forest's arrays, no object an entry).
    assert whole > 6 * size, (what, whole, size)
    assert lean < 0.75 * whole, (what, lean, whole, size)
    assert lean < LEAN_PEAK_TIMES_THE_FILE[what] * size, (what, lean, size)


@pytest.mark.parametrize("what", LEAN)
def test_a_lean_rendering_after_another_process_appended_is_of_the_file_now(
    tmp_path: Path, what: str
) -> None:
    path = a_long_session(tmp_path)
    session = loaded(path, lean_limit(path))
    session.load()
    session.rendered(what)
    leaf = orjson.loads(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[1])["id"]
    line = {
        "type": "message",
        "id": "appended",
        "parentId": leaf,
        "timestamp": "2026-01-02T00:00:00.000Z",
        "message": {"role": "user", "content": "appended by another process"},
    }
    with open(path, "ab") as f:
        f.write(orjson.dumps(line) + b"\n")
    assert session.refresh() == 1  # caught up in place (the held bytes grown)
    assert session.rendered(what) == from_the_parse(path, what)
    assert b"appended by another process" in from_the_parse(path, "context.json")


def made_lean(monkeypatch: pytest.MonkeyPatch, what: str, render: Callable[[], object]) -> bool:
    """Whether ``render`` made ``what`` lean: ``context.json`` written a message at a
    time, ``tree.txt`` with no parse of every entry at once."""
    from sessionfs.view import loaded_session

    streamed: list[str] = []
    parses: list[int] = []
    write = loaded_session.write_streamed
    parsed_once = XcshSession.parsed_once

    def counted_write(index: Any, what: str, out: Any) -> None:
        streamed.append(what)
        write(index, what, out)

    def counted_parse(source: XcshSession, entries: Any = None) -> Any:
        parses.append(1)
        return parsed_once(source, entries)

    with monkeypatch.context() as patched:
        patched.setattr(loaded_session, "write_streamed", counted_write)
        patched.setattr(XcshSession, "parsed_once", counted_parse)
        render()
    return bool(streamed) if what == "context.json" else not parses


def test_a_file_at_the_lean_size_decides_alike_at_every_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One measure of the file's size (its ``st_size``) for `STREAMED_CONTEXT_FRACTION`
    everywhere: a file one byte over half the read limit has ``context.json`` and
    ``tree.txt`` made lean at its load and at a later read, also once another process
    appended a line and the start of another (the bytes held then leave that torn
    line out: measured by them, ``context.json`` was made from the parse and
    ``tree.txt`` lean); a file at it, neither."""
    path = a_long_session(tmp_path)
    leaf = orjson.loads(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[1])["id"]
    line = orjson.dumps({"type": "message", "id": "appended", "parentId": leaf, "message": {}})
    torn = b'{"type": "message", "id": "being written'
    before = path.read_bytes()
    whole = before + line + b"\n" + torn
    path.write_bytes(whole)
    size = len(whole)
    for limit, lean in ((2 * size, False), (2 * (size - 1), True)):
        decided = []
        for what in ("context.json", "tree.txt"):
            first = loaded(path, limit)  # the first read: the load renders it
            decided.append(made_lean(monkeypatch, what, partial(first.load, warm=what)))
        later = loaded(path, limit)  # held compact (a listing, a stat), then read
        later.load()
        for what in ("context.json", "tree.txt"):
            decided.append(made_lean(monkeypatch, what, partial(later.rendered, what)))
        path.write_bytes(before)  # held from before the append, then caught up
        caught_up = loaded(path, limit)
        caught_up.load()
        path.write_bytes(whole)  # (the same inode, grown)
        assert caught_up.refresh() == 1 and caught_up.text_size == size
        for what in ("context.json", "tree.txt"):
            decided.append(made_lean(monkeypatch, what, partial(caught_up.rendered, what)))
        assert decided == [lean] * 6, (limit, size, decided)
