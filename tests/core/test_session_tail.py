"""`core.session_tail` and `SessionManager.open_tail`: an append that reads a session
file's head, tail and the lines holding the ids it asks about, never the whole file,
and comes out exactly as an append through a loaded manager would (issue 26 point 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from core import SessionManager, paths, session_tail
from core.session_tail import ScannedEntries, read_file_tail
from core.title_slot import new_title_slot, slot_bytes, split_title_slot

HEADER = {"type": "session", "version": 3, "id": "sess-1", "timestamp": "t", "cwd": "/w"}


def entry(entry_id: Any, parent: Any, text: str = "hi") -> dict[str, Any]:
    body = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "t"}
    body["message"] = {"role": "user", "content": text, "timestamp": 1}
    return body


def write(path: Path, *objects: Any, tail: bytes = b"", head: bytes = b"") -> bytes:
    data = head + b"".join(orjson.dumps(o) + b"\n" for o in objects) + tail
    path.write_bytes(data)
    return data


def loaded_leaf(path: Path) -> str | None:
    return SessionManager.open(path, browse=True).get_leaf_id()


TORN = b'{"type":"mes'
CASES = {
    "plain": ((HEADER, entry("aa", None), entry("bb", "aa")), b""),
    "torn last line": ((HEADER, entry("aa", None), entry("bb", "aa")), TORN),
    "last object without a newline": ((HEADER, entry("aa", None)), orjson.dumps(entry("cc", "aa"))),
    "last lines without an id": ((HEADER, entry("aa", None), {"type": "x"}, [1, 2]), b"junk\n"),
    "header only": ((HEADER,), b""),
    "an id that is not a string last": ((HEADER, entry("aa", None), entry(7, "aa")), b""),
}


@pytest.mark.parametrize("case", CASES)
def test_the_tail_gives_the_leaf_and_end_a_load_gives(tmp_path: Path, case: str) -> None:
    objects, tail_bytes = CASES[case]
    path = tmp_path / "s.jsonl"
    data = write(path, *objects, tail=tail_bytes)
    tail = read_file_tail(path)
    assert tail is not None
    assert tail.leaf_id == loaded_leaf(path)
    assert tail.header == HEADER
    assert tail.end == len(data) - (len(TORN) if tail_bytes == TORN else 0)


def test_a_long_last_line_and_small_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_tail, "CHUNK_BYTES", 7)
    path = tmp_path / "s.jsonl"
    write(path, HEADER, entry("aa", None), entry("bb", "aa", "x" * 100))
    tail = read_file_tail(path)
    assert tail is not None and tail.leaf_id == "bb"


def test_a_title_slot_is_read_and_folded_into_the_header(tmp_path: Path) -> None:
    header = {**HEADER, "title": "old"}
    slot = new_title_slot({**header, "title": "new", "titleSource": "user"}, "t")
    path = tmp_path / "s.jsonl"
    write(path, header, entry("aa", None), head=slot_bytes(slot))
    tail = read_file_tail(path)
    assert tail is not None
    assert tail.title_slot is not None
    assert tail.title_slot == split_title_slot(path.read_bytes())[0]
    assert tail.header["title"] == "new"
    assert tail.leaf_id == "aa"


@pytest.mark.parametrize(
    "first",
    [{**HEADER, "version": 2}, {"type": "message", "id": "x"}, "not json"],
    ids=["older version", "no header", "junk"],
)
def test_anything_but_a_current_header_first_is_left_to_a_load(tmp_path: Path, first: Any) -> None:
    path = tmp_path / "s.jsonl"
    if isinstance(first, str):
        path.write_bytes(first.encode() + b"\n" + orjson.dumps(entry("aa", None)) + b"\n")
    else:
        write(path, first, entry("aa", None))
    assert read_file_tail(path) is None


def test_no_id_in_the_searched_end_is_left_to_a_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_tail, "LEAF_SEARCH_BYTES", 64)
    monkeypatch.setattr(session_tail, "CHUNK_BYTES", 16)
    path = tmp_path / "s.jsonl"
    write(path, HEADER, entry("aa", None), *([{"type": "x"}] * 20))
    assert read_file_tail(path) is None


def test_scanned_entries_are_exactly_the_loaders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_tail, "CHUNK_BYTES", 5)  # hits across chunk boundaries
    path = tmp_path / "s.jsonl"
    write(
        path,
        HEADER,
        entry("aa", None, 'the text says "bb" and "sess-1"'),
        entry("cc", "aa", "first"),
        entry("cc", "aa", "second"),
        {"type": "label", "id": "dd", "parentId": "cc", "targetId": "aa", "timestamp": "t"},
    )
    tail = read_file_tail(path)
    assert tail is not None
    known = ScannedEntries(path, tail)
    assert known.get("bb") is None  # only quoted in a text
    assert known.get("sess-1") is None  # the header's id: not an entry
    second = known.get("cc")
    assert second is not None and second["message"]["content"] == "second"  # last one wins
    assert known.get("aa") == entry("aa", None, 'the text says "bb" and "sess-1"')
    assert known.get("dd") is not None  # its line also holds "aa": found once each
    assert known.get("zz") is None


def test_an_append_through_the_tail_is_an_append_through_a_loaded_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    before = write(path, HEADER, entry("aa", None), entry("bb", "aa"))
    tail = read_file_tail(path)
    assert tail is not None
    # The first id drawn is taken (by "bb"): the scan must see it and draw again.
    draws = iter([0xBB, 0x12345678])
    monkeypatch.setattr(paths._id_random, "getrandbits", lambda _n: next(draws))
    path.write_bytes(before.replace(b'"bb"', b'"000000bb"'))
    tail = read_file_tail(path)
    assert tail is not None and tail.leaf_id == "000000bb"
    manager = SessionManager.open_tail(path, tail, ScannedEntries(path, tail), {})
    with manager.batch(caught_up=True):
        new_id = manager.append_message({"role": "user", "content": "new", "timestamp": 2})
    manager.flush()
    assert new_id == "12345678"
    data = path.read_bytes()
    assert data.startswith(before.replace(b'"bb"', b'"000000bb"'))  # nothing else changed
    loaded = SessionManager.open(path, browse=True)
    last = loaded.get_entries()[-1]
    assert last["id"] == new_id and last["parentId"] == "000000bb"
    assert loaded.get_leaf_id() == new_id


def test_lines_appended_by_another_process_are_caught_up_and_chained_onto(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    write(path, HEADER, entry("aa", None))
    tail = read_file_tail(path)
    assert tail is not None
    manager = SessionManager.open_tail(path, tail, ScannedEntries(path, tail), {})
    with path.open("ab") as f:  # the agent, after the tail was read; torn at the end
        f.write(orjson.dumps(entry("ee", "aa")) + b"\n" + b'{"type":"mess')
    theirs = path.read_bytes()
    manager.catch_up()
    with manager.batch(caught_up=True):
        new_id = manager.append_message({"role": "user", "content": "new", "timestamp": 2})
    manager.flush()
    data = path.read_bytes()
    assert data.startswith(theirs)  # every byte they wrote is kept
    assert data[len(theirs) :].startswith(b"\n")  # never glued onto the torn line
    last = SessionManager.open(path, browse=True).get_entries()[-1]
    assert last["id"] == new_id and last["parentId"] == "ee"


def test_a_reference_to_an_entry_not_there_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    before = write(path, HEADER, entry("aa", None, 'mentions "zz"'))
    tail = read_file_tail(path)
    assert tail is not None
    manager = SessionManager.open_tail(path, tail, ScannedEntries(path, tail), {})
    with pytest.raises(KeyError):  # EntryNotFoundError
        manager.append_label_change("zz", "x")
    assert manager.append_label_change("aa", "x")
    manager.flush()
    assert path.read_bytes().startswith(before)
    assert SessionManager.open(path, browse=True).get_label("aa") == "x"
