"""Claude Code session lines in the documented format, for tests (the fixtures are
written by these, never copied from a real session).

Every helper returns one line's object; `write_jsonl` writes them (``raw`` lines as
given: junk, a torn tail). Times are ``2026-03-01T10:MM:SS.000Z`` for a second count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

SESSION_ID = "0f0e0d0c-1111-4222-8333-444455556666"
CWD = "/home/me/app"
VERSION = "2.1.3"
BRANCH = "main"


def ts(second: int) -> str:
    return f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}.000Z"


def chain_line(
    kind: str, uuid: str, parent: str | None, second: int, **extra: Any
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": SESSION_ID,
        "version": VERSION,
        "gitBranch": BRANCH,
        "type": kind,
        "uuid": uuid,
        "timestamp": ts(second),
    }
    line.update(extra)
    return line


def user(uuid: str, parent: str | None, content: Any, second: int, **extra: Any) -> dict[str, Any]:
    return chain_line(
        "user", uuid, parent, second, message={"role": "user", "content": content}, **extra
    )


def tool_result(
    uuid: str, parent: str, call_id: str, content: Any, second: int, is_error: bool = False
) -> dict[str, Any]:
    block = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": content,
        "is_error": is_error,
    }
    return user(uuid, parent, [block], second, toolUseResult={"stdout": "x"})


def usage(inp: int, out: int, read: int = 0, write: int = 0) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def assistant(
    uuid: str,
    parent: str | None,
    message_id: str,
    block: dict[str, Any],
    second: int,
    used: dict[str, int] | None = None,
    model: str = "claude-sonnet-4-5",
    **extra: Any,
) -> dict[str, Any]:
    """One block line of a response (Claude Code writes one line per content block)."""
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": None,
        "usage": used if used is not None else usage(10, 1),
    }
    return chain_line(
        "assistant", uuid, parent, second, message=message, requestId="req_" + message_id, **extra
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def image(media_type: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def system(
    uuid: str, parent: str | None, subtype: str, second: int, **extra: Any
) -> dict[str, Any]:
    return chain_line(
        "system", uuid, parent, second, subtype=subtype, content=subtype, level="info", **extra
    )


def compact_boundary(uuid: str, logical_parent: str, second: int) -> dict[str, Any]:
    return chain_line(
        "system",
        uuid,
        None,
        second,
        subtype="compact_boundary",
        content="Conversation compacted",
        level="info",
        logicalParentUuid=logical_parent,
        compactMetadata={"trigger": "auto", "preTokens": 155000},
    )


def attachment(uuid: str, parent: str, second: int) -> dict[str, Any]:
    return chain_line(
        "attachment", uuid, parent, second, attachment={"type": "hook_success", "content": "ok"}
    )


def write_jsonl(path: Path, lines: list[dict[str, Any] | bytes], end: bytes = b"\n") -> Path:
    """Write ``lines`` (objects as JSON, ``bytes`` as they are), each ending in ``end``
    except that a ``bytes`` last line is written without it (a torn tail)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = []
    for position, line in enumerate(lines):
        last = position == len(lines) - 1
        if isinstance(line, bytes):
            parts.append(line if last else line + end)
        else:
            parts.append(orjson.dumps(line) + end)
    path.write_bytes(b"".join(parts))
    return path
