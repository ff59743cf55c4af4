"""Helpers for the write tests: real sessions on disk, an agent writing behind our back,
and a storage that fails like a full (or broken) disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.jsonl import dumps_line
from core.storage import FileSessionStorage, FileSessionWriter, PathArg, SessionWriter, WriterMode
from support.agent_messages import assistant, user
from support.fixture_paths import fixture_path as fixture_path  # re-exported for the write tests


def append_raw_line(path: PathArg, obj: dict[str, Any]) -> None:
    """What a running agent does: one O_APPEND write of one line, behind our back."""
    with open(path, "ab") as fh:
        fh.write(dumps_line(obj))


class FailingStorage(FileSessionStorage):
    """The real filesystem, except that writes fail with `fail_errno` while it is set
    (ENOSPC: a full disk; EIO: a broken one)."""

    def __init__(self) -> None:
        self.fail_errno: int | None = None

    def open_writer(self, path: PathArg, mode: WriterMode = "a") -> SessionWriter:
        return _MaybeFullWriter(self, path, mode)

    def append_synced(
        self, path: str, data: bytes, expected_end: int = -1
    ) -> tuple[int, int, os.stat_result | None]:
        # (a guest's append: the mount's, without a writer object)
        self.fail_if_set()
        return super().append_synced(path, data, expected_end)

    def fail_if_set(self) -> None:
        if self.fail_errno is not None:
            raise OSError(self.fail_errno, os.strerror(self.fail_errno))


class _MaybeFullWriter(FileSessionWriter):
    def __init__(self, storage: FailingStorage, path: PathArg, mode: WriterMode) -> None:
        super().__init__(path, mode)
        self._storage = storage

    def write(self, data: bytes) -> None:
        self._storage.fail_if_set()
        super().write(data)


def v1_session(agent_dir: Path) -> Path:
    """A small v1 file (no ids, no version) with a compaction index and a hookMessage."""
    project = agent_dir / "sessions" / "--work-old--"
    project.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "type": "session",
            "id": "old-session",
            "timestamp": "2025-01-01T00:00:00.000Z",
            "cwd": "/work/old",
        },
        {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": user("hi")},
        {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z", "message": assistant("hello")},
        {
            "type": "message",
            "timestamp": "2025-01-01T00:00:03.000Z",
            "message": {"role": "hookMessage", "content": "hook", "timestamp": 1},
        },
        {
            "type": "compaction",
            "timestamp": "2025-01-01T00:00:04.000Z",
            "summary": "s",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 10,
        },
    ]
    path = project / "2025-01-01T00-00-00-000Z_old-session.jsonl"
    path.write_bytes(b"".join(dumps_line(obj) for obj in lines))
    return path
