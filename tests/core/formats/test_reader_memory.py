"""What the Claude and Codex readers hold stays within what they tell the session
cache (``memory_cost``), measured with tracemalloc on corpus-shaped sessions, and a
load never holds every parsed line at once (its peak stays near the file's size)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import claude_code as cc
from support import codex_cli as cx

from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.lines import set_whole_read_limit

TEXT = "lorem ipsum dolor sit amet " * 40
TURNS = 300


def _claude_file(tmp_path: Path) -> Path:
    lines: list[dict[str, Any] | bytes] = []
    parent = None
    for turn in range(TURNS):
        lines.append(cc.user(f"u{turn}", parent, f"question {turn} {TEXT}", turn))
        parent = f"u{turn}"
        blocks = [
            cc.thinking(TEXT),
            cc.text(TEXT),
            cc.tool_use(f"t{turn}", "Bash", {"command": "ls"}),
        ]
        for number, block in enumerate(blocks):
            uuid = f"a{turn}_{number}"
            lines.append(cc.assistant(uuid, parent, f"msg_{turn}", block, turn))
            parent = uuid
        lines.append(cc.tool_result(f"r{turn}", parent, f"t{turn}", TEXT * 2, turn))
        parent = f"r{turn}"
    return cc.write_jsonl(tmp_path / "big.jsonl", lines)


def _codex_file(tmp_path: Path) -> Path:
    lines: list[dict[str, Any] | bytes] = [cx.session_meta()]
    for turn in range(TURNS):
        call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": f"c{turn}"}
        output = {"type": "function_call_output", "call_id": f"c{turn}", "output": TEXT * 2}
        lines += [
            cx.turn_context("gpt-5", turn),
            cx.item(cx.message("user", TEXT), turn),
            cx.event({"type": "user_message", "message": TEXT}, turn),
            cx.item(call, turn),
            cx.item(output, turn),
            cx.item(cx.message("assistant", TEXT), turn),
            cx.token_count(turn, 0, turn, turn),
        ]
    return cx.write_jsonl(tmp_path / "rollout-big.jsonl", lines)


def _measure(open_source: Callable[[], SessionSource]) -> tuple[SessionSource, int, int]:
    gc.collect()
    tracemalloc.start()
    try:
        source = open_source()
        source.leaf_index()  # what is kept after a first look
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return source, held, peak


def test_memory_cost_bounds_what_a_reader_holds(tmp_path: Path) -> None:
    for path, reader in (
        (_claude_file(tmp_path), ClaudeSession),
        (_codex_file(tmp_path), CodexSession),
    ):
        size = path.stat().st_size
        source, held, peak = _measure(lambda p=path, r=reader: r(p))  # type: ignore[misc]
        assert held <= source.memory_cost() <= 1.5 * held, reader
        assert source.memory_cost() < 2 * size, reader
        assert peak < 3 * size, reader  # lines are parsed one at a time, not all at once
        source.context()
        source.transcript_messages()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            source.context()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        assert after - before < size // 10, reader  # a rendering keeps nothing behind


def test_a_file_read_where_it_is_holds_a_few_hundred_bytes_a_line(tmp_path: Path) -> None:
    """Over the whole-read limit (a render worker's reading of a file too big to hold,
    issue 26 point 6) what is held grows with the lines: a record each that shares
    what the others hold too (the line's type and role, a parent's uuid, a response's
    id), not new strings per line (~665 and ~535 bytes a line before)."""
    held_whole = set_whole_read_limit(0)
    try:
        for path, reader, per_line in (
            (_claude_file(tmp_path), ClaudeSession, 520),
            (_codex_file(tmp_path), CodexSession, 470),
        ):
            source, held, _ = _measure(lambda p=path, r=reader: r(p))  # type: ignore[misc]
            assert held < per_line * len(source), (reader, held / len(source))
    finally:
        set_whole_read_limit(held_whole)
