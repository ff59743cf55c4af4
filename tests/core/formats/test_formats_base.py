"""The agent-neutral pieces of ``core.formats.base``: the forest over indexes (the
rules of ``core.tree.build_tree``) and the image marker transcripts show."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.stats_reference import leaf_count, tree_depth

from core.formats.base import Forest, _ByIndex, image_marker
from core.tree import build_tree


def test_forest_matches_core_tree_rules() -> None:
    # 0 root; 1, 2 children of 0 (2 older than 1); 3 child of 1; 4 orphan; 5 <-> 6 cycle
    parents = [None, 0, 0, 1, 99, 6, 5]
    times = [1, 5, 3, 6, None, 2, 2]
    forest = Forest(parents, times)
    assert forest.roots == [0, 4, 5]
    assert forest.children[0] == [2, 1]  # oldest first
    assert forest.children[5] == [6]
    assert forest.path_to(3) == [0, 1, 3]
    assert forest.path_to(None) == []
    assert forest.depth() == 3
    assert forest.tip_count() == 4  # 2, 3, 4, 6
    # the same shape through core's tree of entries
    entries = [
        {"id": str(i), "parentId": None if p is None else str(p), "timestamp": t}
        for i, (p, t) in enumerate(zip(parents, times, strict=True))
    ]
    for entry in entries:
        entry["timestamp"] = (
            None if entry["timestamp"] is None else f"2026-01-01T00:00:0{entry['timestamp']}Z"
        )
    roots = build_tree(entries)
    assert [int(r["entry"]["id"]) for r in roots] == forest.roots
    assert tree_depth(roots) == forest.depth()
    assert leaf_count(roots) == forest.tip_count()


def test_forest_equal_times_keep_file_order() -> None:
    forest = Forest([None, 0, 0, 0], [1, 2, 2, None])
    assert forest.children[0] == [3, 1, 2]


def test_values_by_index_read_as_a_sequence_from_either_end() -> None:
    read: list[int] = []

    def tens(index: int) -> int:
        read.append(index)
        return index * 10

    values = _ByIndex(3, tens)
    assert (len(values), values[0], values[2], values[-1], values[-3]) == (3, 0, 20, 20, 0)
    assert values[::-1] == [20, 10, 0] and list(values) == [0, 10, 20]
    assert values.index(20) == 2 and 10 in values
    for outside in (3, -4):
        with pytest.raises(IndexError):
            values[outside]
    assert read[:4] == [0, 2, 2, 0]  # computed when read, never held


def test_image_marker_counts_decoded_bytes() -> None:
    for size in (0, 1, 2, 3, 10, 1000):
        data = base64.b64encode(bytes(size)).decode()
        expected = f"[image image/png, {size} bytes]"
        assert image_marker("image/png", data) == {"type": "text", "text": expected}


def test_image_marker_data_url_and_odd_values() -> None:
    url = "data:image/jpeg;base64," + base64.b64encode(b"abcde").decode()
    assert image_marker(None, url)["text"] == "[image image/jpeg, 5 bytes]"
    assert image_marker("image/gif", "https://x/y.gif")["text"] == "[image image/gif, 15 bytes]"
    assert image_marker(None, None)["text"] == "[image image, 0 bytes]"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-2, 12)), st.one_of(st.none(), st.integers(0, 3))
        ),
        max_size=12,
    )
)
def test_forest_as_arrays_keeps_core_tree_rules(rows: list[tuple[int | None, int | None]]) -> None:
    """Any parents (missing, out of range, itself, cycles) and times: the forest held
    as arrays has core's tree, child for child."""
    parents = [parent for parent, _ in rows]
    times = [time for _, time in rows]
    forest = Forest(parents, times)
    entries = [
        {
            "id": str(i),
            "parentId": None if p is None else str(p),
            "timestamp": None if t is None else f"2026-01-01T00:00:0{t}Z",
        }
        for i, (p, t) in enumerate(rows)
    ]
    stack = build_tree(entries)
    assert [int(root["entry"]["id"]) for root in stack] == forest.roots
    seen = 0
    while stack:
        node = stack.pop()
        index = int(node["entry"]["id"])
        kids = [int(kid["entry"]["id"]) for kid in node["children"]]
        assert forest.children[index] == kids
        for kid in kids:
            assert forest.parent(kid) == index
        if int(node["entry"]["id"]) in forest.roots:
            assert forest.parent(index) is None
        stack.extend(node["children"])
        seen += 1
    assert seen == len(rows) == len(forest.children) == len(forest.parent_of)
    assert list(forest.children) == [forest.children[i] for i in range(len(rows))]
    assert forest.depth() == tree_depth(build_tree(entries))
