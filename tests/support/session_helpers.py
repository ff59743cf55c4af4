"""Message builders and file helpers shared by the core manager tests."""

from __future__ import annotations

import os
from pathlib import Path

from core import SessionManager
from support.agent_messages import assistant, file_objects, user

__all__ = [
    "assistant",
    "file_lines",
    "file_objects",
    "session_with_one_exchange",
    "temp_files",
    "user",
]


def file_lines(path: str | os.PathLike[str]) -> list[bytes]:
    return Path(path).read_bytes().splitlines()


def temp_files(directory: str | os.PathLike[str]) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".tmp")]


def session_with_one_exchange(directory: Path, text: str, cwd: str = "/work/demo") -> Path:
    """A new session file in ``directory`` (made if missing) holding ``text`` from the
    user and an ``ok`` from the assistant."""
    directory.mkdir(parents=True, exist_ok=True)
    manager = SessionManager.create(cwd, directory)
    with manager:
        manager.append_message(user(text))
        manager.append_message(assistant("ok"))
    file = manager.get_session_file()
    assert file is not None
    return Path(file)
