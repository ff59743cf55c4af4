"""GitHub Copilot CLI sessions (``~/.copilot/session-state/<uuid>/events.jsonl``, or an
older version's bare ``session-state/<uuid>.jsonl``) as a `SessionSource`, read-only.

Every line is an event ``{"type", "data", "id", "timestamp", "parentId"}``; the
``parentId`` chain links each event to the one before (a resume goes on from the last).
Entries are named by the event ``id`` (``meta-<line number>-<type>`` for a line without
one); the tree follows ``parentId``; the leaf is the last event. What the mount shows:

* ``context.json``: ``{"messages", "model"}`` -- the chat-completions messages Copilot
  sends its model, rebuilt from the events on the path: the newest ``system.message``
  first, each ``user.message`` as its ``transformedContent`` (what the model is sent;
  ``content`` when there is none), each ``assistant.message`` with its
  ``toolRequests`` as ``tool_calls``, each ``tool.execution_complete`` as a ``tool``
  message; a successful ``session.compaction_complete`` (``/compact``, or the context
  filling up) replaces what came before with the one user message Copilot sends
  instead: every prompt typed so far, then its ``summaryContent``; ``model`` the
  newest model an event names;
* ``transcript.md``: what the user typed (``content``), the replies with their tool
  calls, and each tool's result right where it completed;
* ``header.json``: ``session.start``'s data (id, cwd, version, start time, model) and
  ``workspace.yaml``'s name; ``title``: ``workspace.yaml``'s ``name``;
* ``stats.json`` usage: the ``session.usage_record`` events summed.

Verified against Copilot CLI 1.0.102 run offline (``docs/agents.md``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from core.formats.base import TranscriptMessage
from core.formats.chat_messages import (
    chat_assistant,
    chat_tool_call,
    chat_tool_result,
    text_of,
    tool_call_block,
    tool_result_message,
)
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.lines import Line
from core.safe_open import PathArg, open_regular

__all__ = ["WORKSPACE_FILE", "CopilotSession", "read_workspace"]

WORKSPACE_FILE: Final = "workspace.yaml"
#: ``workspace.yaml`` is small; anything bigger is not one
_WORKSPACE_LIMIT: Final = 64 * 1024
#: ``stats.json`` usage key <- ``session.usage_record`` ``usage`` key
_USAGE_FIELDS: Final = (
    ("input", "inputTokens"),
    ("output", "outputTokens"),
    ("cacheRead", "cacheReadTokens"),
    ("cacheWrite", "cacheWriteTokens"),
)
_ROLES: Final = {
    "user.message": "user",
    "assistant.message": "assistant",
    "system.message": "system",
    "tool.execution_complete": "toolResult",
}
#: what the context and transcript read; other events are only shown
_COMPACTED: Final = "session.compaction_complete"
_MESSAGE_TYPES: Final = frozenset(_ROLES) | {"tool.execution_start", _COMPACTED}
#: the user message a compaction leaves in place of the history (Copilot CLI 1.0.102)
_COMPACTED_HEAD: Final = (
    "Some of the conversation history has been summarized to free up context.\n\n"
    "You were originally given instructions from a user over one or more turns. "
    "Here were the user messages:\n"
)


def read_workspace(path: PathArg) -> dict[str, str]:
    """``workspace.yaml``'s top-level ``key: value`` scalars (``{}``: none, unreadable).
    Copilot writes flat scalars; nested or multi-line values are skipped."""
    try:
        with open_regular(path) as f:
            text = f.read(_WORKSPACE_LIMIT).decode("utf-8", "replace")
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line[0] in " \t#-":
            continue
        key, sep, value = line.partition(":")
        value = value.strip()
        if sep and key.strip() and value and value[0] not in "|>[{&*!":
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found.setdefault(key.strip(), value)
    return found


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> int | float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


@dataclass(slots=True)
class _CopilotLine(LineRecord):
    type: str
    parent_id: str | None


class CopilotSession(JsonlSession[_CopilotLine]):
    """One Copilot CLI events file read-only (module docstring). ``workspace``:
    ``workspace.yaml``'s fields (default: read from beside ``events.jsonl``)."""

    agent = "copilot"
    #: measured 567 bytes a line (`JsonlSession.LINE_INDEX_BYTES`), and some room
    LINE_INDEX_BYTES = 620

    def __init__(self, path: PathArg, workspace: dict[str, str] | None = None) -> None:
        path = Path(path)
        if workspace is None and path.name == "events.jsonl":
            workspace = read_workspace(path.with_name(WORKSPACE_FILE))
        self.workspace = workspace or {}
        super().__init__(path)

    def _reset_state(self) -> None:
        self._start: dict[str, Any] | None = None
        self._model: str | None = None
        self._usage: dict[str, int | float] = {}

    def _record(self, line: Line, obj: dict[str, Any]) -> _CopilotLine:
        kind = _str(obj.get("type")) or "unknown"
        data = obj.get("data")
        data = data if isinstance(data, dict) else {}
        self._note(kind, data)
        ident = _str(obj.get("id"))
        if ident is None or ident in self._index_of:
            ident = f"meta-{line.number}-{kind}"
        timestamp, time_ms = line_times(obj)
        return _CopilotLine(
            name=ident,
            start=line.start,
            end=line.end,
            timestamp=timestamp,
            time_ms=time_ms,
            type=kind,
            parent_id=_str(obj.get("parentId")),
        )

    def _note(self, kind: str, data: dict[str, Any]) -> None:
        """Keep what the header, model and usage need."""
        if kind == "session.start" and self._start is None:
            self._start = data
            self._model = _str(data.get("selectedModel")) or self._model
        elif kind in ("assistant.message", "session.resume"):
            for key in ("model", "selectedModel"):
                self._model = _str(data.get(key)) or self._model
        elif kind == "session.usage_record":
            usage = data.get("usage")
            if isinstance(usage, dict):
                for key, field in _USAGE_FIELDS:
                    self._usage[key] = self._usage.get(key, 0) + _number(usage.get(field))

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        start = self._start or {}
        context = start.get("context")
        cwd = context.get("cwd") if isinstance(context, dict) else None
        return {
            "agent": "copilot",
            "id": _str(start.get("sessionId")) or self.workspace.get("id") or self._stem(),
            "cwd": cwd if isinstance(cwd, str) else self.workspace.get("cwd"),
            "copilotVersion": start.get("copilotVersion"),
            "producer": start.get("producer"),
            "selectedModel": start.get("selectedModel"),
            "timestamp": start.get("startTime"),
            "name": self.workspace.get("name"),
            "file": os.fspath(self.path),
        }

    def _stem(self) -> str:
        return self.path.parent.name if self.path.name == "events.jsonl" else self.path.stem

    def title(self) -> str:
        return self.workspace.get("name", "")

    def _events(self) -> list[tuple[int, str, dict[str, Any]]]:
        """(index, type, data) of the path's events the context and transcript read."""
        found = []
        for index in self.path_indexes():
            line = self._lines[index]
            if line.type in _MESSAGE_TYPES:
                data = self.entry(index).get("data")
                found.append((index, line.type, data if isinstance(data, dict) else {}))
        return found

    def context(self) -> dict[str, Any]:
        system: dict[str, Any] | None = None
        messages: list[dict[str, Any]] = []
        typed: list[str] = []  # every prompt as typed: a compaction lists them all
        for _, kind, data in self._events():
            if kind == "system.message":
                system = {"role": "system", "content": text_of(data.get("content"))}
            elif kind == "user.message":
                typed.append(text_of(data.get("content")))
                content = data.get("transformedContent")
                if not isinstance(content, str):
                    content = typed[-1]
                messages.append({"role": "user", "content": content})
            elif kind == _COMPACTED and data.get("success") is True:
                messages = [{"role": "user", "content": _compacted(typed, data)}]
            elif kind == "assistant.message":
                calls = [
                    chat_tool_call(r.get("toolCallId"), r.get("name"), r.get("arguments"))
                    for r in _requests(data)
                ]
                messages.append(chat_assistant(text_of(data.get("content")), calls))
            elif kind == "tool.execution_complete":
                messages.append(chat_tool_result(data.get("toolCallId"), _result_text(data)))
        return {"messages": ([system] if system else []) + messages, "model": self._model}

    def transcript_messages(self) -> list[TranscriptMessage]:
        out: list[TranscriptMessage] = []
        tool_names: dict[str, str] = {}
        for index, kind, data in self._events():
            line = self._lines[index]
            message: dict[str, Any] | None = None
            if kind == "user.message":
                message = {"role": "user", "content": text_of(data.get("content"))}
            elif kind == "assistant.message":
                blocks: list[dict[str, Any]] = []
                thinking = _str(data.get("reasoningText"))
                if thinking:
                    blocks.append({"type": "thinking", "thinking": thinking})
                text = text_of(data.get("content"))
                if text:
                    blocks.append({"type": "text", "text": text})
                for request in _requests(data):
                    call_id = str(request.get("toolCallId", ""))
                    tool_names[call_id] = str(request.get("name", "?"))
                    blocks.append(
                        tool_call_block(call_id, request.get("name"), request.get("arguments"))
                    )
                message = {"role": "assistant", "content": blocks}
            elif kind == "tool.execution_start":
                tool_names.setdefault(str(data.get("toolCallId", "")), str(data.get("toolName")))
            elif kind == "tool.execution_complete":
                call_id = str(data.get("toolCallId", ""))
                message = tool_result_message(
                    call_id,
                    tool_names.get(call_id, "?"),
                    _result_text(data),
                    data.get("success") is False,
                )
            if message is not None:
                out.append(TranscriptMessage(line.name, line.timestamp, message))
        return out

    def usage(self) -> dict[str, Any] | None:
        if not self._usage:
            return None
        return {key: self._usage.get(key, 0) for key, _ in _USAGE_FIELDS}

    def entry_type(self, index: int) -> str:
        return self._lines[index].type

    def entry_role(self, index: int) -> str | None:
        return _ROLES.get(self._lines[index].type)

    def entry_text(self, index: int) -> str:
        data = self.entry(index).get("data")
        if not isinstance(data, dict):
            return ""
        kind = self._lines[index].type
        if kind == "tool.execution_complete":
            return _result_text(data)
        if kind in ("assistant.message", "user.message", "system.message"):
            text = text_of(data.get("content"))
            if text or kind != "assistant.message":
                return text
            return ", ".join(str(r.get("name", "?")) for r in _requests(data))
        for key in ("toolName", "selectedModel", "sessionId", "message", "turnId"):
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
        return ""

    # -- the tree: the parentId chain ----------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        parent = self._lines[index].parent_id
        return self._index_of.get(parent) if parent is not None else None

    def leaf_index(self) -> int | None:
        return len(self._lines) - 1 if self._lines else None


def _compacted(typed: list[str], data: dict[str, Any]) -> str:
    """The one user message a compaction leaves: every prompt typed so far and the
    summary the model wrote."""
    prompts = "\n".join(f"<user_message>\n{text}\n</user_message>" for text in typed)
    summary = text_of(data.get("summaryContent"))
    return (
        f"{_COMPACTED_HEAD}{prompts}\n\n"
        f"Here is a summary of the prior context:\n<summary>\n{summary}\n</summary>\n"
    )


def _requests(data: dict[str, Any]) -> list[dict[str, Any]]:
    requests = data.get("toolRequests")
    return [r for r in requests if isinstance(r, dict)] if isinstance(requests, list) else []


def _result_text(data: dict[str, Any]) -> str:
    """A completed tool's output: ``result.content``, else its error's message."""
    for key in ("result", "error"):
        value = data.get(key)
        if isinstance(value, dict):
            text = text_of(value.get("content")) or text_of(value.get("message"))
            if text:
                return text
        elif isinstance(value, str) and value:
            return value
    return ""
