"""AgentMessage builders and file readers shared by every test directory (tests/ is on
pytest's pythonpath): messages shaped like the agents write them, with increasing
millisecond timestamps so ordering-sensitive code sees distinct times."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from core.jsonl import parse_jsonl_lenient

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


def file_objects(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON object line of a file, header first."""
    return parse_jsonl_lenient(Path(path).read_bytes())
