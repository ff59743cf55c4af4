"""What every `SessionSource` promises, checked on every reader (Claude Code, Codex,
Gemini CLI and its older documents, Qwen Code, xcsh compact, xcsh parsed) over the sessions the
reader tests write: names find their entries, raw lines parse to the entries (one by
one and all at once), the path runs root -> leaf along parent links, the tree holds
every entry once, stats agree with the entries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support import claude_code as cc
from support import codex_cli as cx
from support import gemini_cli as gc
from support import qwen_code as qc
from test_claude_session import _main_lines as claude_lines
from test_codex_session import _main_lines as codex_lines
from test_gemini_session import _session_records as gemini_records
from test_qwen_session import _records as qwen_records
from test_xcsh_parsed import manager_source
from view.test_compact_session import odd_session

from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.gemini import GeminiDocumentSession, GeminiSession
from core.formats.qwen import QwenSession
from core.formats.xcsh import XcshSession
from core.jsonl import loads


def _claude(tmp_path: Path) -> SessionSource:
    return ClaudeSession(cc.write_jsonl(tmp_path / "c.jsonl", claude_lines()))


def _codex(tmp_path: Path) -> SessionSource:
    return CodexSession(cx.write_jsonl(tmp_path / "rollout-x.jsonl", codex_lines()))


def _gemini(tmp_path: Path) -> SessionSource:
    return GeminiSession(gc.write_jsonl(tmp_path / "session-g.jsonl", gemini_records()))


def _gemini_document(tmp_path: Path) -> SessionSource:
    records = [r for r in gemini_records()[1:] if isinstance(r, dict) and "id" in r]
    return GeminiDocumentSession(gc.write_document(tmp_path / "session-d.json", records))


def _qwen(tmp_path: Path) -> SessionSource:
    return QwenSession(qc.write_jsonl(tmp_path / f"{qc.SESSION_ID}.jsonl", qwen_records()))


def _xcsh(tmp_path: Path) -> SessionSource:
    return XcshSession(odd_session(tmp_path))


def _parsed(tmp_path: Path) -> SessionSource:
    return manager_source(odd_session(tmp_path))


@pytest.mark.parametrize(
    "make",
    [_claude, _codex, _gemini, _gemini_document, _qwen, _xcsh, _parsed],
    ids=["claude", "codex", "gemini", "gemini-document", "qwen", "xcsh", "parsed"],
)
def test_source_contract(make: Callable[[Path], SessionSource], tmp_path: Path) -> None:
    source = make(tmp_path)
    count = len(source)
    assert count > 5
    names = [source.entry_name(i) for i in range(count)]
    for index, name in enumerate(names):
        found = source.index_of(name)
        assert found is not None and names[found] == name
        if source.agent != "xcsh":  # xcsh ids may repeat: the view numbers them
            assert found == index
        assert loads(source.raw_line(index)) == source.entry(index)
        assert b"\n" not in source.raw_line(index)
        entry = source.entry(index)
        entry["mutated"] = True
        assert "mutated" not in source.entry(index)  # each call a new dict
    # every entry at once (an entries/ listing) says what each one says alone
    assert list(source.entry_views()) == [source.entry_view(i) for i in range(count)]
    assert source.entry_times_ms() == [source.entry_time_ms(i) for i in range(count)]
    path = source.path_indexes()
    leaf = source.leaf_index()
    assert (path[-1] if path else None) == leaf
    assert source.parent_index(path[0]) is None if path else True
    for child, parent in zip(path[1:], path, strict=False):
        assert source.parent_index(child) == parent
    seen: list[int] = []
    forest = source.forest()
    stack = list(forest.roots)
    while stack:
        index = stack.pop()
        seen.append(index)
        stack.extend(forest.children[index])
    assert sorted(seen) == list(range(count))
    stats = source.stats()
    assert stats["entries"] == count == sum(stats["byType"].values())
    assert stats["pathLength"] == len(path)
    assert stats["leafId"] == source.leaf_name()
    assert orjson.dumps(source.context())  # JSON all through
    assert all(m.message.get("role") for m in source.transcript_messages())
    assert source.memory_cost() > 0
    assert source.catch_up() is False
