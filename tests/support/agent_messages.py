"""AgentMessage builders, a small branched session and file readers shared by every
test directory (tests/ is on pytest's pythonpath): messages shaped like the agents
write them, with increasing millisecond timestamps so ordering-sensitive code sees
distinct times."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import orjson

from core.jsonl import parse_jsonl_lenient
from core.manager import SessionManager
from core.storage import SessionStorage

_clock = itertools.count(1_700_000_000_001)


def next_ms() -> int:
    return next(_clock)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": next_ms()}


def assistant(
    text: str, *, provider: str = "anthropic", model: str = "claude-x", usage: Any = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": provider,
        "model": model,
        "stopReason": "stop",
        "timestamp": next_ms(),
    }
    if usage is not None:
        message["usage"] = usage
    return message


def user_entry(entry_id: object, parent: object, text: str = "t", **extra: object) -> dict:
    """A raw ``message`` entry with a plain-string user message and fixed time stamps,
    as the hand-written files of the hostile-input tests hold it: ``entry_id`` and
    ``parent`` may be any JSON value, ``extra`` adds or overrides keys."""
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 0},
        **extra,
    }


def file_objects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON object line of a file, header first."""
    return parse_jsonl_lenient(Path(path).read_bytes())


def make_session(
    agent_dir: Path, *, project: str = "--work-demo--", storage: SessionStorage | None = None
) -> Path:
    """A v3 session on disk: u1 -> a1 -> u2 -> a2, plus a second branch u3 under a1
    (the leaf). Returns the session file."""
    manager = SessionManager.create("/work/demo", agent_dir / "sessions" / project, storage=storage)
    with manager:
        manager.append_message(user("first question"))
        a1 = manager.append_message(assistant("first answer"))
        manager.append_message(user("second question"))
        manager.append_message(assistant("second answer"))
        manager.branch(a1)
        manager.append_message(user("other branch"))
        manager.ensure_on_disk()
    path = manager.get_session_file()
    assert path is not None
    return Path(path)


def write_header_session(directory: Path, stem: str, session_id: str) -> Path:
    """``<directory>/<stem>.jsonl`` holding a v3 header and nothing else: all a
    listing or ``by-id/`` reads of a session."""
    directory.mkdir(parents=True, exist_ok=True)
    header = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/w",
    }
    path = directory / f"{stem}.jsonl"
    path.write_bytes(orjson.dumps(header) + b"\n")
    return path
