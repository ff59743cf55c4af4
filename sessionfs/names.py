"""Name encoding for everything the mount shows: the one place that decides it.

Session ids, entry ids and labels come from files anyone can write, so they may
contain ``/``, NUL, or be exactly ``.``/``..``. Such names are percent-encoded so that
every string maps to exactly one valid file name and back:
``/`` -> ``%2F``, ``%`` -> ``%25``, NUL -> ``%00``, ``.`` -> ``%2E``, ``..`` -> ``%2E%2E``.
Callers never show an empty name: entry files always carry a ``.json`` suffix and
empty labels or session ids are not listed.
"""

from __future__ import annotations

import re

__all__ = ["decode_name", "dedupe", "encode_name"]

_ESCAPES = {"%": "%25", "/": "%2F", "\x00": "%00"}
_ESCAPE_RE = re.compile(r"[%/\x00]")
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")


def encode_name(name: str) -> str:
    """A file name (no ``/``, no NUL, never ``.``/``..``) that ``decode_name`` inverts."""
    if name == ".":
        return "%2E"
    if name == "..":
        return "%2E%2E"
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], name)


def decode_name(name: str) -> str:
    """Inverse of ``encode_name``; a stray ``%`` not followed by two hex digits stays."""
    return _PERCENT_RE.sub(lambda m: chr(int(m.group(1), 16)), name)


def dedupe(names: list[str]) -> list[str]:
    """Make names unique in order: the first keeps its name, later ones get ``~2``, ``~3``.

    Used for duplicate entry ids in a corrupt file and duplicate labels or session ids.
    """
    seen: dict[str, int] = {}
    taken = set(names)
    out: list[str] = []
    for name in names:
        count = seen.get(name, 0) + 1
        seen[name] = count
        if count == 1:
            out.append(name)
            continue
        candidate = f"{name}~{count}"
        while candidate in taken:
            count += 1
            candidate = f"{name}~{count}"
        seen[name] = count
        taken.add(candidate)
        out.append(candidate)
    return out
