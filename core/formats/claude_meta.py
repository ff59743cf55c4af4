"""What a Claude Code session's metadata lines (no ``uuid``) tell the mount, and what
the mount does with every line type Claude Code is known to write.

Claude Code rewrites several metadata lines on every run (``custom-title``,
``last-prompt``, ``cost-state``, ...): the latest line of a kind wins. `SessionMeta`
keeps, from those lines, only what the renderings need: the title candidates, the
agent's own leaf (``last-prompt.leafUuid``) and the session's cost and token totals
(``cost-state``).

`LINE_TYPES` is the reader's map of line types, checked against what the pinned real
Claude Code writes (``tests/interop/test_claude_real_sessions.py``): a type that is
not in it and carries words of the conversation fails that test, so a newer Claude
Code cannot lose words from ``context.json`` without a test saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["LINE_TYPES", "TITLE_FIELDS", "CostState", "SessionMeta"]

#: every line type Claude Code 2.1 writes -> what the mount does with it (every line
#: is also an entry in ``entries/``; these say where else it shows)
LINE_TYPES: Final[Mapping[str, str]] = {
    "user": "context and transcript: prompts, tool results, isMeta lines, compact summaries",
    "assistant": "context and transcript: one line per content block, merged by message.id",
    "system": "tree only; compact_boundary starts the context (with its preserved segment)",
    "attachment": "harness context (rendered as system-reminders): entries and tree only",
    "summary": "title (after custom-title and ai-title)",
    "custom-title": "title",
    "ai-title": "title (after custom-title)",
    "agent-name": "entries only (the same name as custom-title)",
    "last-prompt": "leaf (leafUuid); title when nothing else names the session",
    "cost-state": "stats.json usage and cost",
    "queue-operation": "entries only (the prompt again, as queued)",
    "api-request-shape": "entries only (a record of a request's shape)",
    "api-request-blob": "entries only (a copy of a request's messages)",
    "api-request": "entries only (a record of a request)",
    "atis-latch": "entries only",
    "mode": "entries only",
    "tools-used": "entries only",
    "tag": "entries only",
    "file-history-snapshot": "entries only",
}

#: title source line type -> its field, in order of preference
TITLE_FIELDS: Final = (
    ("custom-title", "customTitle"),
    ("ai-title", "aiTitle"),
    ("summary", "summary"),
    ("last-prompt", "lastPrompt"),
)

#: ``stats.json`` usage key <- ``cost-state.modelUsage.<model>`` key
_COST_USAGE_FIELDS: Final = (
    ("input", "inputTokens"),
    ("output", "outputTokens"),
    ("cacheRead", "cacheReadInputTokens"),
    ("cacheWrite", "cacheCreationInputTokens"),
)


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return 0


@dataclass(frozen=True, slots=True)
class CostState:
    """A ``cost-state`` line: the session's totals as Claude Code counts them (every
    request, compaction and sub-agent calls included, which write no assistant line)."""

    usage: Mapping[str, float]

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> CostState | None:
        models = obj.get("modelUsage")
        if not isinstance(models, dict):
            return None
        totals: dict[str, float] = dict.fromkeys((key for key, _ in _COST_USAGE_FIELDS), 0)
        for counts in models.values():
            if isinstance(counts, dict):
                for key, field_name in _COST_USAGE_FIELDS:
                    totals[key] += int(_number(counts.get(field_name)))
        totals["cost"] = float(_number(obj.get("totalCostUSD")))
        return cls(totals)


@dataclass
class SessionMeta:
    """The latest value of each metadata line kind the renderings use."""

    #: title line type -> its latest value
    titles: dict[str, str] = field(default_factory=dict)
    #: the latest ``last-prompt.leafUuid``: the entry the agent resumes from
    leaf_uuid: str | None = None
    cost: CostState | None = None

    def note(self, kind: str, obj: Mapping[str, Any]) -> None:
        """Take what a metadata line of type ``kind`` says."""
        for title_kind, key in TITLE_FIELDS:
            if kind == title_kind and isinstance(value := obj.get(key), str) and value:
                self.titles[kind] = value
        if kind == "last-prompt" and isinstance(leaf := obj.get("leafUuid"), str) and leaf:
            self.leaf_uuid = leaf
        if kind == "cost-state" and (cost := CostState.parse(obj)) is not None:
            self.cost = cost

    def title(self) -> str:
        for kind, _ in TITLE_FIELDS:
            if kind in self.titles:
                return self.titles[kind]
        return ""
