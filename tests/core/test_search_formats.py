"""The search index over Claude Code and Codex files (`core.search_index.formats`):
rows named as ``entries/`` names them, the UI's copies of a Codex message never
indexed, and a growing Claude file read from where the index stopped."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.formats.codex import CodexSession
from core.search_index import SearchIndex, rows, scan
from core.search_index.formats import CLAUDE, CODEX

CLAUDE_LINE = {
    "type": "assistant",
    "uuid": "u-1",
    "parentUuid": None,
    "sessionId": "s1",
    "timestamp": "2026-03-01T10:00:00.000Z",
    "message": {
        "id": "msg_1",
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "zephyr"}}
        ],
    },
}


def _write(path: Path, lines: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_codex_rows_are_named_by_line_and_skip_the_event_copies(tmp_path: Path) -> None:
    root = tmp_path / "codex"
    meta = {
        "timestamp": "2026-03-01T10:00:00.000Z",
        "type": "session_meta",
        "payload": {"id": "t1", "cwd": "/w"},
    }
    said = {
        "timestamp": "2026-03-01T10:00:01.000Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "quokka answer"}],
        },
    }
    echo = {
        "timestamp": "2026-03-01T10:00:01.000Z",
        "type": "event_msg",
        "payload": {"type": "agent_message", "message": "quokka answer"},
    }
    path = _write(root / "sessions/2026/03/01/rollout-x-t1.jsonl", [meta, "", said, echo])
    with SearchIndex(tmp_path / "db", file_format=CODEX) as index:
        index.update(str(root))
        hits = index.search("quokka")
    assert [(h.entry_id, h.role) for h in hits] == [("000003-response_item-message", "assistant")]
    source = CodexSession(path)
    names = [source.entry_name(i) for i in range(len(source))]
    assert hits[0].entry_id in names  # the name entries/ shows


def test_claude_rows_index_tool_calls_and_follow_appends(tmp_path: Path) -> None:
    root = tmp_path / "claude"
    path = _write(root / "projects/-w/s1.jsonl", [{"type": "summary", "summary": "zephyr"}])
    with SearchIndex(tmp_path / "db", file_format=CLAUDE) as index:
        index.update(str(root))
        assert index.search("zephyr") == []  # metadata lines are not conversation
        with path.open("a") as f:
            f.write(json.dumps(CLAUDE_LINE) + "\n")
        stats = index.update(str(root))
        assert stats.files_appended == 1
        hits = index.search("zephyr")
    assert [(h.entry_id, h.role, h.project, h.stem) for h in hits] == [
        ("u-1", "assistant", "projects", "-w/s1")
    ]


def _write_archive(path: Path, lines: list[dict[str, Any]], frames: int = 1) -> Path:
    """``lines`` as an archived Codex rollout: JSONL compressed in ``frames`` zstd frames,
    one after another, as zstd allows."""
    import zstandard

    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    cut = len(data) // frames
    compress = zstandard.ZstdCompressor().compress
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(compress(data[i : i + cut]) for i in range(0, len(data), cut)))
    return path


def _codex_answer(n: int, text: str) -> dict[str, Any]:
    return {
        "timestamp": f"2026-03-01T10:{n // 60:02d}:{n % 60:02d}.000Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
    }


def test_many_hits_in_one_archive_decompress_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Snippets of an archive are read from its decompressed text: once per search,
    # not once per hit (up to DECOMPRESSED_KEEP; past it, each hit reads its own line).
    root = tmp_path / "codex"
    meta = {"timestamp": "2026-03-01T10:00:00.000Z", "type": "session_meta",
            "payload": {"id": "t9", "cwd": "/w"}}  # fmt: skip
    answers = [_codex_answer(n, f"quokka number {n} " + "pad " * 2000) for n in range(30)]
    _write_archive(root / "archived_sessions" / "rollout-q-t9.jsonl.zst", [meta, *answers], 2)
    decompressions = []
    real_chunks = scan.zstd_chunks

    def counted(fd: int) -> Iterator[bytes]:
        decompressions.append(fd)
        return real_chunks(fd)

    monkeypatch.setattr(scan, "zstd_chunks", counted)
    with SearchIndex(tmp_path / "db", file_format=CODEX) as index:
        index.update(str(root))
        decompressions.clear()
        hits = index.search("quokka", limit=50)
        assert [h.snippet.split()[2] for h in hits] == [str(n) for n in reversed(range(30))]
        assert len(decompressions) == 1
        monkeypatch.setattr(scan, "DECOMPRESSED_KEEP", 1000)  # too big to keep: still right
        assert [h.snippet for h in index.search("quokka", limit=50)] == [h.snippet for h in hits]


def test_archived_zst_rollouts_are_indexed_through_zstd(tmp_path: Path) -> None:
    # Codex's archived rollouts may be zstd-compressed: they are indexed from their
    # decompressed text, and a hit's snippet is read back from it (offsets in that text).
    root = tmp_path / "codex"

    def archive(name: str, text: str, frames: int = 1) -> Path:
        lines = [
            {
                "timestamp": "2026-03-01T10:00:00.000Z",
                "type": "session_meta",
                "payload": {"id": "t2", "cwd": "/w"},
            },
            {
                "timestamp": "2026-03-01T10:00:01.000Z",
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "x " * 5000}],
                },
            },
            {
                "timestamp": "2026-03-01T10:00:02.000Z",
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                },
            },
        ]
        return _write_archive(root / "archived_sessions" / name, lines, frames)

    path = archive("rollout-a-t2.jsonl.zst", "wombat answer", frames=3)
    with SearchIndex(tmp_path / "db", file_format=CODEX) as index:
        index.update(str(root))
        hits = index.search("wombat")
        assert [(h.project, h.stem, h.role) for h in hits] == [
            ("archived_sessions", "rollout-a-t2", "assistant")
        ]
        assert "wombat answer" in hits[0].snippet  # read back through zstd
        source = CodexSession(path)
        assert hits[0].entry_id == source.entry_name(len(source) - 1)  # as entries/ names it

        archive("rollout-a-t2.jsonl.zst", "numbat answer")  # replaced: read whole again
        index.update(str(root))
        assert index.search("wombat") == []
        assert [h.stem for h in index.search("numbat")] == ["rollout-a-t2"]

        # Not zstd data: skipped with a reason, the rest of the update done, and not
        # read again while it stays as it is.
        bad = root / "archived_sessions" / "rollout-b-t3.jsonl.zst"
        bad.write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 100)
        stats = index.update(str(root))
        assert any("rollout-b-t3.jsonl.zst" in reason for reason in stats.skipped), stats
        assert [h.stem for h in index.search("numbat")] == ["rollout-a-t2"]
        again = index.update(str(root))
        assert again.bytes_read == 0 and not again.skipped


@pytest.mark.parametrize("first_line", [True, False], ids=["after-a-line", "no-newline"])
def test_an_archive_past_its_bound_is_skipped_and_read_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_line: bool
) -> None:
    # Another agent's archive made to expand without end (here 16 MB of spaces, no
    # newline, in a few KB, after a session's first line or alone; the ceiling made
    # 1 MB): the indexer reads up to the bound and no further, skips it saying why,
    # and indexes the other sessions.
    import zstandard

    import core.zstd_files
    from core.search_index import index as index_module

    monkeypatch.setattr(core.zstd_files, "MOST_RATIO", 2)
    monkeypatch.setattr(core.zstd_files, "MOST_UNSAID", 2**20)
    root = tmp_path / "codex"
    meta = {"timestamp": "2026-03-01T10:00:00.000Z", "type": "session_meta",
            "payload": {"id": "t5", "cwd": "/w"}}  # fmt: skip
    _write_archive(root / "archived_sessions" / "rollout-a-t5.jsonl.zst",
                   [meta, _codex_answer(1, "wombat answer")])  # fmt: skip
    bomb = root / "archived_sessions" / "rollout-b-t6.jsonl.zst"
    head = (json.dumps(meta) + "\n").encode() if first_line else b""
    bomb.write_bytes(zstandard.ZstdCompressor().compress(head + b" " * (16 * 2**20)))
    assert bomb.stat().st_size < 4096
    read: list[int] = []  # the bomb's chunks
    real_chunks = index_module.zstd_chunks

    def counted(fd: int) -> Iterator[bytes]:
        for chunk in real_chunks(fd):
            if os.fstat(fd).st_ino == bomb.stat().st_ino:
                read.append(len(chunk))
            yield chunk

    monkeypatch.setattr(index_module, "zstd_chunks", counted)
    with SearchIndex(tmp_path / "db", file_format=CODEX) as index:
        stats = index.update(str(root))
        assert [h.stem for h in index.search("wombat")] == ["rollout-a-t5"]
        reasons = [reason for reason in stats.skipped if "rollout-b-t6.jsonl.zst" in reason]
        assert len(reasons) == 1 and "decompression bomb" in reasons[0], stats.skipped
        assert sum(read) <= 2**20  # the bound, not the 16 MB
        again = index.update(str(root))  # not read again while it stays as it is
        assert again.bytes_read == 0 and not again.skipped


@pytest.mark.parametrize("kind", ["plain", "zst"])
def test_a_line_past_the_longest_is_refused_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # A line that never ends (spaces without a newline, under the decompression bound:
    # a few KB of .zst may expand to a GB so): the indexer holds no more of it than
    # LONGEST_LINE (made 1 MB here) and a chunk, skips the file saying why, and
    # indexes the others; unchanged, it is not read again.
    import zstandard

    monkeypatch.setattr(rows, "LONGEST_LINE", 2**20)
    root = tmp_path / "codex"
    meta = {"timestamp": "2026-03-01T10:00:00.000Z", "type": "session_meta",
            "payload": {"id": "t7", "cwd": "/w"}}  # fmt: skip
    _write_archive(root / "archived_sessions" / "rollout-a-t7.jsonl.zst",
                   [meta, _codex_answer(1, "wombat answer")])  # fmt: skip
    text = (json.dumps(meta) + "\n").encode() + b" " * (64 * 2**20)
    if kind == "zst":
        long = root / "archived_sessions" / "rollout-b-t8.jsonl.zst"
        long.write_bytes(zstandard.ZstdCompressor().compress(text))
    else:
        long = root / "sessions" / "2026" / "03" / "01" / "rollout-b-t8.jsonl"
        long.parent.mkdir(parents=True)
        long.write_bytes(text)
    with SearchIndex(tmp_path / "db", file_format=CODEX) as index:
        stats = index.update(str(root))
        assert [h.stem for h in index.search("wombat")] == ["rollout-a-t7"]
        reasons = [reason for reason in stats.skipped if long.name in reason]
        assert len(reasons) == 1 and "a line longer than 1 MB" in reasons[0], stats.skipped
        assert stats.bytes_read < 8 * 2**20  # the line's MB and a chunk, not its 64 MB
        again = index.update(str(root))
        assert again.bytes_read == 0 and not again.skipped
