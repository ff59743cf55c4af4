"""Message builders and file helpers shared by the core manager tests."""

from __future__ import annotations

import os
from pathlib import Path

from support.agent_messages import assistant, file_objects, user

__all__ = ["assistant", "file_lines", "file_objects", "temp_files", "user"]


def file_lines(path: str | os.PathLike[str]) -> list[bytes]:
    return Path(path).read_bytes().splitlines()


def temp_files(directory: str | os.PathLike[str]) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".tmp")]
