"""The new bytes of a session file whose header or entries changed in memory.

A rewrite must change only the lines it has to (spec section 7): every other line
keeps its exact bytes, including lines the loader skips as malformed, lines other
processes wrote, and stored content the size rules would cut today (they apply to new
entries only). So the file is walked line by line and only these are re-serialised:

* the header line, when the header differs from the one in memory (title, cwd);
* omp 18's title slot (`core.title_slot`), when the title it carries is not the one in
  memory; a file without a slot gets none (pi 0.73 cannot read one);
* with a pending migration (the stored header is v1/v2): the lines migration changes,
  migrated from their own stored form, so blob refs and long content stay as stored;
* with ``edited`` (after in-place edits): the entries whose content differs from what
  is stored;

and entries that are in memory but not yet on disk are added after what the caller
had read (``known_end``), before lines others appended since.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.jsonl import dumps_line, is_header, loads
from core.migrate import CURRENT_SESSION_VERSION, migrate_session_entries
from core.title_slot import Slot, fold_title_slot, slot_bytes, split_title_slot, title_of_slot

__all__ = ["NotASessionFileError", "rewrite_session_lines"]

Entry = dict[str, Any]
#: (stored entry as parsed and migrated, its raw line) -> new line, or None to keep it.
EditedLine = Callable[[Entry, bytes], bytes | None]


class NotASessionFileError(ValueError):
    """The stored file has no session header any more."""


def _parse(raw: bytes) -> Entry | None:
    try:
        obj = loads(raw)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _split_lines(data: bytes) -> list[bytes]:
    """Lines with their ``\\n`` (``data`` ends with one: it holds complete lines)."""
    return data.splitlines(keepends=True) if b"\r" not in data else _split_on_newline(data)


def _split_on_newline(data: bytes) -> list[bytes]:
    # splitlines() also splits on \r and friends; JSONL lines end at \n only.
    parts = data.split(b"\n")
    tail = parts.pop()
    lines = [part + b"\n" for part in parts]
    if tail:
        lines.append(tail)
    return lines


def _known_cut(data: bytes, known_end: int) -> int:
    """Where the lines the caller had read end (a line it read in part counts)."""
    if known_end <= 0:
        return 0
    if known_end >= len(data) or data[known_end - 1 : known_end] == b"\n":
        return min(known_end, len(data))
    newline = data.find(b"\n", known_end)
    return len(data) if newline < 0 else newline + 1


def _stored_version(header: Entry) -> int:
    version = header.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        return version
    return 1


def rewrite_session_lines(
    data: bytes,
    known_end: int,
    header: Entry,
    *,
    unwritten: Sequence[bytes] = (),
    edited: EditedLine | None = None,
    title_slot: Slot | None = None,
) -> tuple[bytes, int]:
    """The rewritten file, and the length of its part the caller's memory reflects
    (everything up to and including ``unwritten``; the rest is for a catch-up).

    ``data``: the file's complete lines; ``known_end``: how much of it the caller had
    read; ``header``: the header as it must be stored; ``unwritten``: serialised entries
    not on disk yet; ``title_slot``: the slot that must lead a file that has one.
    Raises `NotASessionFileError` when ``data`` has no header line.
    """
    cut = _known_cut(data, known_end)
    lines = _split_lines(data[:cut])
    stored_slot = split_title_slot(data)[0] if lines else None
    header_at, stored_header = _find_header(lines, 1 if stored_slot is not None else 0)
    migrating = _stored_version(stored_header) < CURRENT_SESSION_VERSION
    replaced: dict[int, bytes] = {}
    if migrating or edited is not None:
        replaced = _changed_lines(lines, header_at, stored_header, migrating, edited)
    as_stored = _parse(lines[header_at])  # the header as stored, read as loaders read it
    if as_stored is None or fold_title_slot(as_stored, stored_slot) != header:
        replaced[header_at] = dumps_line(header)
    if (
        stored_slot is not None
        and title_slot is not None
        and _slot_key(title_slot) != _slot_key(stored_slot)
    ):
        replaced[0] = slot_bytes(title_slot)
    if not replaced:
        known = data[:cut]
    else:
        known = b"".join(replaced.get(i, raw) for i, raw in enumerate(lines))
    if known and not known.endswith(b"\n"):
        known += b"\n"
    reflected = known + b"".join(unwritten)
    return reflected + data[cut:], len(reflected)


def _slot_key(slot: Slot) -> tuple[str | None, str | None, str]:
    return (*title_of_slot(slot), slot["updatedAt"])


def _find_header(lines: list[bytes], start: int) -> tuple[int, Entry]:
    for index in range(start, len(lines)):
        raw = lines[index]
        obj = _parse(raw)
        if obj is None:
            continue
        if not is_header(obj):
            break
        return index, obj
    raise NotASessionFileError("the file has no session header")


def _changed_lines(
    lines: list[bytes],
    header_at: int,
    stored_header: Entry,
    migrating: bool,
    edited: EditedLine | None,
) -> dict[int, bytes]:
    """Replacement lines by index: what migration changed, then what was edited.
    ``stored_header`` is migrated in place (the caller compares it afterwards)."""
    indexes: list[int] = [header_at]
    objects: list[Entry] = [stored_header]
    for index in range(header_at + 1, len(lines)):
        obj = _parse(lines[index])
        if obj is not None:
            indexes.append(index)
            objects.append(obj)
    replaced: dict[int, bytes] = {}
    if migrating:
        migrate_session_entries(objects)
        for index, obj in zip(indexes[1:], objects[1:], strict=True):
            if obj != _parse(lines[index]):
                replaced[index] = dumps_line(obj)
    if edited is not None:
        for index, obj in zip(indexes[1:], objects[1:], strict=True):
            line = edited(obj, lines[index])
            if line is not None:
                replaced[index] = line
    return replaced
