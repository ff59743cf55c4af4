"""Claude Code sessions (``~/.claude/projects/<enc>/<sessionId>.jsonl``) as a
`SessionSource`, read-only.

The file is a JSON object per line. *Chain lines* carry ``uuid`` and ``parentUuid``
and form a tree; *metadata lines* (no ``uuid``: ``custom-title``, ``last-prompt``,
``cost-state``, ``summary``, ...) are named ``meta-<line number>-<type>`` and a later one
of a kind overrides an earlier one (`core.formats.claude_meta`, which also lists what
the mount does with every line type). What the mount shows, point by point:

* entries: every chain line in file order, a ``uuid`` seen again (a resumed session
  replaying its prefix) shown once, the first; lines that are not JSON objects are
  skipped and counted;
* tree: ``parentUuid``, and across a ``compact_boundary`` (a new root) its
  ``logicalParentUuid``, so ``path/`` and ``tree.txt`` show the whole history;
* leaf: a chain line chosen through the mount (`JsonlSession.choose_leaf`), else the
  entry the agent resumes from, the latest ``last-prompt.leafUuid`` when it
  names a line of the file; else each chain line no other line names as parent,
  walked up to its nearest ``user``/``assistant`` line, the latest ``timestamp`` that
  is not ``isSidechain`` winning, ties to the later line (a sub-agent file, all
  sidechain, uses all lines);
* context and transcript: `core.formats.claude_turns`;
* title: ``custom-title``, else ``ai-title``, else ``summary``, else the last prompt;
* usage: the latest ``cost-state`` (its token totals over every model, and
  ``cost``: ``totalCostUSD``); a file without one: once per ``message.id``, the last
  line's ``usage`` of that id.

Per line only a small record is held (`_ClaudeLine`); content is parsed from the
line's bytes when a rendering asks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from core.formats.base import TranscriptMessage
from core.formats.claude_blocks import first_text
from core.formats.claude_meta import SessionMeta
from core.formats.claude_turns import Turns
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.lines import Line
from core.safe_open import PathArg

__all__ = ["USAGE_FIELDS", "ClaudeSession"]

#: ``stats.json`` usage key <- Claude's ``message.usage`` key
USAGE_FIELDS: Final = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cacheRead", "cache_read_input_tokens"),
    ("cacheWrite", "cache_creation_input_tokens"),
)
#: ``header.json`` keys taken from the first line that has them
_HEADER_FIELDS: Final = ("cwd", "version", "gitBranch", "timestamp")
#: a sub-agent's ``agent-<id>.meta.json`` keys shown in its ``header.json``
META_FIELDS: Final = ("agentType", "description", "toolUseId")
_MESSAGE_TYPES: Final = frozenset({"user", "assistant"})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _usage(message: Mapping[str, Any]) -> tuple[int, ...] | None:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    out = []
    for _, key in USAGE_FIELDS:
        value = usage.get(key)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        out.append(int(value) if number and value is not None else 0)
    return tuple(out)


@dataclass(slots=True)
class _ClaudeLine(LineRecord):
    """What the index keeps of one shown line."""

    kind: str
    #: ``None``: a metadata line
    uuid: str | None
    #: the tree parent's uuid: ``parentUuid``, or a compact boundary's logical parent
    parent: str | None
    sidechain: bool
    role: str | None
    message_id: str | None
    usage: tuple[int, ...] | None


def _record(line: Line, obj: dict[str, Any], name: str, uuid: str | None) -> _ClaudeLine:
    kind = _str(obj.get("type")) or "unknown"
    parent = _str(obj.get("parentUuid")) if uuid is not None else None
    if parent is None and uuid is not None and obj.get("subtype") == "compact_boundary":
        parent = _str(obj.get("logicalParentUuid"))
    if parent == uuid:
        parent = None
    message = obj.get("message")
    role = message_id = usage = None
    if kind in _MESSAGE_TYPES and isinstance(message, dict):
        role = _str(message.get("role")) or kind
        message_id = _str(message.get("id"))
        usage = _usage(message) if kind == "assistant" else None
    timestamp, time_ms = line_times(obj)
    return _ClaudeLine(
        name=name,
        start=line.start,
        end=line.end,
        timestamp=timestamp,
        time_ms=time_ms,
        kind=kind,
        uuid=uuid,
        parent=parent,
        sidechain=obj.get("isSidechain") is True,
        role=role,
        message_id=message_id,
        usage=usage,
    )


def _same_response(line: _ClaudeLine, before: _ClaudeLine) -> bool:
    return line.message_id is not None and line.message_id == before.message_id


class ClaudeSession(JsonlSession[_ClaudeLine]):
    """One Claude Code session file (or sub-agent file) read-only. ``meta``: a
    sub-agent's ``meta.json`` object, shown in its header."""

    agent = "claude"
    #: measured 486 bytes a line (`JsonlSession.LINE_INDEX_BYTES`), and some room
    LINE_INDEX_BYTES = 540

    def __init__(self, path: PathArg, meta: Mapping[str, Any] | None = None) -> None:
        self._meta = dict(meta) if meta is not None else {}
        super().__init__(path)

    def _reset_state(self) -> None:
        self._first: dict[str, str] = {}
        self._meta_lines = SessionMeta()

    def _changed(self) -> None:
        super()._changed()
        self._leaf: tuple[int | None] | None = None

    def _record(self, line: Line, obj: dict[str, Any]) -> _ClaudeLine | None:
        uuid = _str(obj.get("uuid"))
        if uuid is not None and uuid in self._index_of:
            return None  # a replayed prefix: shown once, the first
        for key in ("sessionId", *_HEADER_FIELDS):
            if key not in self._first and isinstance(value := obj.get(key), str):
                self._first[key] = value
        kind = _str(obj.get("type")) or "unknown"
        if uuid is None:
            self._meta_lines.note(kind, obj)
            return self._compact(_record(line, obj, f"meta-{line.number}-{kind}", None))
        return self._compact(_record(line, obj, uuid, uuid))

    def _compact(self, record: _ClaudeLine) -> _ClaudeLine:
        """``record`` holding one object for what other records hold too: its type and
        role, its parent's uuid (the parent's own name), and its response's id and
        usage when the line before was of the same response (a line per block). A
        parsed line's strings are new objects each, and a big file's records are most
        of what reading it holds (issue 26 point 6)."""
        record.kind = self._shared(record.kind)
        if record.role is not None:
            record.role = self._shared(record.role)
        if record.parent is not None and (at := self._index_of.get(record.parent)) is not None:
            record.parent = self._lines[at].name
        before = self._lines[-1] if self._lines else None
        if before is not None and _same_response(record, before):
            record.message_id = before.message_id
            if record.usage == before.usage:
                record.usage = before.usage
        return record

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        header: dict[str, Any] = {
            "agent": "claude",
            "id": self._first.get("sessionId", self.path.stem),
        }
        for key in _HEADER_FIELDS:
            header[key] = self._first.get(key)
        header["file"] = os.fspath(self.path)
        for key in META_FIELDS:
            if key in self._meta:
                header[key] = self._meta[key]
        return header

    def title(self) -> str:
        return self._meta_lines.title()

    def context(self) -> dict[str, Any]:
        # Built per call, not kept: the turns hold every message's content (several
        # times the file's size), and the view renders each file once per version.
        turns = Turns(self)
        return {"messages": list(turns.context_messages()), "model": turns.model()}

    def transcript_messages(self) -> list[TranscriptMessage]:
        return list(Turns(self).transcript_messages())

    def transcript_messages_at(self, leaf: int | None) -> list[TranscriptMessage]:
        return list(Turns(self, self.forest().path_to(leaf)).transcript_messages())

    def usage(self) -> dict[str, Any]:
        if self._meta_lines.cost is not None:
            return dict(self._meta_lines.cost.usage)
        last: dict[str, tuple[int, ...]] = {}
        loose: list[tuple[int, ...]] = []
        for line in self._lines:
            if line.usage is None:
                continue
            if line.message_id is None:
                loose.append(line.usage)
            else:
                last[line.message_id] = line.usage  # the last line of an id wins
        totals = [0] * len(USAGE_FIELDS)
        for usage in [*last.values(), *loose]:
            for position, value in enumerate(usage):
                totals[position] += value
        return {key: totals[i] for i, (key, _) in enumerate(USAGE_FIELDS)}

    def entry_type(self, index: int) -> str:
        return self._lines[index].kind

    def entry_role(self, index: int) -> str | None:
        return self._lines[index].role

    def entry_text(self, index: int) -> str:
        entry = self.entry(index)
        message = entry.get("message")
        if isinstance(message, dict):
            return first_text(message.get("content"))
        for key in ("customTitle", "aiTitle", "summary", "content", "subtype", "lastPrompt"):
            value = entry.get(key)
            if isinstance(value, str) and value:
                return value
        attachment = entry.get("attachment")
        if isinstance(attachment, dict) and isinstance(attachment.get("type"), str):
            return str(attachment["type"])
        return ""

    # -- what the readers of turns ask ----------------------------------------------------

    def is_chain(self, index: int) -> bool:
        return self._lines[index].uuid is not None

    def is_sidechain(self, index: int) -> bool:
        return self._lines[index].sidechain

    def message_id(self, index: int) -> str | None:
        return self._lines[index].message_id

    def is_compact_boundary(self, index: int) -> bool:
        line = self._lines[index]
        if line.kind != "system" or line.uuid is None:
            return False
        return self.entry(index).get("subtype") == "compact_boundary"

    def preserved_segment(self, boundary: int) -> tuple[int | None, list[int]]:
        """A compact boundary's preserved segment: the lines its compaction kept
        (``compactMetadata.preservedSegment``: ``headUuid`` .. ``tailUuid`` up the
        chain, before the boundary in the file) in path order, and the line they
        follow in what the model is sent (``anchorUuid``: the summary). No segment,
        or one whose chain does not lead from tail to head: ``(None, [])``."""
        metadata = self.entry(boundary).get("compactMetadata")
        segment = metadata.get("preservedSegment") if isinstance(metadata, dict) else None
        if not isinstance(segment, dict):
            return None, []
        head, tail = (self._index_of.get(str(segment.get(k))) for k in ("headUuid", "tailUuid"))
        anchor = self._index_of.get(str(segment.get("anchorUuid")))
        kept: list[int] = []
        current = tail
        while current is not None and len(kept) < len(self._lines):  # longer: a cycle
            kept.append(current)
            if current == head:
                return anchor, kept[::-1]
            current = self.parent_index(current)
        return None, []

    # -- the tree ------------------------------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        parent = self._lines[index].parent
        return self._index_of.get(parent) if parent is not None else None

    def can_be_leaf(self, index: int) -> bool:
        """Claude Code resumes at a chain line (``--resume-session-at <uuid>``), not at
        a metadata line."""
        return self._lines[index].uuid is not None

    def own_leaf_index(self) -> int | None:
        if self._leaf is None:
            self._leaf = (self._find_leaf(),)
        return self._leaf[0]

    def _find_leaf(self) -> int | None:
        agents_leaf = self._meta_lines.leaf_uuid
        if agents_leaf is not None and agents_leaf in self._index_of:
            return self._index_of[agents_leaf]
        named: set[str] = {line.parent for line in self._lines if line.parent is not None}
        best: tuple[float, int] | None = None
        best_side: tuple[float, int] | None = None
        for index, line in enumerate(self._lines):
            if line.uuid is None or line.uuid in named:
                continue
            found = self._nearest_message(index)
            if found is None:
                continue
            ms = self._lines[found].time_ms
            key = (float("-inf") if ms is None else float(ms), found)
            if self._lines[found].sidechain:
                best_side = key if best_side is None or key > best_side else best_side
            else:
                best = key if best is None or key > best else best
        chosen = best if best is not None else best_side  # a sub-agent file: all sidechain
        return chosen[1] if chosen is not None else None

    def _nearest_message(self, index: int) -> int | None:
        """``index`` or its nearest ancestor that is a user/assistant line."""
        seen: set[int] = set()
        current: int | None = index
        while current is not None and current not in seen:
            if self._lines[current].kind in _MESSAGE_TYPES:
                return current
            seen.add(current)
            current = self.parent_index(current)
        return None
