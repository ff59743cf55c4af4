"""What the search index reads of Gemini CLI's chats (and an older Qwen Code's, which
kept the format): `chat_rows`, `message_search_text`, `by_chat_name` and
`GEMINI_SEARCH`.

A row per ``user`` or model message record, its text, thoughts, tool calls and
results, named as ``entries/`` names it (``NNNNNN-<kind>``: by line number, so a
changed file is read whole again, `MODE_LEGACY`). The file's name decides which of
two it is, as for the mount (`core.formats.gemini_dirs.is_document_chat`):

* a ``.jsonl``: the record lines (whatever its first line holds);
* an older ``.json`` document (one JSON text, pretty-printed by Gemini): each message
  of its ``messages`` array, its row pointing at the message's own bytes in the
  document (`message_spans`), so a hit's snippet is read back like a line's. A torn
  document gives the rows of the messages it holds whole.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any, Final

from core.formats.gemini_dirs import CHATS_DIR, TMP_DIR, is_document_chat
from core.formats.gemini_messages import DOCUMENT_LIMIT, ROLES, message_text, record_kind
from core.search_index.formats import (
    FileFormat,
    Lines,
    capped_text,
    collect_strings,
    dir_entries,
    file_names,
    numbered_lines,
    text_row,
)
from core.search_index.rows import MODE_LEGACY, Row, parse_object

__all__ = ["GEMINI_SEARCH", "by_chat_name", "chat_rows", "message_search_text", "message_spans"]

#: the bytes that matter to `message_spans` besides strings' insides
_STRUCTURE: Final = re.compile(rb'["{}\[\]:]')


def message_search_text(obj: dict[str, Any]) -> list[str]:
    """What a message record says: its text parts, thoughts, tool calls (name, args)
    and results, and a user record's function responses."""
    parts: list[str] = []
    text = message_text(obj.get("content"))
    if text:
        parts.append(text)
    content = obj.get("content")
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            collect_strings([part.get("functionCall"), part.get("functionResponse")], parts)
    thoughts = obj.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else ():
        if isinstance(thought, dict):
            collect_strings([thought.get("subject"), thought.get("description")], parts)
    calls = obj.get("toolCalls")
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict):
            collect_strings([call.get("name"), call.get("args"), call.get("result")], parts)
    return parts


def _row(number: int, obj: dict[str, Any] | None, at: int, raw: bytes) -> Row | None:
    """The row of the message ``obj`` (entry ``number``), read at ``at`` as ``raw``."""
    kind = record_kind(obj) if obj is not None else None
    if obj is None or kind not in ROLES:
        return None
    return text_row(f"{number:06d}-{kind}", ROLES[kind], message_search_text(obj), obj, at, raw)


def _string_end(data: bytes, start: int) -> int:
    """The index of the quote closing the string whose opening quote is at ``start``
    (``len(data)``: the document ends inside it)."""
    at = start + 1
    while True:
        at = data.find(b'"', at)
        if at < 0:
            return len(data)
        backslashes = 0
        while data[at - 1 - backslashes] == 0x5C:
            backslashes += 1
        if backslashes % 2 == 0:
            return at
        at += 1


def message_spans(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of each object in the top-level ``messages`` array of the JSON
    document ``data``, read as far as it is whole (strings and escapes respected)."""
    spans: list[tuple[int, int]] = []
    depth, key, last_string = 0, b"", b""
    in_messages, item_start = False, -1
    at = 0
    while (found := _STRUCTURE.search(data, at)) is not None:
        at = found.start()
        char = data[at]
        if char == 0x22:  # a string: its end, and its text in case it is a key
            end = _string_end(data, at)
            last_string = data[at + 1 : end]
            at = end + 1
            continue
        if char == 0x3A:  # ':'
            if depth == 1:
                key = last_string
        elif char in b"{[":
            depth += 1
            if depth == 2 and char == 0x5B and key == b"messages":
                in_messages = True
            elif depth == 3 and in_messages and char == 0x7B:
                item_start = at
        else:  # a closing bracket
            if depth == 3 and in_messages and char == 0x7D and item_start >= 0:
                spans.append((item_start, at + 1))
                item_start = -1
            elif depth == 2 and in_messages:
                in_messages = False
            depth -= 1
        at += 1
    return spans


def _document_rows(lines: Iterator[tuple[int, bytes]]) -> Iterator[Row]:
    """The rows of an older ``.json`` document (its complete lines put back where they
    were; the newlines between them are whitespace to JSON)."""
    document = bytearray()
    for at, line in lines:
        if at + len(line) > DOCUMENT_LIMIT:
            return
        document += b"\n" * (at - len(document)) + line
    data = bytes(document)
    for number, (start, end) in enumerate(message_spans(data), start=2):
        raw = data[start:end]
        row = _row(number, parse_object(raw), start, raw)
        if row is not None:
            yield row


def chat_rows(lines: Lines) -> Iterator[Row]:
    """The rows of one chat file of records (module docstring)."""
    for number, at, line in numbered_lines(lines):
        row = _row(number, parse_object(line), at, line)
        if row is not None:
            yield row


def _whole_document(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_LEGACY, _document_rows(iter(lines))


def by_chat_name(records: FileFormat) -> FileFormat:
    """``records`` (how a chat file of records reads), reading an older ``.json``
    document as one: the file's name decides, as it does for the mount's readers."""
    documents = dataclasses.replace(records, whole_file_rows=_whole_document)
    return dataclasses.replace(
        records, by_name=lambda key: documents if is_document_chat(key) else records
    )


def _file_keys(root: str) -> Iterator[tuple[str, ...]]:
    """``tmp/<project>/chats/session-*.jsonl`` (and older ``.json``) and
    ``chats/<session id>/*.jsonl``."""
    for project in dir_entries(f"{root}/{TMP_DIR}"):
        chats = f"{project.path}/{CHATS_DIR}"
        for suffix in (".jsonl", ".json"):
            for name in file_names(chats, "session-", suffix):
                yield (TMP_DIR, project.name, CHATS_DIR, name)
        for parent in dir_entries(chats):
            for name in file_names(parent.path, ""):
                yield (TMP_DIR, project.name, CHATS_DIR, parent.name, name)


def _whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_LEGACY, chat_rows(lines)


def _appended(lines: Lines) -> Iterator[Row]:
    raise AssertionError("a Gemini chat is always read whole (MODE_LEGACY)")


def _line_text(obj: dict[str, Any]) -> str | None:
    return capped_text(message_search_text(obj)) if record_kind(obj) in ROLES else None


GEMINI_SEARCH: Final = by_chat_name(
    FileFormat(
        "gemini",
        _file_keys,
        _whole,
        _appended,
        _line_text,
        lambda key: None,  # a sub-agent's chat is a file of its own, read as it allows
    )
)
