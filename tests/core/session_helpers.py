"""Message builders and file helpers shared by the core manager tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.jsonl import parse_jsonl_lenient

_clock = [1_700_000_000_000]


def _next_ms() -> int:
    _clock[0] += 1
    return _clock[0]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": _next_ms()}


def assistant(
    text: str, *, provider: str = "anthropic", model: str = "claude-x", usage: Any = None
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": provider,
        "model": model,
        "stopReason": "stop",
        "timestamp": _next_ms(),
    }
    if usage is not None:
        message["usage"] = usage
    return message


def file_objects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON object line of a file (header first)."""
    return parse_jsonl_lenient(Path(path).read_bytes())


def file_lines(path: str | os.PathLike[str]) -> list[bytes]:
    return Path(path).read_bytes().splitlines()


def temp_files(directory: str | os.PathLike[str]) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".tmp")]
