"""Qwen Code 0.24 session records in the documented format (``chatRecordingService``:
see ``core/formats/qwen.py``), for tests: the fixtures are written by these, never
copied from a real session. `ts` and `write_jsonl` are the Gemini fixtures' (Qwen Code
is a fork of Gemini CLI)."""

from __future__ import annotations

from typing import Any

from support.gemini_cli import ts, write_jsonl

__all__ = ["SESSION_ID", "record", "system", "write_jsonl"]

SESSION_ID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
CWD = "/home/me/tool"
ENC = "-home-me-tool"
MODEL = "qwen3-coder-plus"

Record = dict[str, Any]


def record(kind: str, uuid: str, parent: str | None, second: int, **extra: Any) -> Record:
    found: Record = {
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": SESSION_ID,
        "timestamp": ts(second),
        "type": kind,
        "cwd": CWD,
        "version": "0.24.4",
        "gitBranch": "main",
    }
    found.update(extra)
    return found


def user(uuid: str, parent: str | None, text: str, second: int, **extra: Any) -> Record:
    message = {"role": "user", "parts": [{"text": text}]}
    return record("user", uuid, parent, second, message=message, **extra)


def assistant(uuid: str, parent: str | None, parts: list[Any], second: int, **extra: Any) -> Record:
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 2, "cachedContentTokenCount": 1}
    message = {"role": "model", "parts": parts}
    return record(
        "assistant", uuid, parent, second, message=message, model=MODEL, usageMetadata=usage,
        **extra,
    )  # fmt: skip


def tool_result(
    uuid: str, parent: str, call_id: str, name: str, output: str, second: int
) -> Record:
    response = {"functionResponse": {"id": call_id, "name": name, "response": {"output": output}}}
    message = {"role": "user", "parts": [response]}
    return record("tool_result", uuid, parent, second, message=message)


def system(uuid: str, parent: str | None, subtype: str, second: int, **payload: Any) -> Record:
    return record("system", uuid, parent, second, subtype=subtype, systemPayload=payload)
