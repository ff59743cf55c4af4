"""xcsh sessions on the one read-side interface (``XcshSession`` over the compact
index): every rendering input gives the bytes the mount served before -- the real
fixtures and a hand-made odd session (branches, labels, duplicate and odd ids, junk,
a torn tail) -- and appends by another process are caught up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.agent_messages import user_entry
from view.test_compact_session import compact_session, line, odd_session, sessions

from core.formats.base import SessionSource
from core.formats.xcsh import XcshSession
from core.tree import build_tree
from sessionfs.view import render
from sessionfs.view.loaded_session import LoadedSession


def xcsh_session(path: Path) -> XcshSession:
    return XcshSession(path)


def _tree_rows(source: SessionSource) -> list[tuple[str, str, str, int]]:
    """(name, kind, text, depth) of every entry in tree order."""
    rows = []
    forest = source.forest()
    stack = [(i, 0) for i in reversed(forest.roots)]
    while stack:
        index, depth = stack.pop()
        text = " ".join(source.entry_text(index).split())[: render.TREE_TEXT_CHARS]
        rows.append((source.entry_name(index), source.entry_kind(index), text, depth))
        stack.extend((kid, depth + 1) for kid in reversed(forest.children[index]))
    return rows


def _core_tree_rows(loaded: LoadedSession) -> list[tuple[str, str, str, int]]:
    rows = []
    stack: list[tuple[dict[str, Any], int]] = [
        (n, 0) for n in reversed(build_tree(loaded.entries()))
    ]
    while stack:
        node, depth = stack.pop()
        entry = node["entry"]
        entry_id = entry.get("id")
        name = entry_id if isinstance(entry_id, str) else ""
        rows.append((name, render.kind_of(entry), render.one_line_text(entry), depth))
        stack.extend((kid, depth + 1) for kid in reversed(node["children"]))
    return rows


def assert_serves_the_same(source: XcshSession, loaded: LoadedSession) -> None:
    assert render.pretty_json(source.header()) == loaded.rendered("header.json")
    assert render.title_text({"title": source.title() or None}) == loaded.rendered("title")
    assert render.context_json(source.context()) == loaded.rendered("context.json")
    messages = source.transcript_messages()
    transcript = render.transcript_md(
        source.title() or None,
        [m.message for m in messages],
        [{"id": m.entry_name, "timestamp": m.time} for m in messages],
    )
    assert transcript == loaded.rendered("transcript.md")
    assert render.pretty_json(source.stats()) == loaded.rendered("stats.json")
    assert len(source) == loaded.entry_count()
    for index in range(len(source)):
        assert render.pretty_json(source.entry(index)) == loaded.entry_bytes(index)
        assert (
            source.entry_time_ms(index) is None
            or loaded.entry_mtime_ns(index) == (source.entry_time_ms(index) or 0) * 1_000_000
        )
    assert source.path_indexes() == loaded.path_indexes()
    assert source.leaf_name() == (loaded.leaf_id() or None)
    assert source.labels() == loaded.labels()
    assert _tree_rows(source) == _core_tree_rows(loaded)


def test_xcsh_session_serves_what_the_mount_served(tmp_path: Path) -> None:
    for path in sessions(tmp_path):
        source = xcsh_session(path)
        assert_serves_the_same(source, compact_session(path))
        lines = path.read_bytes().split(b"\n")
        for index in range(len(source)):
            assert source.raw_line(index) in lines


def test_odd_names_and_lookup(tmp_path: Path) -> None:
    source = xcsh_session(odd_session(tmp_path))
    names = [source.entry_name(i) for i in range(len(source))]
    assert names == ["a", "b", "c", "l1", "l2", "l3", "b", "a/b", "", "", "second", "d"]
    assert source.index_of("b") == 6  # the last entry of a repeated id, as by_id
    assert source.index_of("nope") is None
    assert source.title() == "odd one"
    assert "malformedLines" not in source.stats()


def test_appends_and_replacement_are_caught_up(tmp_path: Path) -> None:
    path = odd_session(tmp_path)
    source = xcsh_session(path)
    assert source.catch_up() is False
    with open(path, "ab") as f:
        f.write(b'x","parentId":"d","timestamp":"t","message":{"role":"user","content":"t"}}\n')
        f.write(line(user_entry("e", "tornx", "new")))
    assert source.catch_up() is True
    assert source.leaf_name() == "e"
    assert_serves_the_same(source, compact_session(path))
    path.write_bytes(line({"type": "session", "version": 3, "id": "new", "timestamp": "t"}))
    assert source.catch_up() is True
    assert len(source) == 0 and source.leaf_index() is None and source.title() == ""


def test_an_older_format_version_is_not_held_compact(tmp_path: Path) -> None:
    import pytest
    from support.fixture_paths import fixture_files

    from core.formats.xcsh_file import NotCompact

    with pytest.raises(NotCompact):
        XcshSession(fixture_files()[0])  # a v1 file: the manager migrates it


def test_an_omp_18_session_with_a_title_slot(tmp_path: Path) -> None:
    from support.omp_files import conversation, write_omp_session

    path = write_omp_session(
        tmp_path / "sessions" / "--p--" / "omp.jsonl",
        conversation(),
        title="Slot title",
        source="user",
    )
    source = xcsh_session(path)
    assert source.title() == "Slot title"
    assert_serves_the_same(source, compact_session(path))
    first = path.read_bytes().split(b"\n")[2]  # after the slot and the header
    assert source.raw_line(0) == first
