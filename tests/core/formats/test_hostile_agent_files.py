"""Odd and hostile lines never fail a Claude Code or Codex session: invalid UTF-8,
nesting deeper than any parser allows, lone surrogates, huge integers, parent cycles
and self-parents, a FIFO where a session should be."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import claude_code as cc
from support import codex_cli as cx

from core.formats.claude import ClaudeSession
from core.formats.claude_dirs import list_sessions
from core.formats.codex import CodexSession
from core.safe_open import NotRegularFileError

DEEP = b'{"a":' * 3000 + b"1" + b"}" * 3000
INVALID_UTF8 = b'{"type":"user","uuid":"bad","text":"\xff\xfe"}'
SURROGATE = b'{"type":"summary","summary":"\\ud800 alone"}'
BIG_INT = b'{"type":"tag","tag":123456789012345678901234567890}'


def test_claude_odd_lines_and_cycles(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        DEEP,
        INVALID_UTF8,
        SURROGATE,
        BIG_INT,
        cc.user("x", "y", "in a cycle", 1),
        cc.assistant("y", "x", "m1", cc.text("also in it"), 2),
        cc.user("self", "self", "my own parent", 3),
        cc.user("u", None, "plain", 4),
        {"type": "user", "uuid": 42, "message": "not a dict"},
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "odd.jsonl", lines))
    assert s.malformed_lines == 2  # too deep, not UTF-8
    assert [s.entry_name(i) for i in range(len(s))] == [
        "meta-3-summary", "meta-4-tag", "x", "y", "self", "u", "meta-9-user",
    ]  # fmt: skip
    assert s.title() == "\ud800 alone"
    assert s.parent_index(s.index_of("self") or 0) is None
    assert s.leaf_name() == "u"
    stats = s.stats()
    assert stats["entries"] == 7 and stats["roots"] == 6  # the cycle is cut once
    assert s.context()["messages"] == [{"role": "user", "content": "plain"}]
    for index in range(len(s)):
        s.entry_text(index)
        s.entry(index)


def test_codex_odd_lines(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        cx.session_meta(),
        DEEP,
        INVALID_UTF8,
        {"timestamp": cx.ts(1), "type": "response_item", "payload": "not a dict"},
        {"timestamp": cx.ts(2), "type": "response_item", "payload": {"type": "message"}},
        {
            "timestamp": cx.ts(3),
            "type": "event_msg",
            "payload": {"type": "thread_rolled_back", "num_turns": "x"},
        },
        {"timestamp": cx.ts(4), "type": "compacted", "payload": {"replacement_history": "nope"}},
        {"no": "type"},
    ]
    s = CodexSession(cx.write_jsonl(tmp_path / "rollout-odd.jsonl", lines))
    assert s.malformed_lines == 2
    assert [s.entry_name(i) for i in range(len(s))] == [
        "000001-session_meta",
        "000004-response_item",
        "000005-response_item-message",
        "000006-event_msg-thread_rolled_back",
        "000007-compacted",
        "000008-unknown",
    ]
    assert s.context()["messages"] == []  # a compaction that left nothing
    assert s.transcript_messages() == []
    assert orjson.loads(s.raw_line(5)) == {"no": "type"}


def test_a_fifo_is_refused_and_not_listed(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    fifo = project / f"{cc.SESSION_ID}.jsonl"
    os.mkfifo(fifo)
    assert list_sessions(project) == []
    with pytest.raises(NotRegularFileError):
        ClaudeSession(fifo)
    with pytest.raises(NotRegularFileError):
        CodexSession(fifo)
