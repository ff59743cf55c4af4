"""What the mirror keeps between refreshes and restarts (``mirror-state.json``).

- ``files``: per ``<machine>/<rel>``, the generation and size materialised, when the mount
  last read it, and whether it was evicted to keep the mirror under its disk budget;
- ``failed``: objects that were not what the format says (a blob that does not hash to
  its name, a short segment, one without its final ``\\n``), by key with the ETag and size
  they had, so they are not fetched again until the store holds something else there.

The file is junk-tolerant (a hand-edited or torn one loses only the entries that are not
well formed) and rewritten only when something in it changed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .private import replace_privately

__all__ = ["FileState", "MirrorState"]

STATE_NAME = "mirror-state.json"
READ_GRAIN_NS = 60 * 10**9


@dataclass
class FileState:
    generation: int
    size: int
    #: when the mount last read the file (ns), for least-recently-read eviction
    read_ns: int = 0
    #: removed from disk to stay under ``--mirror-max-gb``; fetched again on demand
    evicted: bool = False


def _count(value: Any) -> int | None:
    """A non-negative JSON integer (``True`` is not one)."""
    return value if type(value) is int and value >= 0 else None


def _file_state(value: Any) -> FileState | None:
    if not isinstance(value, dict):
        return None
    generation, size = _count(value.get("generation")), _count(value.get("size"))
    read_ns = _count(value.get("read_ns", 0))
    if generation is None or size is None or read_ns is None:
        return None
    return FileState(generation, size, read_ns, value.get("evicted") is True)


def _failed_entry(value: Any) -> tuple[str, int] | None:
    if isinstance(value, list) and len(value) == 2:
        etag, size = value
        if isinstance(etag, str) and type(size) is int:
            return etag, size
    return None


class MirrorState:
    """The mirror's state; every method is thread-safe (the refresh runs a pool)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / STATE_NAME
        self._lock = threading.Lock()
        self._dirty = False
        self.files: dict[str, FileState] = {}
        self.failed: dict[str, tuple[str, int]] = {}
        self._load()

    def _load(self) -> None:
        try:
            loaded = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return
        if not isinstance(loaded, dict):
            return
        files, failed = loaded.get("files"), loaded.get("failed")
        for key, value in files.items() if isinstance(files, dict) else ():
            if (state := _file_state(value)) is not None:
                self.files[key] = state
        for key, value in failed.items() if isinstance(failed, dict) else ():
            if (entry := _failed_entry(value)) is not None:
                self.failed[key] = entry

    # -- files -------------------------------------------------------------------------

    def file(self, key: str) -> FileState | None:
        with self._lock:
            return self.files.get(key)

    def set_file(self, key: str, generation: int, size: int) -> None:
        with self._lock:
            known = self.files.get(key)
            read_ns = known.read_ns if known is not None else 0
            self.files[key] = FileState(generation, size, read_ns)
            self._dirty = True

    def kept_files(self) -> list[tuple[str, FileState]]:
        """The files on disk (not evicted), as copies."""
        with self._lock:
            return [
                (key, FileState(s.generation, s.size, s.read_ns))
                for key, s in self.files.items()
                if not s.evicted
            ]

    def evicted_keys(self) -> list[str]:
        with self._lock:
            return [key for key, state in self.files.items() if state.evicted]

    def evicted_count(self) -> int:
        with self._lock:
            return sum(state.evicted for state in self.files.values())

    def mark_read(self, key: str, now_ns: int) -> None:
        with self._lock:
            known = self.files.get(key)
            # To the minute: the order of eviction, not a rewrite of the state per read.
            if known is not None and now_ns - known.read_ns > READ_GRAIN_NS:
                known.read_ns = now_ns
                self._dirty = True

    def set_evicted(self, key: str, evicted: bool) -> None:
        with self._lock:
            known = self.files.get(key)
            if known is not None and known.evicted != evicted:
                known.evicted = evicted
                self._dirty = True

    # -- objects that failed -----------------------------------------------------------

    def failed_before(self, key: str) -> bool:
        with self._lock:
            return key in self.failed

    def has_failed(self, key: str, etag: str, size: int) -> bool:
        """True when ``key`` failed before and still has the same tag and size."""
        with self._lock:
            return self.failed.get(key) == (etag, size)

    def record_failure(self, key: str, etag: str, size: int) -> None:
        with self._lock:
            self.failed[key] = (etag, size)
            self._dirty = True

    def forget_failure(self, key: str) -> None:
        with self._lock:
            if self.failed.pop(key, None) is not None:
                self._dirty = True

    def failed_count(self) -> int:
        with self._lock:
            return len(self.failed)

    # -- the file ----------------------------------------------------------------------

    def save(self) -> bool:
        """Write the state if anything changed since the last save; True if written."""
        with self._lock:
            if not self._dirty:
                return False
            data = orjson.dumps(
                {
                    "files": {
                        key: {
                            "generation": state.generation,
                            "size": state.size,
                            "read_ns": state.read_ns,
                            "evicted": state.evicted,
                        }
                        for key, state in self.files.items()
                    },
                    "failed": {key: list(entry) for key, entry in self.failed.items()},
                }
            )
            self._dirty = False
        replace_privately(self.path, data)
        return True
