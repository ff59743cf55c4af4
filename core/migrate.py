"""Format migrations v1 -> v2 -> v3, run in memory on every load.

Generated ids are deterministic (derived from the session id and the entry's position),
so a v1 file that is only browsed shows the same ids on every load and keeps them when
it is finally rewritten.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

__all__ = ["CURRENT_SESSION_VERSION", "migrate_session_entries"]

CURRENT_SESSION_VERSION: Final = 3


class _IdDeriver:
    """Hashes the session-id prefix once; each id then costs one copy + update (this
    runs for every entry of every v1 file that is browsed)."""

    __slots__ = ("_prefix",)

    def __init__(self, session_id: str) -> None:
        self._prefix = hashlib.sha256(f"{session_id}:".encode("utf-8", "surrogatepass"))

    def derive(self, position: int, taken: set[str]) -> str:
        attempt = 0
        while True:
            digest = self._prefix.copy()
            digest.update(
                str(position).encode() if attempt == 0 else f"{position}:{attempt}".encode()
            )
            candidate = digest.hexdigest()[:8]
            if candidate not in taken:
                return candidate
            attempt += 1


def _version_of(header: dict[str, Any]) -> int:
    version = header.get("version")
    # bool is an int subclass; a header saying `true` is not a version.
    if isinstance(version, int) and not isinstance(version, bool):
        return version
    return 1


def _migrate_v1_to_v3(entries: list[dict[str, Any]]) -> None:
    """v1 -> v2: chain every entry in file order and turn compaction indexes into ids;
    and v2 -> v3 (`_migrate_v2_to_v3`) in the same walk of the entries (a browsed v1
    file is migrated on every first read: issue 26)."""
    header = entries[0]
    ids = _IdDeriver(str(header.get("id", "")))
    taken: set[str] = {e["id"] for e in entries[1:] if isinstance(e.get("id"), str)}
    compactions: list[dict[str, Any]] = []
    previous: str | None = None
    for position, entry in enumerate(entries[1:], start=1):
        entry_id = entry.get("id")
        if not isinstance(entry_id, str):
            entry_id = ids.derive(position, taken)
            taken.add(entry_id)
            entry["id"] = entry_id
            entry["parentId"] = previous
        elif "parentId" not in entry:
            entry["parentId"] = previous
        previous = entry_id
        kind = entry.get("type")
        if kind == "compaction":
            compactions.append(entry)  # its index may name a later entry: after the ids
        elif kind == "message":
            _hook_message_to_custom(entry)
    # The index counts the header as 0, i.e. it is a position in `entries` itself.
    for entry in compactions:
        if "firstKeptEntryIndex" not in entry:
            continue
        index = entry.pop("firstKeptEntryIndex")
        if (
            "firstKeptEntryId" not in entry
            and isinstance(index, int)
            and not isinstance(index, bool)
            and 0 < index < len(entries)
        ):
            entry["firstKeptEntryId"] = entries[index]["id"]
    header["version"] = 3


def _hook_message_to_custom(entry: dict[str, Any]) -> None:
    """v3 renamed the ``hookMessage`` role to ``custom`` (``entry`` is a message)."""
    message = entry.get("message")
    if isinstance(message, dict) and message.get("role") == "hookMessage":
        message["role"] = "custom"


def _migrate_v2_to_v3(entries: list[dict[str, Any]]) -> None:
    for entry in entries[1:]:
        if entry.get("type") == "message":
            _hook_message_to_custom(entry)
    entries[0]["version"] = 3


def migrate_session_entries(entries: list[dict[str, Any]]) -> bool:
    """Bring ``entries`` (header first) to the current version in place.

    Returns True when anything changed; the caller then owes the file a full rewrite.
    Entries that already have ids are never renumbered, so this is idempotent.
    """
    if not entries:
        return False
    version = _version_of(entries[0])
    if version >= CURRENT_SESSION_VERSION:
        return False
    if version < 2:
        _migrate_v1_to_v3(entries)
    elif version < 3:
        _migrate_v2_to_v3(entries)
    return True
