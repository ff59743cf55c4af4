"""Session files in oh-my-pi 18's format, written by hand the way omp writes them.

The title slot is built here with the stdlib ``json`` module, independently of
``core.title_slot``, so a test that compares core's bytes with these can fail: key order
``type, v, title, source?, updatedAt, pad``, compact separators, raw UTF-8 (as
``JSON.stringify`` writes), padded with spaces in ``pad`` to exactly 256 bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SLOT_BYTES = 256
OMP_SESSION_ID = "019a0000-0000-7000-8000-000000000001"
HEADER_TIME = "2026-11-20T10:00:00.000Z"


def slot_line(title: str, source: str | None = "auto", updated_at: str = HEADER_TIME) -> bytes:
    """A 256-byte title slot line (no cutting: the title must fit)."""
    slot: dict[str, Any] = {"type": "title", "v": 1, "title": title}
    if source is not None:
        slot["source"] = source
    slot["updatedAt"] = updated_at
    slot["pad"] = ""
    bare = json.dumps(slot, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    slot["pad"] = " " * (SLOT_BYTES - len(bare))
    line = json.dumps(slot, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    assert len(line) == SLOT_BYTES, "title too long for a hand-made slot"
    return line


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def omp_header(
    session_id: str = OMP_SESSION_ID, cwd: str = "/work/app", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": HEADER_TIME,
        "cwd": cwd,
        **extra,
    }


def entry(kind: str, entry_id: str, parent: str | None, second: int, **body: Any) -> dict:
    return {
        "type": kind,
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2026-11-20T10:00:{second:02d}.000Z",
        **body,
    }


def user_msg(entry_id: str, parent: str | None, second: int, text: str) -> dict:
    message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}
    return entry("message", entry_id, parent, second, message=message)


def assistant_msg(entry_id: str, parent: str | None, second: int, text: str) -> dict:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "fake",
        "model": "fake-model",
        "stopReason": "stop",
        "timestamp": 0,
    }
    return entry("message", entry_id, parent, second, message=message)


def write_omp_session(
    path: Path,
    entries: list[dict[str, Any]],
    *,
    title: str = "",
    source: str | None = None,
    header: dict[str, Any] | None = None,
) -> Path:
    """A slot, the header, the entries: a file as omp 18 leaves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = slot_line(title, source) + line(header or omp_header())
    data += b"".join(line(e) for e in entries)
    path.write_bytes(data)
    return path


def conversation() -> list[dict[str, Any]]:
    """A short omp session using the entry types omp 18 adds: model_change (with
    resolvedModelIsFallback), thinking_level_change (configured), a user turn, a
    model_usage side call off the leaf, mode_change, credential_pin, ttsr_injection,
    the answer, a title_change (the leaf)."""
    return [
        entry(
            "model_change",
            "e0000001",
            None,
            1,
            model="fake/fake-model",
            role="default",
            resolvedModelIsFallback=False,
        ),
        entry(
            "thinking_level_change",
            "e0000002",
            "e0000001",
            2,
            thinkingLevel="off",
            configured="off",
        ),
        user_msg("e0000003", "e0000002", 3, "How do I list files?"),
        entry(
            "model_usage",
            "e0000004",
            "e0000003",
            4,
            purpose="title",
            api="openai-completions",
            provider="fake",
            model="fake-model",
            usage={"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12},
            stopReason="stop",
        ),
        entry("mode_change", "e0000005", "e0000003", 5, mode="plan"),
        entry("credential_pin", "e0000006", "e0000005", 6, provider="fake", hash="ab" * 32),
        entry("ttsr_injection", "e0000007", "e0000006", 7, injectedRules=["no-rm-rf"]),
        assistant_msg("e0000008", "e0000007", 8, "Use ls."),
        entry("title_change", "e0000009", "e0000008", 9, title="Listing files", source="auto"),
    ]


@contextmanager
def held_open(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another process keeping ``path`` open with ``O_APPEND`` for the block, as omp
    does from its first append of a run until it exits; killed and reaped after."""
    code = (
        "import os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
        "print('holding', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"holding\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
