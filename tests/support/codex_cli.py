"""OpenAI Codex CLI rollout lines in the documented format, for tests (written here,
never copied from a real rollout). `write_jsonl` is the Claude helper's: the same
JSONL rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import zstandard

from support.claude_code import write_jsonl

__all__ = ["write_jsonl", "write_zst"]

THREAD_ID = "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b"
CWD = "/home/me/app"


def ts(second: int) -> str:
    return f"2026-03-02T09:{second // 60:02d}:{second % 60:02d}.000Z"


def line(kind: str, payload: dict[str, Any], second: int) -> dict[str, Any]:
    return {"timestamp": ts(second), "type": kind, "payload": payload}


def session_meta(
    second: int = 0,
    thread_id: str = THREAD_ID,
    cwd: str = CWD,
    source: Any = "cli",
    **extra: Any,
) -> dict[str, Any]:
    payload = {
        "id": thread_id,
        "timestamp": ts(second),
        "cwd": cwd,
        "originator": "codex_cli_rs",
        "cli_version": "0.63.0",
        "source": source,
        "model_provider": "openai",
        "base_instructions": {"text": "You are Codex."},
        "git": {"commit_hash": "abc123", "branch": "main", "repository_url": "git@x:me/app.git"},
    }
    payload.update(extra)
    return line("session_meta", payload, second)


def sub_agent_source(parent: str, depth: int = 1) -> dict[str, Any]:
    spawn = {
        "parent_thread_id": parent,
        "depth": depth,
        "agent_nickname": "scout",
        "agent_role": "explorer",
    }
    return {"subagent": {"thread_spawn": spawn}}


def message(role: str, *texts: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": t} for t in texts]}


def item(payload: dict[str, Any], second: int) -> dict[str, Any]:
    return line("response_item", payload, second)


def event(payload: dict[str, Any], second: int) -> dict[str, Any]:
    return line("event_msg", payload, second)


def turn_context(model: str, second: int) -> dict[str, Any]:
    payload = {
        "cwd": CWD,
        "approval_policy": "on-request",
        "sandbox_policy": {"mode": "workspace-write"},
        "model": model,
        "effort": "medium",
        "summary": "auto",
    }
    return line("turn_context", payload, second)


def token_count(inp: int, cached: int, out: int, second: int) -> dict[str, Any]:
    total = {
        "input_tokens": inp,
        "cached_input_tokens": cached,
        "output_tokens": out,
        "reasoning_output_tokens": 0,
        "total_tokens": inp + out,
    }
    info = {"total_token_usage": total, "last_token_usage": total, "model_context_window": 272000}
    return event({"type": "token_count", "info": info, "rate_limits": None}, second)


def write_zst(path: Path, lines: list[dict[str, Any] | bytes]) -> Path:
    plain = write_jsonl(path.with_suffix(""), lines)
    path.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    plain.unlink()
    return path
