"""The in-memory session: header, entries, their indexes and the leaf pointer.

Entries are plain dicts (unknown fields survive) kept in insertion order and indexed
by id; labels, "holds an assistant message" and the lazily built children/usage
caches follow every change. The persistence pipeline and the manager share one
`SessionState`; neither keeps a copy of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.tree import (
    add_usage,
    apply_label,
    children_index,
    is_assistant_message,
    last_id,
    parent_of,
    usage_totals,
)

__all__ = ["BatchMark", "Entry", "SessionState"]

Entry = dict[str, Any]


@dataclass(slots=True)
class BatchMark:
    """What a failed batch restores."""

    entry_count: int
    leaf_id: str | None
    labels: dict[str, str]
    has_assistant: bool


class SessionState:
    """One session's entries and indexes (no I/O)."""

    __slots__ = (
        "by_id",
        "children",
        "cwd",
        "entries",
        "has_assistant",
        "header",
        "labels",
        "leaf_id",
        "title_slot",
        "usage",
    )

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.header: Entry = {}
        self.entries: list[Entry] = []
        self.by_id: dict[str, Entry] = {}
        self.labels: dict[str, str] = {}
        self.leaf_id: str | None = None
        self.has_assistant = False
        #: omp 18's title slot as the file holds it (`core.title_slot`); None: the file
        #: has none (or the session writes none: files for pi 0.73 stay slot-free)
        self.title_slot: dict[str, Any] | None = None
        # Lazily built caches, kept up to date by appends once they exist.
        self.children: dict[str, list[Entry]] | None = None
        self.usage: dict[str, float] | None = None

    def replace(self, entries: list[Entry]) -> None:
        """Make `entries` (no header) the session and index them; leaf = last entry."""
        self.entries = []
        self.by_id = {}
        self.labels = {}
        self.has_assistant = False
        self.children = None
        self.usage = None
        self.index(entries)
        self.entries = entries
        self.leaf_id = last_id(entries)

    def extend(self, entries: list[Entry]) -> None:
        """Add entries another process wrote (or we kept); the leaf does not move."""
        self.entries.extend(entries)
        self.index(entries)

    def index(self, entries: Sequence[Entry]) -> None:
        """Add entries to every index (kept cheap per entry: loads index 10^5 of them)."""
        by_id = self.by_id
        labels = self.labels
        children = self.children
        usage = self.usage
        has_assistant = self.has_assistant
        for entry in entries:
            entry_id = entry.get("id")
            if isinstance(entry_id, str):
                by_id[entry_id] = entry  # duplicate ids: the last one wins, as in the agents
            kind = entry.get("type")
            if kind == "label":
                apply_label(labels, entry)
            elif kind == "message" and not has_assistant:
                has_assistant = is_assistant_message(entry)
            if children is not None:
                parent = parent_of(entry)
                if parent is not None:
                    children.setdefault(parent, []).append(entry)
            if usage is not None:
                add_usage(usage, entry)
        self.has_assistant = has_assistant

    def append(self, entry: Entry) -> None:
        """Add one new entry (id assigned, not yet present) and make it the leaf.

        The hot path of every append: only a label or a built cache needs the full
        `index`; otherwise the id index and the assistant flag are all that change.
        """
        entry_id: str = entry["id"]
        kind = entry["type"]
        self.entries.append(entry)
        if kind == "label" or self.children is not None or self.usage is not None:
            self.index((entry,))
        else:
            self.by_id[entry_id] = entry
            if kind == "message" and not self.has_assistant:
                self.has_assistant = is_assistant_message(entry)
        self.leaf_id = entry_id

    def children_of(self, entry_id: str) -> list[Entry]:
        if self.children is None:
            self.children = children_index(self.entries)
        return list(self.children.get(entry_id, ()))

    def usage_statistics(self) -> dict[str, float]:
        if self.usage is None:
            self.usage = usage_totals(self.entries)
        return dict(self.usage)

    def mark(self) -> BatchMark:
        return BatchMark(len(self.entries), self.leaf_id, dict(self.labels), self.has_assistant)

    def rollback(self, mark: BatchMark) -> None:
        """Forget every entry added since `mark` and restore the leaf and labels."""
        removed = self.entries[mark.entry_count :]
        del self.entries[mark.entry_count :]
        for entry in removed:
            entry_id = entry.get("id")
            if isinstance(entry_id, str) and self.by_id.get(entry_id) is entry:
                del self.by_id[entry_id]
        self.labels = mark.labels
        self.leaf_id = mark.leaf_id
        self.has_assistant = mark.has_assistant
        self.children = None
        self.usage = None
