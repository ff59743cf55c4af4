"""oh-my-pi 18's title slot: a fixed-width first line that carries the current title.

Every file omp 18 creates starts with one line of exactly `TITLE_SLOT_BYTES` bytes
(its ``\\n`` included): ``{"type":"title","v":1,"title":…,"source":…,"updatedAt":…,
"pad":"   …"}``. The session header is the line after it. omp renames a session by
appending a ``title_change`` entry and overwriting those bytes in place, so the title
changes without rewriting (or even growing) the rest of the file.

Readers strip a *valid* slot (``type`` "title", ``v`` 1, string ``title``,
``updatedAt`` and ``pad``, ``source`` absent or "auto"/"user") and let it override the
header's ``title``/``titleSource`` (an empty slot title means no title). Anything else
on the first line is an ordinary line: files without a slot read as before.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

import orjson

__all__ = [
    "TITLE_SLOT_BYTES",
    "TITLE_SLOT_TYPE",
    "fold_title_slot",
    "new_title_slot",
    "parse_title_slot",
    "read_title_slot",
    "serialize_title_slot",
    "slot_bytes",
    "slot_matches_header",
    "split_title_slot",
    "title_of_slot",
]

TITLE_SLOT_BYTES: Final = 256
TITLE_SLOT_TYPE: Final = "title"
_SOURCES: Final = ("auto", "user")

Slot = dict[str, Any]


def _valid(obj: Any) -> Slot | None:
    """The slot ``obj`` is (its known fields only), or None when it is not one."""
    if not isinstance(obj, dict) or obj.get("type") != TITLE_SLOT_TYPE:
        return None
    version = obj.get("v")
    if version != 1 or isinstance(version, bool):  # True == 1 in Python, not in JS
        return None
    if not all(isinstance(obj.get(key), str) for key in ("title", "updatedAt", "pad")):
        return None
    source = obj.get("source")
    if source is not None and source not in _SOURCES:
        return None
    return obj


def parse_title_slot(line: bytes) -> Slot | None:
    """The slot a first line (without or with its ``\\n``) holds, else None."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            obj = json.loads(line)
        except (ValueError, TypeError, RecursionError, UnicodeDecodeError):
            return None
    return _valid(obj)


def split_title_slot(data: bytes) -> tuple[Slot | None, int]:
    """``(slot, body offset)`` of a file's bytes: the valid slot on the first line and
    where the line after it starts, or ``(None, 0)`` for a file without one. Only a
    complete first line counts (a slot being written has no ``\\n`` yet)."""
    newline = data.find(b"\n")
    if newline < 0:
        return None, 0
    first = data[:newline]
    # Cheap filter before a parse: a slot holds these keys, a header line (which may
    # be megabytes) has no "pad".
    if b'"pad"' not in first or b'"title"' not in first:
        return None, 0
    slot = parse_title_slot(first)
    return (slot, newline + 1) if slot is not None else (None, 0)


def title_of_slot(slot: Slot) -> tuple[str | None, str | None]:
    """``(title, titleSource)`` a slot gives the header (None = absent)."""
    title = slot["title"]
    return (title or None), slot.get("source")


def fold_title_slot(header: dict[str, Any], slot: Slot | None) -> dict[str, Any]:
    """Let ``slot`` override the header's title fields (in place, as omp's loader does;
    returns ``header``). No slot: the header is left as it is."""
    if slot is None:
        return header
    title, source = title_of_slot(slot)
    for key, value in (("title", title), ("titleSource", source)):
        if value is None:
            header.pop(key, None)
        else:
            header[key] = value
    return header


def read_title_slot(path: str | os.PathLike[str]) -> Slot | None:
    """The slot at the start of the file ``path`` (one small read), else None."""
    with open(path, "rb") as f:
        return split_title_slot(f.read(TITLE_SLOT_BYTES))[0]


def _slot_line(title: str, source: str | None, updated_at: str, pad: str) -> bytes:
    # Key order and compact JSON as omp's JSON.stringify writes them; orjson escapes
    # the same characters JavaScript does (quote, backslash, C0 controls).
    slot: Slot = {"type": TITLE_SLOT_TYPE, "v": 1, "title": title}
    if source:
        slot["source"] = source
    slot["updatedAt"] = updated_at
    slot["pad"] = pad
    return orjson.dumps(slot) + b"\n"


def _fitting_title(title: str, source: str | None, updated_at: str) -> str:
    """The longest code-point prefix of ``title`` whose slot fits (omp's cut)."""
    low, high, best = 0, len(title), ""
    while low <= high:
        mid = (low + high) // 2
        candidate = title[:mid]
        if len(_slot_line(candidate, source, updated_at, "")) <= TITLE_SLOT_BYTES:
            best, low = candidate, mid + 1
        else:
            high = mid - 1
    return best


def serialize_title_slot(title: str | None, source: str | None, updated_at: str) -> bytes:
    """The slot line, exactly `TITLE_SLOT_BYTES` bytes; a long title is cut."""
    if source is not None and source not in _SOURCES:
        raise ValueError(f"title source must be 'auto' or 'user', not {source!r}")
    fitted = _fitting_title(title or "", source, updated_at)
    pad = TITLE_SLOT_BYTES - len(_slot_line(fitted, source, updated_at, ""))
    if pad < 0:
        raise ValueError("the title slot's fields do not fit in its fixed size")
    line = _slot_line(fitted, source, updated_at, " " * pad)
    assert len(line) == TITLE_SLOT_BYTES
    return line


def new_title_slot(header: dict[str, Any], updated_at: str) -> Slot:
    """The slot that carries ``header``'s title (what `serialize_title_slot` writes)."""
    title, source = header.get("title"), header.get("titleSource")
    slot: Slot = {"type": TITLE_SLOT_TYPE, "v": 1, "title": title if isinstance(title, str) else ""}
    if source in _SOURCES:
        slot["source"] = source
    slot["updatedAt"] = updated_at
    slot["pad"] = ""
    return slot


def slot_matches_header(slot: Slot, header: dict[str, Any]) -> bool:
    """Whether ``slot`` gives the header the title fields it has now."""
    title, source = title_of_slot(slot)
    return header.get("title") == title and header.get("titleSource") == source


def slot_bytes(slot: Slot) -> bytes:
    """The 256-byte line of a slot dict (its title, source and updatedAt)."""
    return serialize_title_slot(slot["title"], slot.get("source"), slot["updatedAt"])
