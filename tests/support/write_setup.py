"""Shared setup for the write acceptance tests: a small agent dir made with core, the
session dir of its one session in the mount, and readers of the file on disk."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from core import SessionManager
from core.jsonl import parse_jsonl_report
from support.agent_messages import make_session
from support.mount import Mount

PROJECT = "--work-demo--"


def make_agent(root: Path) -> tuple[Path, Path]:
    """``<root>/agent`` with one session u1 -> a1 -> u2 -> a2 (and u3 under a1).
    Returns (agent dir, session file)."""
    agent = root / "agent"
    return agent, make_session(agent, project=PROJECT)


def session_dir(mount: Mount, session_file: Path) -> Path:
    return mount.path / "sessions" / session_file.parent.name / session_file.name[: -len(".jsonl")]


def on_disk(session_file: Path) -> SessionManager:
    """The session as core loads it from disk now (a fresh, independent load)."""
    return SessionManager.open(session_file, browse=True)


def disk_ids(session_file: Path) -> list[str]:
    return [e["id"] for e in on_disk(session_file).get_entries()]


def bad_lines(session_file: Path) -> list[int]:
    return parse_jsonl_report(session_file.read_bytes()).bad_lines


def errno_of(action: Callable[[], object]) -> int:
    """The errno an action fails with; 0 when it worked."""
    try:
        action()
    except OSError as exc:
        return exc.errno or -1
    return 0


def drop(directory: Path, name: str, data: bytes) -> None:
    """Create, write and close a file (close() raising is the point of many tests)."""
    fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_ctl(directory: Path) -> dict[str, str]:
    """A ``ctl`` read through the mount, as ``{field: value}`` (empty for none)."""
    status = {}
    for line in (directory / "ctl").read_text().splitlines():
        field, _, value = line.partition(": ")
        status[field.rstrip(":")] = value
    return status


def entry_id_of(link_target: str) -> str:
    """``entries/<id>.json`` -> ``<id>`` (ids here need no decoding)."""
    name = link_target.rsplit("/", 1)[-1]
    assert name.endswith(".json"), link_target
    return name[: -len(".json")]


__all__ = [
    "PROJECT",
    "bad_lines",
    "disk_ids",
    "drop",
    "entry_id_of",
    "errno_of",
    "make_agent",
    "on_disk",
    "read_ctl",
    "session_dir",
]
