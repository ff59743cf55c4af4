"""JSON and lenient JSONL: the one place where session bytes become objects and back.

orjson is used everywhere for speed; the stdlib ``json`` module is only a fallback for
the rare values orjson refuses (integers beyond 64 bits, lone surrogates written by
other tools). Falling back instead of failing keeps "never drop data you do not
understand" true for odd-but-valid JSON.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import orjson

from core.title_slot import fold_title_slot, split_title_slot

__all__ = [
    "JsonlReport",
    "complete_prefix_length",
    "consumed_length",
    "dumps_line",
    "dumps_pretty",
    "exact_bytes",
    "is_header",
    "lines_length",
    "load_entries_from_file",
    "loads",
    "loads_refused_by_orjson",
    "parse_jsonl_lenient",
    "parse_jsonl_report",
    "parse_object_line",
    "parse_session_lenient",
]

_orjson_loads = orjson.loads
_JSON_ERRORS = (ValueError, TypeError, RecursionError)


def loads(data: bytes | str) -> Any:
    """Parse one JSON document; raises ``ValueError`` when it is not JSON."""
    try:
        return _orjson_loads(data)
    except orjson.JSONDecodeError:
        return loads_refused_by_orjson(data)


def loads_refused_by_orjson(data: bytes | str) -> Any:
    """`loads` of a document orjson already refused: orjson rejects some valid JSON
    (big integers, lone surrogate escapes), which the standard library reads; raises
    ``ValueError`` when it is not JSON."""
    try:
        return json.loads(data)
    except _JSON_ERRORS as exc:
        raise ValueError(f"invalid JSON: {exc}") from None


def _dumps(obj: Any, option: int, indent: int | None) -> bytes:
    try:
        return orjson.dumps(obj, option=option)
    except TypeError:
        # Same fallback as loads: values orjson cannot encode but JSON can. ASCII output
        # keeps lone surrogates as \uXXXX escapes, so the bytes stay valid UTF-8.
        separators = (",", ": ") if indent else (",", ":")
        return json.dumps(obj, ensure_ascii=True, indent=indent, separators=separators).encode()


def dumps_line(obj: Any) -> bytes:
    """Compact JSON plus ``\\n``: exactly one JSONL line (the append hot path)."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return _dumps(obj, 0, None) + b"\n"


def dumps_pretty(obj: Any) -> bytes:
    """Two-space indented JSON plus ``\\n`` (what the mount shows to people). orjson
    adds the newline itself: a big ``context.json`` is not copied once more for it."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return _dumps(obj, orjson.OPT_INDENT_2, 2) + b"\n"


def exact_bytes(data: bytes) -> bytes:
    """``data`` in a buffer of exactly its length. orjson (3.10 and later) hands back its
    output in the buffer it reserved for the worst case -- 4 KiB at least, up to 8 times
    the length -- so a cached 3 KB entry file held 8-20 KB: 60 sessions' ``entries/``,
    85 MB by length, kept the daemon's RSS ~200 MB over its baseline (issue 26). A
    copy costs a ``memcpy``; what the mount keeps must cost what it counts."""
    return memoryview(data).tobytes()


def is_header(obj: Any) -> bool:
    """A session header: ``type == "session"`` with a string ``id``."""
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


#: Lines longer than this (bytes) are parsed by the standard library's parser first:
#: orjson sizes its work space from a document's length, ~12 times it while it parses
#: (a 7 MB tool output took 85 MB more at once, a render worker's peak), json's parser
#: about twice; it is ~1.5 times slower, on lines this rare.
BIG_LINE_BYTES = 1 << 20


def _parse_line(line: bytes) -> dict[str, Any] | None:
    if len(line) > BIG_LINE_BYTES:
        return _parse_big_line(line)
    try:
        obj = _orjson_loads(line)
    except orjson.JSONDecodeError:
        try:
            obj = json.loads(line)
        except (*_JSON_ERRORS, UnicodeDecodeError):
            return None
    return obj if isinstance(obj, dict) else None


def _parse_big_line(line: bytes) -> dict[str, Any] | None:
    """`_parse_line` of a long line, json's parser first (`BIG_LINE_BYTES`): the same
    object (where both read a line they make the same one; orjson is asked only when
    json refuses, as json is when orjson does)."""
    try:
        obj = json.loads(line)
    except (*_JSON_ERRORS, UnicodeDecodeError):
        try:
            obj = _orjson_loads(line)
        except orjson.JSONDecodeError:
            return None
    return obj if isinstance(obj, dict) else None


def parse_object_line(line: bytes) -> dict[str, Any] | None:
    """One line as every lenient reader here reads it: a JSON object, or ``None`` (not
    JSON, or JSON that is not an object: the line is skipped)."""
    return _parse_line(line)


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data


def parse_jsonl_lenient(data: bytes | str) -> list[dict[str, Any]]:
    """Every line that is a JSON object, in order; anything else is skipped.

    One bad line never loses the others, and a torn last line (a crash mid-write) is
    simply not an object, so it is skipped too.
    """
    out: list[dict[str, Any]] = []
    append = out.append
    for line in _as_bytes(data).split(b"\n"):
        if not line or line.isspace():
            continue
        # Fast path: the overwhelmingly common case is a valid object line.
        try:
            obj = _orjson_loads(line)
        except orjson.JSONDecodeError:
            obj = _parse_line(line)
        if isinstance(obj, dict):
            append(obj)
    return out


def parse_session_lenient(data: bytes | str) -> list[dict[str, Any]]:
    """`parse_jsonl_lenient` of a session file's bytes: a leading title slot (omp 18,
    `core.title_slot`) is not an object of the session; its title overrides the
    header's. Without a slot this is exactly `parse_jsonl_lenient`."""
    raw = _as_bytes(data)
    slot, body = split_title_slot(raw)
    if slot is None:
        return parse_jsonl_lenient(raw)
    objects = parse_jsonl_lenient(raw[body:])
    if objects and is_header(objects[0]):
        fold_title_slot(objects[0], slot)
    return objects


@dataclass
class JsonlReport:
    """What a line-by-line read of a JSONL buffer found (used by ``check``)."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    #: 1-based line number of each object in ``objects``.
    object_lines: list[int] = field(default_factory=list)
    #: 1-based numbers of non-blank lines that are not JSON objects.
    bad_lines: list[int] = field(default_factory=list)
    #: the last line has no ``\n`` and is not a JSON object (an interrupted write).
    torn_tail: bool = False


def parse_jsonl_report(data: bytes) -> JsonlReport:
    report = JsonlReport()
    lines = data.split(b"\n")
    last_index = len(lines) - 1
    for index, line in enumerate(lines):
        if not line or line.isspace():
            continue
        obj = _parse_line(line)
        if obj is not None:
            report.objects.append(obj)
            report.object_lines.append(index + 1)
        elif index == last_index:
            # Text after the final newline that does not parse: a torn write.
            report.torn_tail = True
        else:
            report.bad_lines.append(index + 1)
    return report


def complete_prefix_length(data: bytes) -> int:
    """Length of ``data`` up to and including its last ``\\n`` (0 when there is none)."""
    return data.rfind(b"\n") + 1


def consumed_length(data: bytes) -> int:
    """Bytes of ``data`` that hold complete lines: up to its last ``\n``, plus a last
    line without one when that line is a whole JSON object (a tool that does not end
    its lines wrote data, not half a write). A torn last line is left for a later
    catch-up. The one rule for every reader of a growing file."""
    end = complete_prefix_length(data)
    tail = data[end:]
    if not tail.strip():
        return len(data)
    if not tail.rstrip().endswith(b"}"):
        return end  # no object ends so: a torn line is not parsed (it may be megabytes)
    return len(data) if _parse_line(tail) is not None else end


def lines_length(data: bytes) -> int:
    """`consumed_length` of ``data``, less a blank tail: blanks after the last newline
    are no line yet but maybe the start of one (an indented object), so they wait like
    a torn line. The bytes that are numbered lines: every reader that names entries by
    line number (`core.formats.lines.LineFile`, the search index) takes these, so a
    fresh read and catch-ups, and ``entries/`` and ``search/``, number lines alike."""
    used = consumed_length(data)
    tail = data[data.rfind(b"\n", 0, used) + 1 : used]
    return used - len(tail) if tail.isspace() else used


def load_entries_from_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The file's objects, header first (a title slot folded into it); ``[]`` for a
    missing file or one with no header."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return []
    entries = parse_session_lenient(data)
    if not entries or not is_header(entries[0]):
        return []
    return entries
