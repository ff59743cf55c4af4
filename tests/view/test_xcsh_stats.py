"""``stats.json`` and ``tree.txt`` of an xcsh session made from the session's `Forest`
(three arrays) and one pass over the entries (`XcshReads.stats`,
`render.source_tree_text`) are the bytes core's definitions give from every entry
parsed: `support.stats_reference.session_stats` (core's tree of entries,
``path_to_root``) and
`render.tree_text` (``build_tree``) -- over random sessions with branches, parent
cycles, orphans and entries without a parent or an id, repeated ids, labels set and
cleared, compactions, odd types and roles, and lines that are no entry; read compact
(whole, a line at a time, inside and outside one parse) and parsed (a manager), and
the real fixtures migrated from format version 1 in memory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.fixture_paths import fixture_files
from support.stats_reference import session_stats

from core import SessionManager
from core.context import path_to_root
from core.formats.xcsh import XcshReads, XcshSession, by_id_of
from core.formats.xcsh_file import CompactSession, read_file
from core.formats.xcsh_parsed import ManagerSource
from core.tree import apply_label, build_tree, usage_totals
from sessionfs.view import render
from sessionfs.view.loaded_session import open_browse
from sessionfs.view.renderings import render_source

#: ids drawn from few names: repeats are common
IDS = ("a", "b", "c", "d", "e", "f", "g", "h")
TIMES = (
    "2026-01-01T00:00:01.000Z",
    "2026-01-01T00:00:02.000Z",
    "2026-01-01T02:00:01.000+02:00",  # the same moment as the first
    "not a time",
)
ROLES = ("user", "assistant", "toolResult", "developer")

an_id = st.one_of(st.sampled_from(IDS), st.just(7), st.none())
a_parent = st.one_of(st.sampled_from(IDS), st.none(), st.just("unknown"), st.just(["x"]))
a_usage = st.fixed_dictionaries(
    {},
    optional={
        "input": st.integers(0, 900),
        "output": st.integers(0, 900),
        "cacheRead": st.integers(0, 50),
        "cost": st.one_of(
            st.floats(0, 2, allow_nan=False),
            st.fixed_dictionaries({"total": st.floats(0, 2, allow_nan=False)}),
        ),
    },
)
a_message = st.one_of(
    st.fixed_dictionaries(
        {"content": st.sampled_from(["hi", "two\n  lines", ""])},
        optional={
            "role": st.one_of(st.sampled_from(ROLES), st.just(["unhashable"])),
            "usage": a_usage,
            "toolName": st.just("task"),
            "details": st.fixed_dictionaries({"usage": a_usage}),
        },
    ),
    st.just("not a dict"),
)
an_entry = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["message", "message", "message", "compaction", "custom", "model_change", 3]
        ),
        "id": an_id,
        "parentId": a_parent,
        "timestamp": st.one_of(st.sampled_from(TIMES), st.none()),
        "message": a_message,
        "summary": st.just("compacted"),
    },
)
a_label = st.builds(
    lambda target, label: {"type": "label", "targetId": target, "label": label},
    st.sampled_from(IDS),
    st.sampled_from(["kept", ""]),
)
a_line = st.one_of(
    an_entry.map(orjson.dumps),
    a_label.map(orjson.dumps),
    st.sampled_from([b"", b"not json", b"[1, 2]"]),
)


LABELS_SET_AND_CLEARED = [
    {"type": "custom", "id": "a", "parentId": None},
    {"type": "custom", "id": "b", "parentId": "a"},
    {"type": "label", "targetId": "a", "label": "kept"},
    {"type": "label", "targetId": "b", "label": "kept"},
    {"type": "label", "targetId": "a", "label": ""},
]


def write_session(path: Path, lines: list[bytes]) -> Path:
    header = {"type": "session", "version": 3, "id": "s", "cwd": "/w", "timestamp": TIMES[0]}
    path.write_bytes(b"\n".join([orjson.dumps(header), *lines]) + b"\n")
    return path


def core_stats(entries: list[dict[str, Any]], leaf_id: str | None, usage: Any) -> bytes:
    """``stats.json`` as core defines it, from every entry parsed."""
    return render.pretty_json(session_stats(entries, leaf_id, by_id_of(entries), usage))


def labels_of(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Target id -> label after every ``label`` entry, by core's rule (`apply_label`):
    not the source's own index of them."""
    labels: dict[str, str] = {}
    for entry in entries:
        if entry.get("type") == "label":
            apply_label(labels, entry)
    return labels


def core_tree(entries: list[dict[str, Any]], leaf_id: str | None) -> bytes:
    """``tree.txt`` as core's tree of entries gives it, encoded in one piece."""
    labels = labels_of(entries)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render, "TREE_LINES_ENCODED_AT_ONCE", sys.maxsize)
        return render.tree_text(build_tree(entries, labels), leaf_id, by_id_of(entries))


def assert_as_core_defines(
    source: XcshReads, entries: list[dict[str, Any]], leaf_id: str | None, usage: Any
) -> None:
    assert render_source(source, "stats.json") == core_stats(entries, leaf_id, usage)
    assert render_source(source, "tree.txt") == core_tree(entries, leaf_id)
    by_id = by_id_of(entries)
    position = {id(entry): at for at, entry in enumerate(entries)}
    assert source.path_indexes() == [position[id(e)] for e in path_to_root(leaf_id, by_id)]


def assert_compact_and_parsed_as_core_defines(path: Path) -> None:
    index = CompactSession.build(*read_file(path), keep_entries=False)[0]
    entries = index.parse_entries()
    usage = usage_totals(entries)
    for whole_up_to in (None, 0):  # held whole, and read where it is a line at a time
        source = XcshSession(path, whole_up_to=whole_up_to)
        assert_as_core_defines(source, entries, index.leaf_id, usage)
        source = XcshSession(path, whole_up_to=whole_up_to)
        with source.parsed_once():
            assert_as_core_defines(source, entries, index.leaf_id, usage)
    parsed = ManagerSource(open_browse(path))
    held = list(parsed.manager.get_entries())
    assert_as_core_defines(parsed, held, parsed.manager.get_leaf_id(), usage_totals(held))


@pytest.fixture(params=[1, 2, 4096])
def lines_encoded_at_once(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """``tree.txt`` encoded a line at a time, two, and in one piece for these sizes."""
    monkeypatch.setattr(render, "TREE_LINES_ENCODED_AT_ONCE", request.param)
    return int(request.param)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(a_line, max_size=14))
# The leaf in a cycle of three, not where the forest cuts it: core's path walks the
# whole cycle up from the leaf (3), the forest's tree reaches a root in 2.
@example([orjson.dumps({"id": i, "parentId": p}) for i, p in ("ab", "bc", "ca")])
# Labels set on two entries, then one cleared: random lines seldom clear a label that
# an entry of the session carries.
@example([orjson.dumps(line) for line in LABELS_SET_AND_CLEARED])
def test_stats_and_tree_are_what_core_defines_for_any_session(
    tmp_path: Path, lines_encoded_at_once: int, lines: list[bytes]
) -> None:
    assert_compact_and_parsed_as_core_defines(write_session(tmp_path / "s.jsonl", lines))


def test_fixtures_migrated_and_at_the_current_version_are_what_core_defines(
    tmp_path: Path,
) -> None:
    for fixture in fixture_files():
        migrated = ManagerSource(open_browse(fixture))  # version 1, migrated in memory
        held = list(migrated.manager.get_entries())
        assert held
        leaf = migrated.manager.get_leaf_id()
        assert_as_core_defines(migrated, held, leaf, usage_totals(held))
        path = tmp_path / fixture.name
        path.write_bytes(fixture.read_bytes())
        ManagerSource(open_browse(path))  # (browsing never rewrites the file)
        assert path.read_bytes() == fixture.read_bytes()
        SessionManager.open(str(path))  # migrated on disk, as the agents do
        assert_compact_and_parsed_as_core_defines(path)


def test_a_deep_chain_with_branches_and_a_cycle_counts_as_core_does(tmp_path: Path) -> None:
    """Deeper than the random sessions: 3,000 entries in one chain, a fork every 500,
    a cycle of two and an orphan at the end."""
    lines: list[dict[str, Any]] = []
    parent = None
    for i in range(3000):
        entry_id = f"e{i}"
        message = {"role": "user" if i % 2 else "assistant", "content": f"m {i}"}
        lines.append({"type": "message", "id": entry_id, "parentId": parent, "message": message})
        if i % 500 == 499:
            lines.append({"type": "custom", "id": f"fork{i}", "parentId": f"e{i - 3}"})
        parent = entry_id
    lines.append({"type": "custom", "id": "x", "parentId": "y"})
    lines.append({"type": "custom", "id": "y", "parentId": "x"})
    lines.append({"type": "custom", "id": "orphan", "parentId": "gone"})
    lines.append({"type": "message", "id": "tip", "parentId": "e2999", "message": {}})
    path = write_session(tmp_path / "deep.jsonl", [orjson.dumps(line) for line in lines])
    assert_compact_and_parsed_as_core_defines(path)
    stats = orjson.loads(render_source(XcshSession(path), "stats.json"))
    assert (stats["roots"], stats["depth"], stats["pathLength"]) == (3, 3001, 3001)
    assert stats["leafCount"] == 6 + 3  # 6 forks' tips; y (x's child), the orphan, the tip
