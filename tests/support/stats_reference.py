"""``stats.json`` of an xcsh session as it is defined over its entries parsed: core's
tree of entries (`core.tree.build_tree`) and path (`core.context.path_to_root`).

The independent reference the product's `XcshReads.stats` (the Forest's arrays and
one pass over the entries) is held to (tests/view/test_xcsh_stats.py); nothing in the
product computes stats this way any more."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from core.context import path_to_root
from core.tree import TreeNode, build_tree

Entry = dict[str, Any]


def tree_depth(roots: Sequence[TreeNode]) -> int:
    """Entries on the longest root -> leaf path of the forest (0 when empty)."""
    deepest = 0
    stack = [(root, 1) for root in roots]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((kid, depth + 1) for kid in node["children"])
    return deepest


def leaf_count(roots: Sequence[TreeNode]) -> int:
    """Nodes of the forest without children (the tips of its branches)."""
    count = 0
    stack = list(roots)
    while stack:
        node = stack.pop()
        kids = node["children"]
        if kids:
            stack.extend(kids)
        else:
            count += 1
    return count


def session_stats(
    entries: Sequence[Entry],
    leaf_id: str | None,
    by_id: Mapping[str, Entry],
    usage: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """An xcsh session's ``stats.json`` object from its entries parsed."""
    by_type = Counter(str(e.get("type", "?")) for e in entries)
    by_role = Counter(
        str(e["message"].get("role", "?"))
        for e in entries
        if e.get("type") == "message" and isinstance(e.get("message"), dict)
    )
    roots = build_tree(entries)
    return {
        "entries": len(entries),
        "byType": dict(sorted(by_type.items())),
        "byRole": dict(sorted(by_role.items())),
        "leafCount": leaf_count(roots),
        "roots": len(roots),
        "depth": tree_depth(roots),
        "leafId": leaf_id,
        "pathLength": len(path_to_root(leaf_id, by_id)),
        "usage": dict(usage) if usage is not None else None,
    }
