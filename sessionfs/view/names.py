"""Name encoding for everything the mount shows: the one place that decides it.

Session ids, entry ids and labels come from files anyone can write, so they may
contain ``/``, NUL, or be exactly ``.``/``..``. Such names are percent-encoded so that
every string maps to exactly one valid file name and back:
``/`` -> ``%2F``, ``%`` -> ``%25``, NUL -> ``%00``, ``.`` -> ``%2E``, ``..`` -> ``%2E%2E``.
Callers never show an empty name: entry files always carry a ``.json`` suffix and
empty labels or session ids are not listed.

They may also be longer than a file name can be (255 bytes; the kernel refuses a
longer one, and one such name made ``ls`` fail for a whole directory). A name that
does not fit is shortened to ``<prefix>~<16 hex digits>``: a prefix of the encoded
name (so people still recognise it), ``~``, and the start of the SHA-256 of the full
encoded name. It is a pure function of the name, so it is the same after a remount,
and two long names sharing a prefix still differ. Short names cannot be decoded back;
whoever resolves one (`sessionfs.writes.link_targets`) compares it with the names of the
candidates (`matches_name`).
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Collection, Sequence
from typing import Any, cast, overload

__all__ = [
    "ENTRY_SUFFIX",
    "NAME_MAX",
    "PATH_NUMBER_RESERVE",
    "appended_entry_file_names",
    "decode_name",
    "dedupe",
    "encode_name",
    "entry_file_names",
    "entry_file_names_when_asked",
    "fit_name",
    "looks_shortened",
    "unique_names",
]

#: The longest file name the kernel accepts, in bytes.
NAME_MAX = 255
#: Digits of the hash in a shortened name (64 bits: collisions are not a concern).
HASH_CHARS = 16
#: The suffix of every ``entries/`` file.
ENTRY_SUFFIX = ".json"
#: ``path/`` shows ``NNNN-<entry file name>``: entry file names leave room for the
#: number and its dash (up to 15 digits), so a path link name never needs shortening
#: again and always names its entry file verbatim.
PATH_NUMBER_RESERVE = 16

_ESCAPES = {"%": "%25", "/": "%2F", "\x00": "%00"}
_ESCAPE_RE = re.compile(r"[%/\x00]")
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_SHORTENED_RE = re.compile(rf".*~[0-9a-f]{{{HASH_CHARS}}}")


def encode_name(name: str) -> str:
    """A file name (no ``/``, no NUL, never ``.``/``..``) that ``decode_name`` inverts.
    It is not yet fitted to `NAME_MAX` (see `fit_name`)."""
    if name == ".":
        return "%2E"
    if name == "..":
        return "%2E%2E"
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], name)


def decode_name(name: str) -> str:
    """Inverse of ``encode_name``; a stray ``%`` not followed by two hex digits stays."""
    return _PERCENT_RE.sub(lambda m: chr(int(m.group(1), 16)), name)


def _byte_length(name: str) -> int:
    # surrogatepass: ids parsed from odd JSON may hold lone surrogates; counting them
    # as 3 bytes never undercounts what the kernel will see.
    return len(name.encode("utf-8", "surrogatepass"))


def _prefix_within(name: str, budget: int) -> str:
    """The longest prefix of ``name`` of at most ``budget`` bytes that does not end
    inside a ``%XX`` escape (so the prefix reads like the name it stands for)."""
    out: list[str] = []
    used = 0
    for char in name:
        size = _byte_length(char)
        if used + size > budget:
            break
        out.append(char)
        used += size
    prefix = "".join(out)
    cut = prefix.rfind("%", max(0, len(prefix) - 2))
    return prefix[:cut] if cut >= 0 else prefix


def fit_name(encoded: str, suffix: str = "", reserve: int = 0) -> str:
    """``encoded`` itself when ``encoded + suffix`` fits in `NAME_MAX` bytes minus
    ``reserve``, else its stable short form ``<prefix>~<hash>`` that does."""
    limit = NAME_MAX - reserve - _byte_length(suffix)
    if _byte_length(encoded) <= limit:
        return encoded
    digest = hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]
    tail = f"~{digest}"
    return _prefix_within(encoded, limit - len(tail)) + tail


def looks_shortened(name: str) -> bool:
    """Whether ``name`` has the shape `fit_name` gives a name that did not fit."""
    return _SHORTENED_RE.fullmatch(name) is not None


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


def unique_names(encoded: Sequence[str], suffix: str = "", reserve: int = 0) -> list[str]:
    """File names (without ``suffix``) for already encoded names, in order: made
    unique (`dedupe`), then fitted (`fit_name`). A fitted name that happens to equal
    another listed name (an id spelled like a short name) is fitted again with a
    counter, so the result is always unique."""
    full = dedupe(list(encoded))
    fitted = [fit_name(name, suffix, reserve) for name in full]
    if len(set(fitted)) == len(fitted):
        return fitted
    taken: set[str] = set()
    out: list[str] = []
    for name, whole in zip(fitted, full, strict=True):
        count, unique = 1, name
        while unique in taken:
            count += 1
            unique = fit_name(f"{whole}~{count}", suffix, reserve)
        taken.add(unique)
        out.append(unique)
    return out


def entry_file_names(ids: Sequence[object]) -> list[str]:
    """``entries/`` file names (with `ENTRY_SUFFIX`) for the ids of a session's
    entries in file order; an entry without a usable id is ``~<index>``."""
    plain = _plain_entry_file_names(ids)
    return plain if plain is not None else general_entry_file_names(ids)


def entry_file_names_when_asked(ids: Sequence[object]) -> Sequence[str]:
    """`entry_file_names`, each name made when it is asked for when the ids are
    plain (the usual session): a page of a session of 350,000 entries holds no
    second copy of their names (~90 bytes each, issue 26 point 6)."""
    if _are_plain(ids):
        return _SuffixedIds(cast("Sequence[str]", ids))
    return general_entry_file_names(ids)


class _SuffixedIds(Sequence[str]):
    """Plain ids' file names: each id with `ENTRY_SUFFIX`, made when asked."""

    def __init__(self, ids: Sequence[str]) -> None:
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [entry_id + ENTRY_SUFFIX for entry_id in self._ids[index]]
        return self._ids[index] + ENTRY_SUFFIX

    def index(self, value: Any, start: int = 0, stop: int = sys.maxsize) -> int:
        if not isinstance(value, str) or not value.endswith(ENTRY_SUFFIX):
            raise ValueError(value)
        return self._ids.index(value[: -len(ENTRY_SUFFIX)], start, stop)


def appended_entry_file_names(
    names_before: Collection[str], ids: Sequence[object]
) -> list[str] | None:
    """The names of entries appended after those named ``names_before``, when they
    are what `entry_file_names` of all the ids would give them while leaving every
    earlier name as it is: each a plain id (see `_plain_entry_file_names`) that no
    earlier name and no other new one already is. ``None`` otherwise (a duplicate,
    an id to encode or to shorten: the caller names them all again)."""
    names = _plain_entry_file_names(ids)
    if names is None or any(name in names_before for name in names):
        return None
    return names


def general_entry_file_names(ids: Sequence[object]) -> list[str]:
    """`entry_file_names` for any ids: each encoded, made unique, fitted."""
    bases = [
        encode_name(entry_id) if isinstance(entry_id, str) and entry_id else f"~{index}"
        for index, entry_id in enumerate(ids)
    ]
    return [name + ENTRY_SUFFIX for name in unique_names(bases, ENTRY_SUFFIX, PATH_NUMBER_RESERVE)]


def _plain_entry_file_names(ids: Sequence[object]) -> list[str] | None:
    """`entry_file_names` when every id is a file name as it is (`_are_plain`);
    ``None`` when any id needs the general path."""
    if not _are_plain(ids):
        return None
    return [entry_id + ENTRY_SUFFIX for entry_id in cast("Sequence[str]", ids)]


def _are_plain(ids: Sequence[object]) -> bool:
    """Whether every id is a file name as it is (the usual session: distinct short
    ids of safe characters), told by a few passes in C over all of them at once. A
    200,000-entry session's names then take 30 ms instead of 120 (issue 26 point 6)."""
    try:
        joined = "\n".join(cast("Sequence[str]", ids))  # a non-str id: TypeError
    except TypeError:
        return False
    names = cast("Sequence[str]", ids)
    if _ESCAPE_RE.search(joined) is not None or not joined.isascii():
        return False  # to encode, or to measure in bytes: the general path
    distinct = set(names)
    if len(distinct) != len(names) or not distinct.isdisjoint(("", ".", "..")):
        return False
    limit = NAME_MAX - PATH_NUMBER_RESERVE - len(ENTRY_SUFFIX)
    return not names or max(map(len, names)) <= limit
