"""Gemini CLI session records in the documented format (0.61's ``chatRecordingService``:
see ``core/formats/gemini_messages.py``), for tests: the fixtures are written by these,
never copied from a real session.

Every helper returns one record; `write_jsonl` writes them (``bytes`` as given: junk,
a torn tail), `write_document` an older whole-file ``.json`` session, `gemini_home` a
``~/.gemini`` with ``projects.json`` and a project's ``.project_root``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION_ID = "5e55a0b1-2c3d-4e5f-8a9b-0c1d2e3f4a5b"
PROJECT_HASH = "ab" * 32
CWD = "/home/me/webapp"
PROJECT = "webapp"
MODEL = "gemini-2.5-flash"

Record = dict[str, Any]


def ts(second: int) -> str:
    return f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}.000Z"


def header(second: int = 0, session_id: str = SESSION_ID, kind: str = "main") -> Record:
    return {
        "sessionId": session_id,
        "projectHash": PROJECT_HASH,
        "startTime": ts(second),
        "lastUpdated": ts(second),
        "kind": kind,
    }


def user(message_id: str, content: Any, second: int) -> Record:
    parts = [{"text": content}] if isinstance(content, str) else content
    return {"id": message_id, "timestamp": ts(second), "type": "user", "content": parts}


def tokens(inp: int, out: int, cached: int = 0) -> dict[str, int]:
    return {"input": inp, "output": out, "cached": cached, "thoughts": 0, "tool": 0,
            "total": inp + out}  # fmt: skip


def gemini(message_id: str, text: str, second: int, **extra: Any) -> Record:
    record = {"id": message_id, "timestamp": ts(second), "type": "gemini", "content": text,
              "thoughts": [], "model": MODEL}  # fmt: skip
    record.update(extra)
    return record


def tool_call(call_id: str, name: str, args: dict[str, Any], output: str) -> Record:
    """A finished call as the record stores it: its result a ``functionResponse``."""
    response = {"id": call_id, "name": name, "response": {"output": output}}
    return {"id": call_id, "name": name, "args": args, "status": "success",
            "result": [{"functionResponse": response}]}  # fmt: skip


def function_response(message_id: str, call: Record, second: int) -> Record:
    """The user record Gemini writes after a tool ran: the response again."""
    return user(message_id, call["result"], second)


def set_(**patch: Any) -> Record:
    return {"$set": patch}


def rewind(message_id: str) -> Record:
    return {"$rewindTo": message_id}


def write_jsonl(path: Path, records: list[Record | bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in records]
    path.write_bytes(b"".join(lines))
    return path


def write_document(path: Path, messages: list[Record], **metadata: Any) -> Path:
    """An older ``session-*.json``: one pretty-printed document."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {**header(), **metadata, "messages": messages}
    path.write_text(json.dumps(document, indent=2))
    return path


def gemini_home(root: Path, project: str = PROJECT, cwd: str = CWD) -> Path:
    """``root/.gemini`` with ``projects.json`` naming ``cwd`` ``project`` and that
    project's ``tmp/<project>/chats/`` (returned)."""
    gemini = root / ".gemini"
    chats = gemini / "tmp" / project / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    (gemini / "projects.json").write_text(json.dumps({"projects": {cwd: project}}))
    (chats.parent / ".project_root").write_text(cwd)
    return chats
