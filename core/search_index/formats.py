"""Which files an index reads and what each line of them is: `FileFormat`.

A `SearchIndex` is built over one directory of one agent's session files. The xcsh
agent dir is `XCSH` (the default); `CLAUDE` indexes a Claude Code directory and `CODEX`
a Codex one, so ``search/`` spans every agent with the same index, queries and
snippets. A format answers four things: the files (keys: path parts below the root),
the rows of a file read from its start (and its update mode), the rows of lines
appended since, and the text of one line read back for a snippet -- or, for sessions
that are rows of a database, how its connector reads them (`RowSessions`).

* Claude Code: a row per ``user``/``assistant`` line (its ``uuid`` the entry id),
  text from every content block (text, thinking, a tool call's name and input, a
  tool result's text); ``isMeta`` lines and metadata lines are not conversation.
  Lines are appendable: a growing session is read from where the index stopped.
* Codex: a row per ``response_item`` (messages, reasoning summaries, calls and their
  output) and ``compacted`` summary, never the ``event_msg`` copies of the same text;
  the entry id is the line's ``entries/`` name (``NNNNNN-<kind>[-<payload type>]``),
  which counts lines from the start, so a changed rollout is read whole again.
  Archived ``.jsonl.zst`` rollouts are indexed through zstd, whole; their rows'
  offsets are offsets in the decompressed text (`core.search_index.rows`).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from core.search_index.row_sessions import RowSessions
from core.search_index.rows import (
    MODE_APPENDABLE,
    MODE_LEGACY,
    Row,
    appended_rows,
    entry_ms,
    parse_object,
    whole_file_rows,
)
from core.search_index.sources import session_file_keys
from core.search_index.text import MAX_INDEXED_CHARS, entry_search_text, rename_hook_message

__all__ = [
    "CLAUDE",
    "CODEX",
    "FORMATS",
    "XCSH",
    "FileFormat",
    "Lines",
    "capped_text",
    "collect_strings",
    "dir_entries",
    "file_names",
    "numbered_lines",
    "text_row",
]

Lines = Iterable[tuple[int, bytes]]


@dataclass(frozen=True)
class FileFormat:
    """One agent's files as the index reads them (module docstring)."""

    name: str
    #: every file's key (path parts below the root); a `FileKeys` also names the
    #: stores it could not list now, whose rows the index keeps
    file_keys: Callable[[str], Iterator[tuple[str, ...]]]
    whole_file_rows: Callable[[Lines], tuple[int, Iterator[Row]]]
    appended_rows: Callable[[Lines], Iterator[Row]]
    #: the indexed text of one line read back (None: nothing indexed there now)
    line_text: Callable[[dict[str, Any]], str | None]
    #: the key of the session a sub-agent's file belongs to (None: a session of its
    #: own): who may not read that session may not read its sub-agents either
    parent_key: Callable[[bytes], bytes | None]
    #: set for sessions that are rows of a database (opencode, Cursor's chats): read
    #: through the connector, not as lines (`core.search_index.row_sessions`)
    row_sessions: RowSessions | None = None
    #: set where a file's name (its key) decides how it reads (Gemini's older ``.json``
    #: documents beside its ``.jsonl`` records): the format that file is read as
    by_name: Callable[[bytes], FileFormat] | None = None

    def of_file(self, key: bytes) -> FileFormat:
        """The format the file with ``key`` is read as (`by_name`; else this one)."""
        return self if self.by_name is None else self.by_name(key)


def _xcsh_line_text(entry: dict[str, Any]) -> str | None:
    rename_hook_message(entry)
    found = entry_search_text(entry)
    return found[1] if found is not None else None


def _xcsh_parent(key: bytes) -> bytes | None:
    """``<project>/<stem>/<task>.jsonl`` -> ``<project>/<stem>.jsonl``."""
    return key[: key.rfind(b"/")] + b".jsonl" if key.count(b"/") > 1 else None


XCSH: Final = FileFormat(
    "xcsh", session_file_keys, whole_file_rows, appended_rows, _xcsh_line_text, _xcsh_parent
)


# --- shared by the agents' formats ----------------------------------------------------------


def dir_entries(path: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            return [e for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def file_names(path: str, prefix: str, suffix: str = ".jsonl") -> list[str]:
    try:
        with os.scandir(path) as it:
            return [
                e.name
                for e in it
                if e.name.startswith(prefix) and e.name.endswith(suffix) and e.is_file()
            ]
    except OSError:
        return []


def collect_strings(value: Any, out: list[str], depth: int = 0) -> None:
    if isinstance(value, str):
        if value:
            out.append(value)
    elif depth < 32 and isinstance(value, dict):
        for item in value.values():
            collect_strings(item, out, depth + 1)
    elif depth < 32 and isinstance(value, list):
        for item in value:
            collect_strings(item, out, depth + 1)


def capped_text(parts: list[str]) -> str | None:
    text = "\n".join(parts)[:MAX_INDEXED_CHARS]
    return text if text and not text.isspace() else None


def text_row(
    entry_id: str, role: str, parts: list[str], obj: dict[str, Any], at: int, line: bytes
) -> Row | None:
    text = capped_text(parts)
    if text is None:
        return None
    return Row(entry_ms(obj), entry_id, role, at, len(line), zlib.crc32(line), text)


# --- Claude Code -----------------------------------------------------------------------


def _claude_keys(root: str) -> Iterator[tuple[str, ...]]:
    """``projects/<enc>/*.jsonl`` (sessions and an older version's sub-agents) and
    ``projects/<enc>/<session>/subagents/agent-*.jsonl``."""
    for project in dir_entries(os.path.join(root, "projects")):
        for name in file_names(project.path, ""):
            yield ("projects", project.name, name)
        for session in dir_entries(project.path):
            for name in file_names(os.path.join(session.path, "subagents"), "agent-"):
                yield ("projects", project.name, session.name, "subagents", name)


def _claude_text(obj: dict[str, Any]) -> tuple[str, list[str]] | None:
    if obj.get("type") not in ("user", "assistant") or obj.get("isMeta"):
        return None
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    parts: list[str] = []
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    for block in blocks if isinstance(blocks, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" or kind == "thinking":
            collect_strings(block.get(kind), parts)
        elif kind == "tool_use":
            collect_strings(block.get("name"), parts)
            collect_strings(block.get("input"), parts)
        elif kind == "tool_result":
            inner = block.get("content")
            if isinstance(inner, list):
                inner = [b.get("text") for b in inner if isinstance(b, dict)]
            collect_strings(inner, parts)
    role = message.get("role")
    return (role if isinstance(role, str) else str(obj["type"])), parts


def _claude_rows(lines: Lines) -> Iterator[Row]:
    for at, line in lines:
        obj = parse_object(line)
        uuid = obj.get("uuid") if obj is not None else None
        found = _claude_text(obj) if obj is not None and isinstance(uuid, str) else None
        if obj is not None and found is not None and isinstance(uuid, str):
            row = text_row(uuid, found[0], found[1], obj, at, line)
            if row is not None:
                yield row


def _claude_whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_APPENDABLE, _claude_rows(lines)


def _claude_line_text(obj: dict[str, Any]) -> str | None:
    found = _claude_text(obj)
    return capped_text(found[1]) if found is not None else None


def _claude_parent(key: bytes) -> bytes | None:
    """``projects/<enc>/<id>/subagents/agent-<a>.jsonl`` -> ``projects/<enc>/<id>.jsonl``
    (an older version's flat sub-agent file names its session only inside)."""
    parts = key.split(b"/")
    return b"/".join(parts[:3]) + b".jsonl" if len(parts) == 5 else None


CLAUDE: Final = FileFormat(
    "claude", _claude_keys, _claude_whole, _claude_rows, _claude_line_text, _claude_parent
)


# --- Codex -------------------------------------------------------------------------------


def _codex_keys(root: str) -> Iterator[tuple[str, ...]]:
    """``sessions/YYYY/MM/DD/rollout-*.jsonl`` and ``archived_sessions/rollout-*.jsonl``
    (or ``.jsonl.zst``)."""
    sessions = os.path.join(root, "sessions")
    for year in dir_entries(sessions):
        for month in dir_entries(year.path):
            for day in dir_entries(month.path):
                for name in file_names(day.path, "rollout-"):
                    yield ("sessions", year.name, month.name, day.name, name)
    archive = os.path.join(root, "archived_sessions")
    for suffix in (".jsonl", ".jsonl.zst"):
        for name in file_names(archive, "rollout-", suffix):
            yield ("archived_sessions", name)


def _codex_item(obj: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
    """(kind, payload type, payload) of a line, the 2025 format's bare items included
    (read as the Codex reader reads them)."""
    payload = obj.get("payload")
    kind = obj.get("type")
    if isinstance(payload, dict) and isinstance(kind, str):
        ptype = payload.get("type") if kind != "session_meta" else None
        return kind, ptype if isinstance(ptype, str) else None, payload
    record = obj.get("record_type")
    if isinstance(record, str):
        return record, None, obj
    if isinstance(kind, str):
        return "response_item", kind, obj
    return "session_meta" if isinstance(obj.get("id"), str) else "unknown", None, obj


_CODEX_ROLES: Final = {
    "reasoning": "reasoning",
    "function_call": "toolCall",
    "custom_tool_call": "toolCall",
    "local_shell_call": "toolCall",
    "function_call_output": "toolResult",
    "custom_tool_call_output": "toolResult",
}


def _texts(parts: Any) -> Any:
    """The ``text`` of each part of a list of parts (a string stays itself)."""
    if isinstance(parts, list):
        return [p.get("text") for p in parts if isinstance(p, dict)]
    return parts


def _codex_text(
    kind: str, ptype: str | None, payload: dict[str, Any]
) -> tuple[str, list[str]] | None:
    parts: list[str] = []
    if kind == "compacted":
        collect_strings(payload.get("message"), parts)
        return "compaction", parts
    if kind != "response_item":
        return None  # event_msg repeats the response items; the rest is not conversation
    if ptype == "message":
        collect_strings(_texts(payload.get("content")), parts)
        role = payload.get("role")
        return (role if isinstance(role, str) else "message"), parts
    role = _CODEX_ROLES.get(ptype or "")
    if role is None:
        return None
    if ptype == "reasoning":
        collect_strings(_texts(payload.get("summary")), parts)
    else:
        for key in ("name", "arguments", "input", "output", "action"):
            collect_strings(payload.get(key), parts)
    return role, parts


def _codex_name(number: int, kind: str, ptype: str | None) -> str:
    return f"{number:06d}-{kind}" + (f"-{ptype}" if ptype else "")


def _codex_whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_LEGACY, _codex_numbered_rows(lines)


def numbered_lines(lines: Lines) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, offset, line)``: lines numbered from the file's start as
    ``entries/`` numbers its entries (`core.formats.lines.LineFile`: every line counts,
    a blank one too), for rows named by line number (read whole: `MODE_LEGACY`). The
    lines read leave out only empty ones (a line of spaces is handed out:
    `core.search_index.rows`), so the gap before a line is lone newlines, a line
    each."""
    number, expected = 0, 0
    for at, line in lines:
        number += 1 + max(0, at - expected)
        expected = at + len(line) + 1
        yield number, at, line


def _codex_numbered_rows(lines: Lines) -> Iterator[Row]:
    """Rows named as ``entries/`` names the lines: by line number from the start."""
    for number, at, line in numbered_lines(lines):
        obj = parse_object(line)
        if obj is None:
            continue
        kind, ptype, payload = _codex_item(obj)
        found = _codex_text(kind, ptype, payload)
        if found is not None:
            row = text_row(_codex_name(number, kind, ptype), found[0], found[1], obj, at, line)
            if row is not None:
                yield row


def _codex_appended(lines: Lines) -> Iterator[Row]:
    raise AssertionError("a Codex rollout is always read whole (MODE_LEGACY)")


def _codex_line_text(obj: dict[str, Any]) -> str | None:
    found = _codex_text(*_codex_item(obj))
    return capped_text(found[1]) if found is not None else None


CODEX: Final = FileFormat(
    "codex",
    _codex_keys,
    _codex_whole,
    _codex_appended,
    _codex_line_text,
    lambda key: None,  # a sub-agent's rollout is a file of its own, read as it allows
)

FORMATS: Final = {f.name: f for f in (XCSH, CLAUDE, CODEX)}
