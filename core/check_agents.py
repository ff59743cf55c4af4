"""``sessionfs check`` on a file another agent wrote (Claude Code, Codex): recognised,
and checked by that agent's rules instead of the xcsh header rules.

A Claude Code session has no ``session`` header (it may start with a ``custom-title``
or ``queue-operation`` line) and a Codex rollout starts with ``session_meta``: checked
as xcsh files, both would be "no session header", which is false. What is checked
here is what the mount's readers (`core.formats.claude`, `core.formats.codex`) rely on:

* every agent: lines that are not JSON objects and a torn last line (the line checks
  every file gets; never repaired here: the file belongs to the other agent, which
  may be appending to it, and sessionfs only reads it);
* Claude Code: a chain line whose ``parentUuid`` names no line of the file (the tree,
  ``path/`` and ``context.json`` stop there) and a ``last-prompt.leafUuid`` naming no
  line (the mount then picks the newest line as the leaf);
* Codex: a rollout whose first line is no ``session_meta`` (no header: no cwd, no
  project, no id but the file name).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

from core.formats.claude_meta import LINE_TYPES
from core.formats.registry import agent_format

__all__ = ["Found", "agent_findings", "agent_of", "agent_title"]
#: how many leading objects decide whose file it is
_SNIFF: Final = 16
_CODEX_KINDS: Final = frozenset({"session_meta", "response_item", "event_msg", "turn_context"})


def _is_codex(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("type")
    if kind in _CODEX_KINDS and isinstance(obj.get("payload"), dict):
        return True
    # the 2025 format: a first line with the session's id and no envelope
    return "type" not in obj and "payload" not in obj and isinstance(obj.get("instructions"), str)


def _is_claude(obj: Mapping[str, Any]) -> bool:
    if "parentUuid" in obj and isinstance(obj.get("uuid"), str):
        return True
    return isinstance(obj.get("sessionId"), str) and obj.get("type") in LINE_TYPES


def agent_title(agent: str) -> str:
    """How reports name the agent ("Claude Code"): its connector's title."""
    return agent_format(agent).title


def agent_of(objects: Sequence[Mapping[str, Any]]) -> str | None:
    """``"claude"`` or ``"codex"`` (the agent's name in `core.formats.registry`) when
    the file's first objects are that agent's lines; ``None`` for an xcsh/pi/omp file
    (or one nobody can tell)."""
    head = objects[:_SNIFF]
    if not head or head[0].get("type") == "session":
        return None
    if _is_codex(head[0]):
        return "codex"
    if any(_is_claude(obj) for obj in head):
        return "claude"
    return None


#: A finding as `core.check.Finding` takes it: (code, severity, message, line).
Found = tuple[str, Literal["error", "warning"], str, int | None]


def _claude_findings(objects: Sequence[Mapping[str, Any]], lines: Sequence[int]) -> list[Found]:
    uuids = {obj["uuid"] for obj in objects if isinstance(obj.get("uuid"), str)}
    found: list[Found] = []
    leaf: tuple[str, int] | None = None
    for obj, line in zip(objects, lines, strict=True):
        parent = obj.get("parentUuid")
        if isinstance(obj.get("uuid"), str) and isinstance(parent, str) and parent not in uuids:
            found.append(
                (
                    "orphan",
                    "warning",
                    f"parentUuid {parent} names no line of the file; the tree (path/, "
                    "context.json) starts again here",
                    line,
                )
            )
        if obj.get("type") == "last-prompt" and isinstance(obj.get("leafUuid"), str):
            leaf = (obj["leafUuid"], line)
    if leaf is not None and leaf[0] not in uuids:
        found.append(
            (
                "dangling-leaf",
                "warning",
                f"last-prompt leafUuid {leaf[0]} names no line; Claude Code cannot resume "
                "from it, the mount takes the newest line as the leaf",
                leaf[1],
            )
        )
    return found


def _codex_findings(objects: Sequence[Mapping[str, Any]], lines: Sequence[int]) -> list[Found]:
    first = objects[0]
    if first.get("type") == "session_meta" or "type" not in first:  # 2025: no envelope
        return []
    return [
        (
            "meta-missing",
            "warning",
            f"the first line is a {first.get('type')!r} line, not session_meta: the "
            "rollout has no header (no id, cwd or project)",
            lines[0],
        )
    ]


_RULES: Final[dict[str, Callable[[Sequence[Mapping[str, Any]], Sequence[int]], list[Found]]]] = {
    "claude": _claude_findings,
    "codex": _codex_findings,
}


def agent_findings(
    agent: str, objects: Sequence[Mapping[str, Any]], lines: Sequence[int]
) -> list[Found]:
    """What is wrong with ``agent``'s file by that agent's rules (``lines``: the
    1-based line number of each object)."""
    return _RULES[agent](objects, lines)
