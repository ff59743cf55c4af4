"""Cursor's agent CLI sessions as `SessionSource`s, read-only -- written from the format
maintained session readers document (the CLI cannot run offline here:
``docs/agents.md``).

* `CursorChatSession`: ``~/.cursor/chats/<md5(cwd)>/<id>/store.db``, SQLite (WAL),
  tables ``meta`` (key ``"0"``: hex-encoded JSON ``{agentId, latestRootBlobId, name,
  mode, createdAt, lastUsedModel}``) and ``blobs`` (``id`` = SHA-256 of ``data``). The
  root blob is protobuf: each field 1 is a message blob's 32-byte id, in conversation
  order (field 9: the workspace URI); a message blob is JSON ``{role, content, id?}``
  with content a string or parts (``text``, ``reasoning``, ``tool-call {toolCallId,
  toolName, args}``, ``tool-result {toolCallId, toolName, result}``). ``meta.json``
  beside it (newer versions: ``{title, cwd, createdAtMs, updatedAtMs, …}``) names the
  cwd.
* `CursorTranscriptSession`: ``~/.cursor/projects/<path with dashes>/agent-transcripts/
  <id>.jsonl``, a line per message ``{role, message: {content: [parts]}}``.

Entries are the messages in order, named ``NNNNNN-<role>`` (its position, 1-based);
the session is linear. ``context.json`` is the messages in the chat-completions shape
(`core.formats.chat_messages`), ``transcript.md`` the same turns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from core.formats.base import SessionSource, TranscriptMessage
from core.formats.chat_messages import (
    chat_assistant,
    chat_tool_call,
    chat_tool_result,
    text_of,
    tool_call_block,
    tool_result_message,
)
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.linear import Linear
from core.formats.lines import Line
from core.formats.sqlite_store import StoreUnreadable, read_only
from core.jsonl import loads
from core.paths import ms_to_iso
from core.safe_open import PathArg, open_regular

__all__ = ["CursorChatSession", "CursorTranscriptSession", "read_chat_meta", "read_sidecar"]

_ENTRY_BYTES: Final = 400
_SIDECAR_LIMIT: Final = 256 * 1024
_META_SQL: Final = "SELECT value FROM meta WHERE key = '0'"
_BLOB_SQL: Final = "SELECT data FROM blobs WHERE id = ?"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def read_sidecar(path: PathArg) -> dict[str, Any]:
    """``meta.json`` beside a ``store.db`` (``{}``: none or not JSON)."""
    try:
        with open_regular(path) as f:
            value = loads(f.read(_SIDECAR_LIMIT))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _decode_meta(value: Any) -> dict[str, Any]:
    """``meta`` key ``"0"``: hex-encoded JSON (plain JSON accepted too)."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str):
        return {}
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = value.encode()
    try:
        found = loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def read_chat_meta(store: PathArg) -> dict[str, Any]:
    """The chat's metadata; `StoreUnreadable` when the store cannot be read."""
    with read_only(store) as conn:
        row = conn.execute(_META_SQL).fetchone()
    return _decode_meta(row[0]) if row else {}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while at < len(data):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            break
    raise ValueError("truncated varint")


def root_fields(data: bytes) -> tuple[list[str], str | None]:
    """The root blob's message ids (field 1, hex) and workspace (field 9); fields of
    other wire types are skipped; `ValueError` when it is not protobuf."""
    ids: list[str] = []
    workspace: str | None = None
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            value = data[at : at + size]
            if len(value) < size:
                raise ValueError("truncated field")
            at += size
            if field == 1 and size == 32:
                ids.append(value.hex())
            elif field == 9:
                workspace = value.decode("utf-8", "replace")
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            raise ValueError(f"wire type {wire}")
    return ids, workspace


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def _chat_messages(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One stored message as chat-completions messages (a tool message's results each
    become one)."""
    role = message.get("role")
    parts = _parts(message.get("content"))
    text = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    if role == "assistant":
        calls = [
            chat_tool_call(p.get("toolCallId"), p.get("toolName"), p.get("args", p.get("input")))
            for p in parts
            if p.get("type") in ("tool-call", "tool_use")
        ]
        return [chat_assistant(text, calls)]
    if role == "tool":
        return [
            chat_tool_result(p.get("toolCallId"), _result(p))
            for p in parts
            if p.get("type") == "tool-result"
        ]
    return [{"role": str(role), "content": text}]


def _result(part: dict[str, Any]) -> str:
    result = part.get("result", part.get("output", part.get("content")))
    if isinstance(result, str):
        return result
    return text_of(result) or (orjson.dumps(result).decode() if result is not None else "")


def _transcript(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One stored message in the xcsh shape ``transcript.md`` renders."""
    role = message.get("role")
    parts = _parts(message.get("content"))
    if role == "tool":
        return [
            tool_result_message(
                p.get("toolCallId"), p.get("toolName"), _result(p), p.get("isError") is True
            )
            for p in parts
            if p.get("type") == "tool-result"
        ]
    blocks: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind in ("reasoning", "thinking"):
            blocks.append({"type": "thinking", "thinking": str(part.get("text", ""))})
        elif kind in ("tool-call", "tool_use"):
            blocks.append(
                tool_call_block(
                    part.get("toolCallId"),
                    part.get("toolName"),
                    part.get("args", part.get("input")),
                )
            )
    return [{"role": str(role), "content": blocks}] if blocks else []


class _Messages:
    """What both Cursor readers derive from their messages (in order)."""

    def _messages(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(entry name, time, message) of every message."""
        raise NotImplementedError

    def context(self) -> dict[str, Any]:
        out: list[dict[str, Any]] = []
        for _, _, message in self._messages():
            out.extend(_chat_messages(message))
        return {"messages": out, "model": self._model()}

    def _model(self) -> str | None:
        return None

    def transcript_messages(self) -> list[TranscriptMessage]:
        return [
            TranscriptMessage(name, time, shown)
            for name, time, message in self._messages()
            for shown in _transcript(message)
        ]


@dataclass(slots=True)
class _Blob:
    name: str
    data: bytes
    message: dict[str, Any]


class CursorChatSession(Linear, _Messages, SessionSource):
    """One ``store.db`` read-only (module docstring)."""

    agent = "cursor"

    def __init__(self, store: PathArg) -> None:
        super().__init__()
        self.path = Path(store)
        self.sidecar = read_sidecar(self.path.with_name("meta.json"))
        self._load()

    def _load(self) -> None:
        blobs: list[_Blob] = []
        malformed = 0
        with read_only(self.path) as conn:
            conn.execute("BEGIN")
            row = conn.execute(_META_SQL).fetchone()
            meta = _decode_meta(row[0]) if row else {}
            root_id = _str(meta.get("latestRootBlobId"))
            ids: list[str] = []
            workspace = None
            if root_id is not None:
                root = conn.execute(_BLOB_SQL, (root_id,)).fetchone()
                try:
                    ids, workspace = root_fields(bytes(root[0]) if root else b"")
                except (ValueError, TypeError) as exc:
                    raise StoreUnreadable(f"{self.path}: root blob {root_id}: {exc}") from None
            for position, blob_id in enumerate(ids, 1):
                found = conn.execute(_BLOB_SQL, (blob_id,)).fetchone()
                data = bytes(found[0]) if found and found[0] is not None else b""
                try:
                    message = loads(data)
                except ValueError:
                    message = None
                if not isinstance(message, dict):
                    malformed += 1
                    continue
                role = message.get("role")
                blobs.append(
                    _Blob(
                        f"{position:06d}-{role if isinstance(role, str) else 'message'}",
                        data,
                        message,
                    )
                )
            conn.execute("COMMIT")
        self.meta, self.root_id, self.workspace = meta, root_id, workspace
        self._blobs = blobs
        self._malformed = malformed
        self._index_of = {b.name: i for i, b in enumerate(blobs)}
        self._changed()

    def catch_up(self) -> bool:
        if _str(read_chat_meta(self.path).get("latestRootBlobId")) == self.root_id:
            return False
        self._load()
        self.reread = True
        return True

    def memory_cost(self) -> int:
        return sum(len(b.data) + _ENTRY_BYTES for b in self._blobs)

    @property
    def malformed_lines(self) -> int:
        return self._malformed

    def header(self) -> dict[str, Any]:
        created = self.meta.get("createdAt")
        return {
            "agent": "cursor",
            "id": _str(self.meta.get("agentId")) or self.path.parent.name,
            "cwd": self.sidecar.get("cwd"),
            "workspace": self.workspace,
            "mode": self.meta.get("mode"),
            "lastUsedModel": self.meta.get("lastUsedModel"),
            "timestamp": ms_to_iso(created) if isinstance(created, int) else None,
            "file": os.fspath(self.path),
        }

    def title(self) -> str:
        return _str(self.sidecar.get("title")) or _str(self.meta.get("name")) or ""

    def _model(self) -> str | None:
        return _str(self.meta.get("lastUsedModel"))

    def _messages(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [(b.name, "", b.message) for b in self._blobs]

    def usage(self) -> dict[str, Any] | None:
        return None  # the store keeps no per-turn usage

    def __len__(self) -> int:
        return len(self._blobs)

    def entry_name(self, index: int) -> str:
        return self._blobs[index].name

    def raw_line(self, index: int) -> bytes:
        return self._blobs[index].data

    def entry(self, index: int) -> dict[str, Any]:
        return dict(loads(self._blobs[index].data))

    def entry_time_ms(self, index: int) -> int | None:
        return None  # messages carry no time

    def index_of(self, name: str) -> int | None:
        return self._index_of.get(name)

    def entry_type(self, index: int) -> str:
        return "message"

    def entry_role(self, index: int) -> str | None:
        role = self._blobs[index].message.get("role")
        return role if isinstance(role, str) else None

    def entry_text(self, index: int) -> str:
        return text_of(_parts(self._blobs[index].message.get("content")))


@dataclass(slots=True)
class _TranscriptLine(LineRecord):
    role: str | None


class CursorTranscriptSession(Linear, _Messages, JsonlSession[_TranscriptLine]):
    """One ``agent-transcripts/<id>.jsonl`` read-only (module docstring)."""

    agent = "cursor"
    #: measured 336 bytes a line (`JsonlSession.LINE_INDEX_BYTES`), and some room
    LINE_INDEX_BYTES = 370

    def _reset_state(self) -> None:
        pass

    def _record(self, line: Line, obj: dict[str, Any]) -> _TranscriptLine:
        role = _str(obj.get("role"))
        timestamp, time_ms = line_times(obj)
        return _TranscriptLine(
            name=f"{line.number:06d}-{role or 'line'}",
            start=line.start,
            end=line.end,
            timestamp=timestamp,
            time_ms=time_ms,
            role=role,
        )

    def _message(self, index: int) -> dict[str, Any]:
        obj = self.entry(index)
        inner = obj.get("message")
        content = inner.get("content") if isinstance(inner, dict) else obj.get("content")
        return {"role": self._lines[index].role or "user", "content": content}

    def _messages(self) -> list[tuple[str, str, dict[str, Any]]]:
        return [
            (line.name, line.timestamp, self._message(i))
            for i, line in enumerate(self._lines)
            if line.role is not None
        ]

    def header(self) -> dict[str, Any]:
        return {"agent": "cursor", "id": self.path.stem, "cwd": None, "file": os.fspath(self.path)}

    def title(self) -> str:
        return ""

    def usage(self) -> dict[str, Any] | None:
        return None

    def entry_type(self, index: int) -> str:
        return "message" if self._lines[index].role else "line"

    def entry_role(self, index: int) -> str | None:
        return self._lines[index].role

    def entry_text(self, index: int) -> str:
        return text_of(_parts(self._message(index).get("content")))
