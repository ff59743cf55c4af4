"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``,
``archived_sessions/``, ``*.jsonl.zst``) as a `SessionSource`, read-only.

Every line is ``{"timestamp", "type": <kind>, "payload": {...}}``; the 2025 format has
no envelope (a first line ``{id, timestamp, instructions}``, then bare response items
and ``{"record_type": "state"}`` lines) and is read the same way: its first line is
the ``session_meta``, a bare item a ``response_item``, a record a line of that kind.

A session is linear: entry ``i`` is the ``i``-th JSON object line, named
``NNNNNN-<kind>[-<payload type>]`` (``NNNNNN``: its line number); its parent is the
entry before; the leaf is the last entry. What the mount shows besides:

* ``context.json``: ``{"messages", "model"}`` -- the response items in their own shape,
  a ``compacted`` line's ``replacement_history`` replacing what came before, a
  ``thread_rolled_back {num_turns}`` dropping the last N user turns (injected context
  is no turn), ``model`` the latest ``turn_context``'s;
* ``transcript.md``: the response items only (``event_msg`` repeats the same text),
  calls and their outputs paired by ``call_id`` (`core.formats.codex_items`);
* ``header.json``: the first ``session_meta`` (a fork copies its parent's after it);
* ``title``: the newest ``thread_name_updated``, else the session index's name;
* ``stats.json`` usage: the last ``token_count``'s ``total_token_usage``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from core.formats.base import TranscriptMessage
from core.formats.codex_items import (
    agent_message,
    call_id_of,
    is_injected,
    item_text,
    output_message,
)
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.lines import Line
from core.safe_open import PathArg

__all__ = ["ARCHIVE_DIR", "CodexSession", "split_line"]

ARCHIVE_DIR: Final = "archived_sessions"
#: ``stats.json`` usage key <- ``total_token_usage`` key
_USAGE_FIELDS: Final = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cacheRead", "cached_input_tokens"),
)
#: what the context and transcript read; other kinds are only shown
_HISTORY_KINDS: Final = frozenset({"response_item", "compacted", "event_msg"})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def split_line(obj: Mapping[str, Any], envelope_less: bool) -> tuple[str, dict[str, Any]]:
    """A line's ``(kind, payload)``. ``envelope_less``: the file is in the 2025 format
    (the first line decides), where a bare item is a ``response_item``."""
    payload = obj.get("payload")
    kind = _str(obj.get("type"))
    if isinstance(payload, dict) and kind is not None:
        return kind, payload
    record = _str(obj.get("record_type"))
    if record is not None:
        return record, dict(obj)
    if envelope_less and kind is not None:
        return "response_item", dict(obj)
    return kind or "unknown", payload if isinstance(payload, dict) else {}


def _is_envelope_less_meta(obj: Mapping[str, Any]) -> bool:
    return "payload" not in obj and "type" not in obj and isinstance(obj.get("id"), str)


@dataclass(slots=True)
class _CodexLine(LineRecord):
    kind: str
    payload_type: str | None
    role: str | None


class CodexSession(JsonlSession[_CodexLine]):
    """One Codex rollout file read-only. ``index_title``: the name
    ``session_index.jsonl`` gives the session (the title when the file names none);
    ``archived``: shown in the header (default: the file is under
    ``archived_sessions/``)."""

    agent = "codex"

    def __init__(
        self, path: PathArg, index_title: str | None = None, archived: bool | None = None
    ) -> None:
        self.index_title = index_title
        self.archived = ARCHIVE_DIR in Path(path).parts if archived is None else archived
        super().__init__(path)

    def _reset_state(self) -> None:
        self._envelope_less: bool | None = None
        self._meta: dict[str, Any] | None = None
        self._meta_timestamp: str | None = None
        self._thread_name: str | None = None
        self._model: str | None = None
        self._usage: dict[str, Any] | None = None

    def _record(self, line: Line, obj: dict[str, Any]) -> _CodexLine:
        if self._envelope_less is None:
            self._envelope_less = _is_envelope_less_meta(obj)
            kind, payload = (
                ("session_meta", dict(obj)) if self._envelope_less else split_line(obj, False)
            )
        else:
            kind, payload = split_line(obj, self._envelope_less)
        payload_type = _str(payload.get("type")) if kind != "session_meta" else None
        self._note(kind, payload_type, payload, obj)
        timestamp, time_ms = line_times(obj)
        role = _str(payload.get("role")) if kind == "response_item" else None
        return _CodexLine(
            name=f"{line.number:06d}-{kind}" + (f"-{payload_type}" if payload_type else ""),
            start=line.start,
            end=line.end,
            timestamp=timestamp,
            time_ms=time_ms,
            kind=kind,
            payload_type=payload_type,
            role=role if payload_type == "message" else None,
        )

    def _note(
        self, kind: str, payload_type: str | None, payload: dict[str, Any], obj: dict[str, Any]
    ) -> None:
        """Keep what the header, title, model and usage need."""
        if kind == "session_meta" and self._meta is None:
            self._meta = payload
            stamp = obj.get("timestamp")
            self._meta_timestamp = stamp if isinstance(stamp, str) else None
        elif kind == "turn_context":
            self._model = _str(payload.get("model")) or self._model
        elif kind == "event_msg" and payload_type == "thread_name_updated":
            self._thread_name = _str(payload.get("thread_name")) or self._thread_name
        elif kind == "event_msg" and payload_type == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(total, dict):
                self._usage = total

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        meta = self._meta or {}
        timestamp = meta.get("timestamp")
        return {
            "agent": "codex",
            "id": meta.get("id") if isinstance(meta.get("id"), str) else self.path.stem,
            "cwd": meta.get("cwd"),
            "cli_version": meta.get("cli_version"),
            "model_provider": meta.get("model_provider"),
            "git": meta.get("git"),
            "forked_from_id": meta.get("forked_from_id"),
            "archived": self.archived,
            "timestamp": timestamp if isinstance(timestamp, str) else self._meta_timestamp,
            "file": os.fspath(self.path),
        }

    def session_meta(self) -> dict[str, Any]:
        """The first ``session_meta`` payload as stored (``{}``: none)."""
        return dict(self._meta or {})

    def title(self) -> str:
        return self._thread_name or self.index_title or ""

    def _payloads(self) -> list[tuple[int, str, dict[str, Any]]]:
        """(index, kind, payload) of every line the context or transcript reads."""
        found = []
        for index, line in enumerate(self._lines):
            if line.kind in _HISTORY_KINDS:
                kind, payload = split_line(self.entry(index), bool(self._envelope_less))
                found.append((index, kind, payload))
        return found

    def context(self) -> dict[str, Any]:
        history: list[Any] = []
        for _, kind, payload in self._payloads():
            if kind == "response_item":
                history.append(payload)
            elif kind == "compacted":
                replacement = payload.get("replacement_history")
                if isinstance(replacement, list):
                    history = list(replacement)
                else:  # an older compaction: only its summary is left (if any)
                    summary = payload.get("message")
                    history = [_user_text(summary)] if isinstance(summary, str) and summary else []
            elif payload.get("type") == "thread_rolled_back":
                _drop_user_turns(history, payload.get("num_turns"))
        return {"messages": history, "model": self._model}

    def transcript_messages(self) -> list[TranscriptMessage]:
        groups: list[list[TranscriptMessage]] = []
        calls: dict[str, tuple[list[TranscriptMessage], str]] = {}
        for index, kind, payload in self._payloads():
            if kind != "response_item":
                continue
            line = self._lines[index]
            call_id = call_id_of(payload)
            owner = calls.get(call_id) if call_id is not None else None
            result = output_message(payload, owner[1] if owner is not None else "?")
            if result is not None:
                named = TranscriptMessage(line.name, line.timestamp, result)
                if owner is not None:
                    owner[0].append(named)  # right after its call
                else:
                    groups.append([named])
                continue
            message = agent_message(payload)
            if message is None:
                continue
            group = [TranscriptMessage(line.name, line.timestamp, message)]
            groups.append(group)
            block = message["content"][0] if message.get("content") else None
            if call_id is not None and isinstance(block, dict) and block.get("type") == "toolCall":
                calls[call_id] = (group, str(block.get("name")))
        return [message for group in groups for message in group]

    def usage(self) -> dict[str, Any]:
        total = self._usage or {}
        usage = {}
        for key, field in _USAGE_FIELDS:
            value = total.get(field)
            number = isinstance(value, int) and not isinstance(value, bool)
            usage[key] = value if number else 0
        return usage

    def entry_type(self, index: int) -> str:
        line = self._lines[index]
        return f"{line.kind}-{line.payload_type}" if line.payload_type else line.kind

    def entry_role(self, index: int) -> str | None:
        return self._lines[index].role

    def entry_text(self, index: int) -> str:
        line = self._lines[index]
        _, payload = split_line(self.entry(index), bool(self._envelope_less))
        if index == 0 and self._envelope_less:
            return str(payload.get("id", ""))
        if line.payload_type == "message":
            return item_text(payload)
        for key in ("message", "thread_name", "name", "text", "model", "cwd", "output"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                return value
        summary = payload.get("summary")
        if isinstance(summary, list) and summary and isinstance(summary[0], dict):
            return str(summary[0].get("text", ""))
        return ""

    # -- the tree: a line -----------------------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        return index - 1 if index > 0 else None

    def leaf_index(self) -> int | None:
        return len(self._lines) - 1 if self._lines else None

    def path_indexes(self) -> list[int]:
        return list(range(len(self._lines)))


def _user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _drop_user_turns(history: list[Any], turns: Any) -> None:
    """Drop the last ``turns`` user turns (each from its user message on) in place."""
    if not isinstance(turns, int) or isinstance(turns, bool):
        return
    for _ in range(max(turns, 0)):
        start = next(
            (
                position
                for position in range(len(history) - 1, -1, -1)
                if isinstance(history[position], dict)
                and history[position].get("type") == "message"
                and history[position].get("role") == "user"
                and not is_injected(history[position])
            ),
            None,
        )
        if start is None:
            return
        del history[start:]
