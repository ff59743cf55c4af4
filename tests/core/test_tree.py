"""core.tree: roots, children order, cycles and usage over plain entries; depth and
leaves by the tests' reference (`support.stats_reference`, what stats.json is held to)."""

from __future__ import annotations

from typing import Any

from support.stats_reference import leaf_count, tree_depth

from core import tree


def entry(entry_id: str, parent: str | None, timestamp: str = "2025-01-01T00:00:00Z") -> dict:
    return {"type": "custom", "id": entry_id, "parentId": parent, "timestamp": timestamp}


def ids(nodes: list[dict[str, Any]]) -> list[str]:
    return [node["entry"]["id"] for node in nodes]


def test_children_sort_by_parsed_time_not_by_text() -> None:
    # 12:00+02:00 is 10:00Z: earlier than 11:00Z although its text sorts later.
    entries = [
        entry("root", None),
        entry("late", "root", "2025-01-01T11:00:00Z"),
        entry("early", "root", "2025-01-01T12:00:00+02:00"),
    ]
    (root,) = tree.build_tree(entries)
    assert ids(root["children"]) == ["early", "late"]


def test_unparsable_timestamps_come_first_and_ties_keep_file_order() -> None:
    entries = [
        entry("root", None),
        entry("b", "root", "2025-01-01T10:00:00Z"),
        entry("c", "root", "2025-01-01T10:00:00Z"),
        entry("a", "root", "not a time"),
    ]
    (root,) = tree.build_tree(entries)
    assert ids(root["children"]) == ["a", "b", "c"]


def test_roots_are_null_self_and_missing_parents_and_labels_are_attached() -> None:
    entries = [entry("a", None), entry("b", "b"), entry("c", "gone"), entry("d", "a")]
    roots = tree.build_tree(entries, {"d": "kept"})
    assert ids(roots) == ["a", "b", "c"]
    assert roots[0]["children"][0]["label"] == "kept"


def test_a_parent_cycle_is_cut_so_every_entry_appears_once() -> None:
    entries = [entry("r", None), entry("x", "y"), entry("y", "x")]
    roots = tree.build_tree(entries)
    assert ids(roots) == ["r", "x"]
    assert ids(roots[1]["children"]) == ["y"]
    assert tree_depth(roots) == 2
    assert leaf_count(roots) == 2


def test_depth_and_leaves_of_a_deep_chain_without_recursion() -> None:
    entries = [entry("0", None)] + [entry(str(i), str(i - 1)) for i in range(1, 50_000)]
    roots = tree.build_tree(entries)
    assert tree_depth(roots) == 50_000
    assert leaf_count(roots) == 1
    assert tree_depth([]) == 0 and leaf_count([]) == 0


def test_children_index_and_parent_of_skip_self_parents() -> None:
    entries = [entry("a", None), entry("b", "a"), entry("c", "a"), entry("s", "s")]
    assert tree.parent_of(entries[3]) is None
    assert tree.children_index(entries) == {"a": [entries[1], entries[2]]}


def test_last_id_skips_entries_without_an_id() -> None:
    assert tree.last_id([entry("a", None), {"type": "custom"}]) == "a"
    assert tree.last_id([]) is None


def assistant(usage: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": "m", "message": {"role": "assistant", "usage": usage}}


def test_usage_totals_add_tokens_and_both_cost_shapes() -> None:
    entries = [
        assistant({"input": 3, "output": 4, "cost": {"total": 0.5}}),
        assistant({"input": 1, "cacheRead": 2, "cost": 0.25, "premiumRequests": True}),
        {"type": "message", "message": {"role": "user", "usage": {"input": 100}}},
    ]
    totals = tree.usage_totals(entries)
    assert totals == {
        "input": 4,
        "output": 4,
        "cacheRead": 2,
        "cacheWrite": 0,
        "premiumRequests": 0,
        "cost": 0.75,
    }
    assert isinstance(totals["input"], int)
    assert tree.is_assistant_message(entries[0])
    assert not tree.is_assistant_message(entries[2])
