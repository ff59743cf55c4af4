"""opencode sessions as a `SessionSource`, read-only: one session of an
``opencode.db`` (opencode >= 1.2) or of an older ``storage/`` tree
(`core.formats.opencode_rows`).

Entries are the session's messages, each followed by its parts, named by their ids
(``msg_…``, ``prt_…``); an entry is ``{"kind": "message" | "part", "id", "messageID",
"timeCreated", "data"}`` (``data`` as opencode stores it). The session is shown linear:
each entry's parent is the one before, the leaf the last. What the mount shows:

* ``context.json``: ``{"messages", "model"}`` -- the chat-completions messages opencode
  sends its model (it stores no system prompt): each user message's text parts (one
  part: its text; opencode stores a prompt wrapped in literal quotes and sends it so),
  each assistant message's text with its tool parts as ``tool_calls`` (``content`` ''
  when it has no text), then each finished tool's output as a ``tool`` message; a
  ``revert`` on the session hides its message and everything after; ``model`` the last
  assistant's ``providerID/modelID``;
* ``transcript.md``: the same turns, reasoning parts quoted, each tool's result after
  its call's message;
* ``header.json``: the session row (id, slug, directory, version, parent, project,
  creation time); ``title``: its title; ``stats.json`` usage: the assistants' tokens.

Reading is blocking SQLite work: the mount does it in worker threads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import orjson

from core.formats.base import SessionSource, TranscriptMessage
from core.formats.chat_messages import (
    chat_assistant,
    chat_tool_call,
    chat_tool_result,
    tool_call_block,
    tool_result_message,
)
from core.formats.linear import Linear
from core.formats.opencode_rows import (
    Row,
    SessionRows,
    db_signature,
    read_db_session,
    read_storage_session,
)
from core.jsonl import loads
from core.paths import ms_to_iso
from core.safe_open import PathArg

__all__ = ["OpencodeSession"]

#: what one entry costs besides its JSON (its record, strings, dict slots)
_ENTRY_BYTES: Final = 400
_DONE_TOOL: Final = frozenset({"completed", "error"})


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class OpencodeSession(Linear, SessionSource):
    """Session ``session_id`` of the database ``store`` (a ``.db``), or the older
    layout's session file ``store`` (``storage/session/<project>/<id>.json``)."""

    agent = "opencode"

    def __init__(self, store: PathArg, session_id: str | None = None) -> None:
        super().__init__()
        self.path = Path(store)
        self.is_db = session_id is not None
        self.session_id = session_id or self.path.stem
        self._load()

    def _read(self) -> SessionRows:
        if self.is_db:
            return read_db_session(self.path, self.session_id)
        return read_storage_session(self.path)

    def _load(self) -> None:
        rows = self._read()
        self._rows = rows
        self._entries: list[Row] = []
        self._malformed = 0
        for message in rows.messages:
            for row in (message, *rows.parts.get(message.id, ())):
                if row.data is None:
                    self._malformed += 1
                else:
                    self._entries.append(row)
        self._index_of = {row.id: i for i, row in enumerate(self._entries)}
        self._changed()

    def catch_up(self) -> bool:
        if self.is_db and self._rows.signature == db_signature(self.path, self.session_id):
            return False
        self._load()
        self.reread = True
        return True

    def memory_cost(self) -> int:
        return sum(row.raw_size + _ENTRY_BYTES for row in self._entries)

    @property
    def malformed_lines(self) -> int:
        return self._malformed

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        info = self._rows.info
        created = info.get("time_created")
        if created is None and isinstance(info.get("time"), dict):
            created = info["time"].get("created")
        return {
            "agent": "opencode",
            "id": _str(info.get("id")) or self.session_id,
            "slug": info.get("slug"),
            "directory": info.get("directory"),
            "version": info.get("version"),
            "projectID": info.get("project_id", info.get("projectID")),
            "parentID": info.get("parent_id", info.get("parentID")),
            "timestamp": ms_to_iso(created) if isinstance(created, int) else None,
            "file": os.fspath(self.path),
        }

    def title(self) -> str:
        return _str(self._rows.info.get("title")) or ""

    def _revert_from(self) -> str | None:
        revert = self._rows.info.get("revert")
        if isinstance(revert, str):
            try:
                revert = loads(revert.encode())
            except ValueError:
                return None
        return _str(revert.get("messageID")) if isinstance(revert, dict) else None

    def _turns(self) -> list[tuple[Row, dict[str, Any], list[Row]]]:
        """(message row, its data, its parts) of the messages the session shows (up to
        a revert)."""
        cut = self._revert_from()
        turns = []
        for message in self._rows.messages:
            if message.id == cut:
                break
            if message.data is not None:
                parts = [p for p in self._rows.parts.get(message.id, ()) if p.data is not None]
                turns.append((message, message.data, parts))
        return turns

    def context(self) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        model: str | None = None
        for _, data, parts in self._turns():
            texts = [p.data for p in parts if p.data is not None and p.data.get("type") == "text"]
            if data.get("role") == "user":
                content: Any = (
                    str(texts[0].get("text", ""))
                    if len(texts) == 1
                    else [{"type": "text", "text": str(t.get("text", ""))} for t in texts]
                )
                messages.append({"role": "user", "content": content})
                continue
            if data.get("role") != "assistant":
                continue
            model = _model_of(data) or model
            tools = [p.data for p in parts if p.data is not None and p.data.get("type") == "tool"]
            calls = [
                chat_tool_call(t.get("callID"), t.get("tool"), _state(t).get("input"))
                for t in tools
            ]
            text = "".join(str(t.get("text", "")) for t in texts)
            messages.append(chat_assistant(text, calls, no_text=""))
            for tool in tools:
                if _state(tool).get("status") in _DONE_TOOL:
                    messages.append(chat_tool_result(tool.get("callID"), _tool_output(tool)))
        return {"messages": messages, "model": model}

    def transcript_messages(self) -> list[TranscriptMessage]:
        out: list[TranscriptMessage] = []
        for message, data, parts in self._turns():
            time = ms_to_iso(message.time_ms) if message.time_ms is not None else ""
            role = data.get("role")
            blocks: list[dict[str, Any]] = []
            results: list[TranscriptMessage] = []
            for part in parts:
                assert part.data is not None
                kind = part.data.get("type")
                if kind == "text":
                    blocks.append({"type": "text", "text": str(part.data.get("text", ""))})
                elif kind == "reasoning":
                    blocks.append({"type": "thinking", "thinking": str(part.data.get("text", ""))})
                elif kind == "tool":
                    state = _state(part.data)
                    call_id, name = part.data.get("callID"), part.data.get("tool")
                    blocks.append(tool_call_block(call_id, name, state.get("input")))
                    if state.get("status") in _DONE_TOOL:
                        result = tool_result_message(
                            call_id, name, _tool_output(part.data), state.get("status") == "error"
                        )
                        results.append(TranscriptMessage(part.id, time, result))
            if role in ("user", "assistant") and blocks:
                out.append(TranscriptMessage(message.id, time, {"role": role, "content": blocks}))
            out.extend(results)
        return out

    def usage(self) -> dict[str, Any] | None:
        totals = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
        found = False
        for message in self._rows.messages:
            tokens = message.data.get("tokens") if message.data is not None else None
            if not isinstance(tokens, dict):
                continue
            found = True
            cache = tokens.get("cache")
            cache = cache if isinstance(cache, dict) else {}
            totals["input"] += _int(tokens.get("input"))
            totals["output"] += _int(tokens.get("output")) + _int(tokens.get("reasoning"))
            totals["cacheRead"] += _int(cache.get("read"))
            totals["cacheWrite"] += _int(cache.get("write"))
        return totals if found else None

    # -- entries -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def entry_name(self, index: int) -> str:
        return self._entries[index].id

    def entry(self, index: int) -> dict[str, Any]:
        row = self._entries[index]
        return {
            "kind": "message" if row.message_id is None else "part",
            "id": row.id,
            "messageID": row.message_id,
            "timeCreated": row.time_ms,
            "data": row.data,
        }

    def raw_line(self, index: int) -> bytes:
        return orjson.dumps(self.entry(index))

    def entry_time_ms(self, index: int) -> int | None:
        return self._entries[index].time_ms

    def index_of(self, name: str) -> int | None:
        return self._index_of.get(name)

    def entry_type(self, index: int) -> str:
        row = self._entries[index]
        if row.message_id is None:
            return "message"
        kind = row.data.get("type") if row.data is not None else None
        return f"part-{kind}" if isinstance(kind, str) else "part"

    def entry_role(self, index: int) -> str | None:
        row = self._entries[index]
        role = row.data.get("role") if row.message_id is None and row.data else None
        return role if isinstance(role, str) else None

    def entry_text(self, index: int) -> str:
        data = self._entries[index].data or {}
        if isinstance(data.get("text"), str):
            return str(data["text"])
        if data.get("type") == "tool":
            return str(data.get("tool", ""))
        return str(data.get("reason") or data.get("modelID") or "")


def _state(tool: dict[str, Any]) -> dict[str, Any]:
    state = tool.get("state")
    return state if isinstance(state, dict) else {}


def _tool_output(tool: dict[str, Any]) -> str:
    state = _state(tool)
    for key in ("output", "error"):
        value = state.get(key)
        if isinstance(value, str):
            return value
    return ""


def _model_of(data: dict[str, Any]) -> str | None:
    model = _str(data.get("modelID"))
    provider = _str(data.get("providerID"))
    return f"{provider}/{model}" if model and provider else model
