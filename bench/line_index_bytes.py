"""What another agent's reader (`core.formats.jsonl_source.JsonlSession`) holds per
line besides the file's bytes, measured with tracemalloc: the figure behind
``LINE_INDEX_BYTES``, which the session cache counts per line (`memory_cost`).

Each reader opens a file of ``--lines`` lines shaped as its agent writes them (36-char
uuids, a millisecond timestamp each, a response's blocks on lines of their own, tool
calls and results), once read whole and once read where it is (no bytes held); the
index's bytes are what tracemalloc holds after the open and a first look at the leaf,
less the file's bytes held. Prints bytes a line for each. Gemini's older whole-file
``.json`` document (`GeminiDocumentSession`: each record's bytes held apart, as one
entry) is measured too, from the same records, less those bytes.

    .venv/bin/python -m bench.line_index_bytes [--lines 100000]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.copilot import CopilotSession
from core.formats.cursor import CursorTranscriptSession
from core.formats.gemini import GeminiDocumentSession, GeminiSession
from core.formats.jsonl_source import JsonlSession
from core.formats.lines import set_whole_read_limit
from core.formats.qwen import QwenSession

TEXT = "a few words of text "


def _stamp(n: int) -> str:
    """A distinct millisecond timestamp for line ``n`` (as agents write them)."""
    hours, minutes, seconds = n // 3_600_000 % 24, n // 60_000 % 60, n // 1000 % 60
    return f"2026-03-01T{hours:02d}:{minutes:02d}:{seconds:02d}.{n % 1000:03d}Z"


def claude_lines(count: int) -> Iterator[dict[str, Any]]:
    """Claude Code's lines: a prompt, a response's thinking, text and tool call on a
    line each (one message id), the tool's result."""
    session, parent = str(uuid.uuid4()), None
    common = {"isSidechain": False, "userType": "external", "cwd": "/home/me/app"}
    common |= {"sessionId": session, "version": "2.1.3", "gitBranch": "main"}
    n = 0
    while True:
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        call = f"toolu_{uuid.uuid4().hex[:24]}"
        usage = {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5}
        blocks = [
            {"type": "thinking", "thinking": TEXT, "signature": "sig"},
            {"type": "text", "text": TEXT},
            {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": "ls"}},
        ]
        lines: list[tuple[str, dict[str, Any]]] = [
            ("user", {"message": {"role": "user", "content": TEXT}}),
            *(
                (
                    "assistant",
                    {
                        "message": {
                            "id": message_id,
                            "type": "message",
                            "role": "assistant",
                            "model": "claude-sonnet-4-5",
                            "content": [block],
                            "usage": usage,
                        },
                        "requestId": f"req_{message_id}",
                    },
                )
                for block in blocks
            ),
            ("user", {"message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call, "content": TEXT}
            ]}}),
        ]  # fmt: skip
        for kind, extra in lines:
            if n == count:
                return
            own = str(uuid.uuid4())
            yield {"parentUuid": parent, **common, "type": kind, "uuid": own,
                   "timestamp": _stamp(n), **extra}  # fmt: skip
            parent, n = own, n + 1


def codex_lines(count: int) -> Iterator[dict[str, Any]]:
    """A Codex rollout: its meta line, then turns of a turn context, the prompt (item
    and event), a call and its output, the answer, a token count."""
    meta = {"id": str(uuid.uuid4()), "cwd": "/home/me/app", "cli_version": "0.63.0"}
    yield {"timestamp": _stamp(0), "type": "session_meta", "payload": meta}
    n = 1
    while True:
        call = f"call_{uuid.uuid4().hex[:24]}"
        total = {"input_tokens": n, "output_tokens": 1, "total_tokens": n + 1}
        turn = [
            ("turn_context", {"cwd": "/home/me/app", "model": "gpt-5", "effort": "medium"}),
            ("response_item", {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": TEXT}]}),
            ("event_msg", {"type": "user_message", "message": TEXT}),
            ("response_item", {"type": "function_call", "name": "shell",
                               "arguments": "{}", "call_id": call}),
            ("response_item", {"type": "function_call_output", "call_id": call,
                               "output": TEXT}),
            ("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": TEXT}]}),
            ("event_msg", {"type": "token_count", "info": {"total_token_usage": total}}),
        ]  # fmt: skip
        for kind, payload in turn:
            if n == count:
                return
            yield {"timestamp": _stamp(n), "type": kind, "payload": payload}
            n += 1


def qwen_lines(count: int) -> Iterator[dict[str, Any]]:
    """Qwen Code 0.24's records: a prompt, the model's answer with a call, its result."""
    session, parent = str(uuid.uuid4()), None
    common = {"sessionId": session, "cwd": "/home/me/app", "version": "0.24.4"}
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 2, "cachedContentTokenCount": 1,
             "thoughtsTokenCount": 0, "totalTokenCount": 13}  # fmt: skip
    n = 0
    while True:
        call = {"functionCall": {"id": uuid.uuid4().hex, "name": "ls", "args": {}}}
        reply = {"functionResponse": {"name": "ls", "response": {"output": TEXT}}}
        turn = [
            ("user", {"message": {"role": "user", "parts": [{"text": TEXT}]}}),
            ("assistant", {"message": {"role": "model", "parts": [{"text": TEXT}, call]},
                           "model": "qwen3-coder-plus", "usageMetadata": usage}),
            ("tool_result", {"message": {"role": "user", "parts": [reply]}}),
        ]  # fmt: skip
        for kind, extra in turn:
            if n == count:
                return
            own = str(uuid.uuid4())
            yield {"uuid": own, "parentUuid": parent, **common, "timestamp": _stamp(n),
                   "type": kind, **extra}  # fmt: skip
            parent, n = own, n + 1


def gemini_lines(count: int) -> Iterator[dict[str, Any]]:
    """Gemini CLI's records: its header, then a prompt and the model's answer with a
    finished tool call, each with an id."""
    yield {"sessionId": str(uuid.uuid4()), "projectHash": uuid.uuid4().hex, "kind": "main"}
    tokens = {"input": 10, "output": 2, "cached": 0, "thoughts": 0, "tool": 0, "total": 12}
    n = 1
    while n < count:
        call = {
            "id": uuid.uuid4().hex,
            "name": "ls",
            "args": {},
            "status": "success",
            "result": [{"functionResponse": {"name": "ls", "response": {"output": TEXT}}}],
        }
        yield {"id": str(uuid.uuid4()), "timestamp": _stamp(n), "type": "user",
               "content": [{"text": TEXT}]}  # fmt: skip
        if n + 1 < count:
            yield {"id": str(uuid.uuid4()), "timestamp": _stamp(n + 1), "type": "gemini",
                   "content": TEXT, "thoughts": [], "model": "gemini-2.5-pro",
                   "tokens": tokens, "toolCalls": [call]}  # fmt: skip
        n += 2


def copilot_lines(count: int) -> Iterator[dict[str, Any]]:
    """Copilot CLI's events: a prompt, a turn's start, the reply, its end, each with
    an id and its parent's."""
    parent = None
    turn = [
        ("user.message", {"content": TEXT, "transformedContent": TEXT}),
        ("assistant.turn_start", {"turnId": "0"}),
        ("assistant.message", {"content": TEXT, "toolRequests": []}),
        ("assistant.turn_end", {"turnId": "0"}),
    ]
    for n in range(count):
        kind, data = turn[n % len(turn)]
        own = str(uuid.uuid4())
        yield {"type": kind, "data": data, "id": own, "timestamp": _stamp(n), "parentId": parent}
        parent = own


def cursor_lines(count: int) -> Iterator[dict[str, Any]]:
    """Cursor's agent transcript: a line per message, its role and text (no ids)."""
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        yield {"role": role, "message": {"content": [{"type": "text", "text": TEXT}]}}


READERS: dict[str, tuple[Callable[[int], Iterator[dict[str, Any]]], type[JsonlSession[Any]]]] = {
    "claude": (claude_lines, ClaudeSession),
    "codex": (codex_lines, CodexSession),
    "qwen": (qwen_lines, QwenSession),
    "gemini": (gemini_lines, GeminiSession),
    "copilot": (copilot_lines, CopilotSession),
    "cursor": (cursor_lines, CursorTranscriptSession),
}


def held_per_line(path: Path, reader: Callable[[Path], SessionSource]) -> tuple[float, int]:
    """tracemalloc's bytes held after opening ``path`` and a look at its leaf, less the
    file's bytes held, a line; and the lines the reader holds a record of."""
    gc.collect()
    tracemalloc.start()
    try:
        source = reader(path)
        source.leaf_index()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    if isinstance(source, GeminiDocumentSession):
        file_bytes = sum(len(raw) for raw in source._raw)  # (its records' bytes, apart)
    else:
        assert isinstance(source, JsonlSession)
        file_bytes = source._file.memory_cost()
    lines = len(source)
    return (held - file_bytes) / lines, lines


def gemini_document(path: Path, count: int) -> Path:
    """`gemini_lines` as the older whole-file document: the header's fields and its
    ``messages``."""
    header, *messages = gemini_lines(count)
    path.write_bytes(orjson.dumps(header | {"messages": messages}))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=100_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        for name, (lines, reader) in READERS.items():
            path = Path(work) / f"{name}.jsonl"
            with open(path, "wb") as out:
                for line in lines(args.lines):
                    out.write(orjson.dumps(line) + b"\n")
            whole, count = held_per_line(path, reader)
            before = set_whole_read_limit(0)
            try:
                in_place, _ = held_per_line(path, reader)
            finally:
                set_whole_read_limit(before)
            print(
                f"{name:7} {count:,} lines ({path.stat().st_size / 1e6:.0f} MB): "
                f"{whole:.0f} bytes a line read whole, {in_place:.0f} read where it is; "
                f"LINE_INDEX_BYTES {reader.LINE_INDEX_BYTES}"
            )
            path.unlink()
        document = gemini_document(Path(work) / "gemini.json", args.lines)
        held, count = held_per_line(document, GeminiDocumentSession)
        print(
            f"gemini document {count:,} records ({document.stat().st_size / 1e6:.0f} MB): "
            f"{held:.0f} bytes a record; LINE_INDEX_BYTES "
            f"{GeminiDocumentSession.LINE_INDEX_BYTES}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
