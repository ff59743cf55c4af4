"""Pure functions over a session's entries: parents, children, the forest, usage.

Every place that needs the shape of a session (the manager, the mount's ``tree.txt``
and ``stats.json``) asks here, so "what is a root" and "in which order do children
come" are decided once (spec section 6). Nothing here mutates an entry, and every walk
is iterative: a 100,000-deep chain never meets Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from core.paths import iso_to_ms

__all__ = [
    "USAGE_KEYS",
    "TreeNode",
    "add_usage",
    "apply_label",
    "build_tree",
    "children_index",
    "empty_usage",
    "is_assistant_message",
    "last_id",
    "parent_of",
    "usage_totals",
]

Entry = dict[str, Any]
#: ``{"entry": Entry, "children": list[TreeNode], "label": str | None}`` (spec section 6).
TreeNode = dict[str, Any]

#: The token counters of an assistant message's ``usage``; ``cost`` is summed apart
#: (it is either a number or ``{"total": number, ...}``).
USAGE_KEYS: Final = ("input", "output", "cacheRead", "cacheWrite", "premiumRequests")


def is_assistant_message(entry: Mapping[str, Any]) -> bool:
    if entry.get("type") != "message":
        return False
    message = entry.get("message")
    return isinstance(message, dict) and message.get("role") == "assistant"


def last_id(entries: Sequence[Mapping[str, Any]]) -> str | None:
    """The id of the last entry that has one (where the leaf lands after a load)."""
    for entry in reversed(entries):
        entry_id = entry.get("id")
        if isinstance(entry_id, str):
            return entry_id
    return None


def parent_of(entry: Mapping[str, Any]) -> str | None:
    """The parent id, or None for a root by declaration (null or its own id)."""
    parent = entry.get("parentId")
    if isinstance(parent, str) and parent != entry.get("id"):
        return parent
    return None


def apply_label(labels: dict[str, str], entry: Mapping[str, Any]) -> None:
    """Apply a ``label`` entry to ``labels`` (target id -> label): a non-empty string
    sets the target's label, anything else clears it (spec section 6). The one rule for
    every index of labels (the manager's state, the mount's compact sessions)."""
    target = entry.get("targetId")
    if not isinstance(target, str):
        return
    label = entry.get("label")
    if isinstance(label, str) and label:
        labels[target] = label
    else:
        labels.pop(target, None)


def children_index(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Parent id -> its children in insertion order (orphans are listed under their
    missing parent's id, which no lookup of a real entry ever asks for)."""
    children: dict[str, list[Entry]] = {}
    for entry in entries:
        parent = parent_of(entry)
        if parent is not None:
            children.setdefault(parent, []).append(entry)
    return children


# --------------------------------------------------------------------------- usage


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return 0


def empty_usage() -> dict[str, float]:
    # Token counts stay ints (they are counts); only cost is a float.
    totals: dict[str, float] = dict.fromkeys(USAGE_KEYS, 0)
    totals["cost"] = 0.0
    return totals


def _usage_of(entry: Mapping[str, Any]) -> Any:
    """The usage an entry adds: an assistant message's ``usage``, the sub-agent usage a
    ``task`` tool result reports in ``details.usage`` (spec section 13), or an omp 18
    ``model_usage`` entry's side call (a title, a summary: spec section 14)."""
    kind = entry.get("type")
    if kind == "model_usage":
        return entry.get("usage")
    if kind != "message":
        return None
    message = entry.get("message")
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    if role == "assistant":
        return message.get("usage")
    if role == "toolResult" and message.get("toolName") == "task":
        details = message.get("details")
        return details.get("usage") if isinstance(details, dict) else None
    return None


def add_usage(totals: dict[str, float], entry: Mapping[str, Any]) -> None:
    """Add an entry's token counts and cost to `totals` (entries without usage: no-op)."""
    usage = _usage_of(entry)
    if not isinstance(usage, dict):
        return
    for key in USAGE_KEYS:
        totals[key] += _number(usage.get(key))
    cost = usage.get("cost")
    totals["cost"] += _number(cost.get("total")) if isinstance(cost, dict) else _number(cost)


def usage_totals(entries: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    totals = empty_usage()
    for entry in entries:
        add_usage(totals, entry)
    return totals


# --------------------------------------------------------------------------- forest


def _timestamp_sort_key(node: TreeNode) -> float:
    """Parsed time, so ``12:00+02:00`` sorts before ``11:00Z``; unparsable times first."""
    ms = iso_to_ms(node["entry"].get("timestamp"))
    return float(ms) if ms is not None else float("-inf")


def _mark_reachable(start: TreeNode, reached: set[int]) -> None:
    stack = [start]
    while stack:
        current = stack.pop()
        if id(current) in reached:
            continue
        reached.add(id(current))
        stack.extend(current["children"])


def build_tree(entries: Sequence[Entry], labels: Mapping[str, str] | None = None) -> list[TreeNode]:
    """The whole forest as nodes `{entry, children, label}`, children oldest first.

    Roots are entries whose parent is null, themselves, or missing. Entries caught in a
    parent cycle (no root above them) are attached as extra roots, the cycle cut at the
    first of them in file order, so every entry appears exactly once. Children sort by
    parsed timestamp (stable: equal times keep file order).
    """
    labels = labels or {}
    nodes: list[TreeNode] = []
    node_by_id: dict[str, TreeNode] = {}
    for entry in entries:
        entry_id = entry.get("id")
        node: TreeNode = {
            "entry": entry,
            "children": [],
            "label": labels.get(entry_id) if isinstance(entry_id, str) else None,
        }
        nodes.append(node)
        if isinstance(entry_id, str):
            node_by_id[entry_id] = node  # duplicate ids: the last one wins, as in the agents
    roots: list[TreeNode] = []
    parent_node: dict[int, TreeNode] = {}
    for node in nodes:
        parent_id = parent_of(node["entry"])
        parent = node_by_id.get(parent_id) if parent_id is not None else None
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent["children"].append(node)
            parent_node[id(node)] = parent
    reached: set[int] = set()
    for root in roots:
        _mark_reachable(root, reached)
    if len(reached) < len(nodes):
        for node in nodes:
            if id(node) in reached:
                continue
            parent = parent_node.pop(id(node), None)
            if parent is not None:
                parent["children"] = [c for c in parent["children"] if c is not node]
            roots.append(node)
            _mark_reachable(node, reached)
    for node in nodes:
        if len(node["children"]) > 1:
            node["children"].sort(key=_timestamp_sort_key)
    return roots
