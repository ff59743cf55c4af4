"""Qwen Code sessions (``~/.qwen/projects/<enc>/chats/<sessionId>.jsonl``) as a
`SessionSource`, read-only.

Qwen Code 0.24 writes one record per line, ``{uuid, parentUuid, sessionId, timestamp,
type, cwd, version, gitBranch, ...}``: ``user`` and ``tool_result`` records carry a
Gemini ``message`` (``{role: "user", parts}``), ``assistant`` records a ``{role:
"model", parts}`` message with ``model`` and ``usageMetadata``, ``system`` records a
``subtype`` and ``systemPayload`` (``ui_telemetry``, ``attribution_snapshot``,
``custom_title``, ``chat_compression`` with the ``compressedHistory`` that replaces the
history before it, ``rewind``, ...). Records of one ``uuid`` are fragments of one
message, their parts joined in file order. How Qwen loads a session back
(``prepareTranscriptRecords`` and ``SessionApiHistoryAccumulator``), which this reads
the same way:

* the leaf is the last record that is conversation (not a ``session_artifact_*``,
  ``session_sources_snapshot`` or ``managed_session_*`` system record);
* the conversation is the ``parentUuid`` chain from the leaf (each uuid's first
  record), so a rewind -- a record whose parent is an earlier one -- is a branch;
* the history sent on resume: each chain record's message in order, a
  ``chat_compression``'s ``compressedHistory`` replacing what came before, a
  ``mid_turn_user_message`` joined to the user message before it, a
  ``realtime_message`` left out.

What the mount shows: ``entries/<uuid>.json`` (a later fragment of a uuid
``<uuid>.<n>``, under the first; a record without a uuid ``meta-<line>-<type>``);
``context.json`` ``{"messages": <contents>, "model"}``; ``transcript.md`` from the
chain; ``header.json`` ``{agent, id, cwd, version, gitBranch, timestamp, file}``;
``title`` the last ``custom_title``; usage every assistant uuid's last
``usageMetadata`` summed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

from core.formats.base import TranscriptMessage
from core.formats.gemini_messages import part_blocks, response_message
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.lines import Line
from core.safe_open import PathArg

__all__ = ["QwenSession"]

#: system records that are not conversation (never a leaf)
_NOT_CONVERSATION: Final = frozenset(
    {
        "session_artifact_event",
        "session_artifact_snapshot",
        "session_sources_snapshot",
        "managed_session_header_v1",
        "managed_session_event_v1",
        "managed_session_commit_v1",
    }
)
_ROLES: Final = {"user": "user", "assistant": "assistant", "tool_result": "toolResult"}
_HEADER_FIELDS: Final = ("sessionId", "cwd", "version", "gitBranch", "timestamp")
#: what a sub-agent's meta file adds to ``header.json``
_META_FIELDS: Final = ("agentId", "agentType", "description", "toolUseId")
_USAGE_FIELDS: Final = (
    ("input", "promptTokenCount"),
    ("output", "candidatesTokenCount"),
    ("cacheRead", "cachedContentTokenCount"),
)


@dataclass(slots=True)
class _QwenLine(LineRecord):
    kind: str
    subtype: str | None
    uuid: str | None
    parent_uuid: str | None
    #: this uuid's first record (None: this is it, or it has no uuid)
    first: int | None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class QwenSession(JsonlSession[_QwenLine]):
    """One Qwen Code ``.jsonl`` session, read-only (module docstring). ``meta``: a
    sub-agent's ``agent-<id>.meta.json`` (its ``agentType``, ``description``,
    ``toolUseId`` go into ``header.json``)."""

    agent = "qwen"
    #: measured 846 bytes a line (`JsonlSession.LINE_INDEX_BYTES`), and some room
    LINE_INDEX_BYTES = 930

    def __init__(self, path: PathArg, meta: dict[str, Any] | None = None) -> None:
        self.meta = meta or {}
        super().__init__(path)

    def _reset_state(self) -> None:
        self._first_of: dict[str, int] = {}
        self._fragments: dict[str, list[int]] = {}
        self._header: dict[str, Any] = {}
        self._title: str | None = None
        self._model: str | None = None
        self._usage: dict[str, dict[str, Any]] = {}
        self._leaf: int | None = None

    def _record(self, line: Line, obj: dict[str, Any]) -> _QwenLine:
        index = len(self._lines)
        kind = _str(obj.get("type")) or "unknown"
        subtype = _str(obj.get("subtype"))
        uuid = _str(obj.get("uuid"))
        first = self._first_of.get(uuid) if uuid is not None else None
        if uuid is None:
            name = f"meta-{line.number}-{kind}"
        elif first is None:
            name = uuid
            self._first_of[uuid] = index
        else:
            name = f"{uuid}.{len(self._fragments[uuid]) + 1}"
        if uuid is not None:
            self._fragments.setdefault(uuid, []).append(index)
        self._note(obj, kind, subtype, index if first is None else first)
        timestamp, time_ms = line_times(obj)
        return _QwenLine(
            name, line.start, line.end, timestamp, time_ms, kind, subtype, uuid,
            _str(obj.get("parentUuid")), first,
        )  # fmt: skip

    def _note(self, obj: dict[str, Any], kind: str, subtype: str | None, first: int) -> None:
        """Keep what the header, title, model, usage and leaf need."""
        for key in _HEADER_FIELDS:
            if key not in self._header and _str(obj.get(key)):
                self._header[key] = obj[key]
        payload = obj.get("systemPayload")
        if subtype == "custom_title" and isinstance(payload, dict):
            self._title = _str(payload.get("customTitle")) or self._title
        if kind == "assistant":
            self._model = _str(obj.get("model")) or self._model
            usage, uuid = obj.get("usageMetadata"), _str(obj.get("uuid"))
            if isinstance(usage, dict) and uuid is not None:
                self._usage[uuid] = usage
        if _str(obj.get("uuid")) and not (kind == "system" and subtype in _NOT_CONVERSATION):
            self._leaf = first

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        found = self._header
        return {
            "agent": "qwen",
            "id": found.get("sessionId", self.path.stem),
            "cwd": found.get("cwd"),
            "version": found.get("version"),
            "gitBranch": found.get("gitBranch"),
            "timestamp": found.get("timestamp"),
            "file": os.fspath(self.path),
        } | {key: self.meta[key] for key in _META_FIELDS if key in self.meta}

    def title(self) -> str:
        return self._title or ""

    def _chain(self) -> list[tuple[int, dict[str, Any]]]:
        """(first record, the uuid's fragments joined) of every record on the path."""
        found = []
        for index in self.path_indexes():
            uuid = self._lines[index].uuid
            fragments = self._fragments.get(uuid, [index]) if uuid is not None else [index]
            found.append((index, _joined([self.entry(i) for i in fragments])))
        return found

    def context(self) -> dict[str, Any]:
        history: list[dict[str, Any]] = []
        for _, record in self._chain():
            if record.get("type") == "system":
                payload = record.get("systemPayload")
                compressed = payload.get("compressedHistory") if isinstance(payload, dict) else None
                if record.get("subtype") == "chat_compression" and isinstance(compressed, list):
                    history = [c for c in compressed if isinstance(c, dict)]
                continue
            message = record.get("message")
            if not isinstance(message, dict) or record.get("subtype") == "realtime_message":
                continue
            parts = list(message.get("parts") or [])
            previous = history[-1] if history else None
            joins = record.get("subtype") == "mid_turn_user_message"
            if joins and previous is not None and previous.get("role") == "user":
                previous["parts"] = [*(previous.get("parts") or []), *parts]
            else:
                history.append({"role": message.get("role"), "parts": parts})
        return {"messages": history, "model": self._model}

    def transcript_messages(self) -> list[TranscriptMessage]:
        found = []
        for index, record in self._chain():
            line = self._lines[index]
            message = record.get("message")
            parts = message.get("parts") if isinstance(message, dict) else None
            if not isinstance(parts, list):
                continue
            role = _ROLES.get(line.kind)
            said = [p for p in parts if not (isinstance(p, dict) and p.get("functionResponse"))]
            blocks = part_blocks(said)
            if blocks and role in ("user", "assistant"):
                found.append(
                    TranscriptMessage(line.name, line.timestamp, {"role": role, "content": blocks})
                )
            for part in parts:
                if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                    found.append(
                        TranscriptMessage(line.name, line.timestamp, response_message(part))
                    )
        return found

    def usage(self) -> dict[str, Any] | None:
        if not self._usage:
            return None
        totals = {}
        for key, field in _USAGE_FIELDS:
            values = [u.get(field) for u in self._usage.values()]
            totals[key] = sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))
        return totals

    def entry_type(self, index: int) -> str:
        line = self._lines[index]
        return f"{line.kind}-{line.subtype}" if line.subtype else line.kind

    def entry_role(self, index: int) -> str | None:
        return _ROLES.get(self._lines[index].kind)

    def entry_text(self, index: int) -> str:
        obj = self.entry_view(index)
        message = obj.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        texts = []
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                for key in ("functionCall", "functionResponse"):
                    if isinstance(part.get(key), dict):
                        texts.append(str(part[key].get("name", "")))
        return " ".join(texts) or (self._lines[index].subtype or "")

    # -- the tree ------------------------------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        line = self._lines[index]
        if line.first is not None:
            return line.first  # a later fragment hangs under the first
        if line.parent_uuid is None:
            return None
        return self._first_of.get(line.parent_uuid)

    def leaf_index(self) -> int | None:
        return self._leaf


def _joined(records: list[dict[str, Any]]) -> dict[str, Any]:
    """A uuid's fragments as one record: the first's fields, every fragment's parts in
    file order, the last ``usageMetadata`` (``aggregateTranscriptRecordFragments``)."""
    base = dict(records[0])
    message = base.get("message")
    if len(records) == 1 or not isinstance(message, dict):
        return base
    parts = list(message.get("parts") or [])
    for record in records[1:]:
        more = record.get("message")
        if isinstance(more, dict):
            parts += list(more.get("parts") or [])
        if isinstance(record.get("usageMetadata"), dict):
            base["usageMetadata"] = record["usageMetadata"]
    base["message"] = {**message, "parts": parts}
    return base
