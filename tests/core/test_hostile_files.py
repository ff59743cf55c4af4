"""Corrupt and adversarial session files: nothing escapes, everything terminates."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.session_helpers import assistant, user

import core
from core import NotASessionError, SessionManager

HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": "hostile",
    "timestamp": "2025-01-01T00:00:00.000Z",
    "cwd": "/h",
}


def lines(*objects: dict[str, Any]) -> bytes:
    return b"".join(core.dumps_line(o) for o in objects)


def entry(entry_id: str, parent: str | None, text: str = "x", **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": user(text),
        **extra,
    }


def chain(n: int) -> bytes:
    parts = [core.dumps_line(HEADER)]
    previous = None
    for i in range(n):
        entry_id = f"{i:08x}"
        parts.append(
            b'{"type":"custom","id":"%s","parentId":%s,"timestamp":"2025-01-01T00:00:00.000Z"}\n'
            % (entry_id.encode(), b"null" if previous is None else b'"%s"' % previous.encode())
        )
        previous = entry_id
    return b"".join(parts)


CASES: dict[str, Callable[[], bytes]] = {
    "empty": lambda: b"",
    "only-newlines": lambda: b"\n\n\n",
    "header-less": lambda: lines(entry("aaaaaaaa", None), entry("bbbbbbbb", "aaaaaaaa")),
    "binary-junk": lambda: random.Random(7).randbytes(64 * 1024),
    "junk-after-header": lambda: (
        lines(HEADER) + random.Random(8).randbytes(4096) + b"\n" + lines(entry("cccccccc", None))
    ),
    "invalid-utf8": lambda: (
        lines(HEADER)
        + b'{"type":"message","id":"dddddddd","parentId":null,"timestamp":"t","message":'
        + b'{"role":"user","content":"\xff\xfe bad \xc3"}}\n'
        + lines(entry("eeeeeeee", None))
    ),
    "invalid-utf8-header": lambda: (
        b'{"type":"session","id":"\xff\xff"}\n' + lines(entry("ffffffff", None))
    ),
    "ten-megabyte-line": lambda: lines(HEADER, entry("11111111", None, "y" * 10_000_000)),
    "hundred-thousand-chain": lambda: chain(100_000),
    "parent-cycle": lambda: lines(
        HEADER,
        entry("aaaaaaaa", "cccccccc"),
        entry("bbbbbbbb", "aaaaaaaa"),
        entry("cccccccc", "bbbbbbbb"),
    ),
    "cycle-below-root": lambda: lines(
        HEADER,
        entry("00000000", None),
        entry("aaaaaaaa", "bbbbbbbb"),
        entry("bbbbbbbb", "aaaaaaaa"),
    ),
    "self-parent": lambda: lines(HEADER, entry("aaaaaaaa", "aaaaaaaa")),
    "duplicate-ids": lambda: lines(
        HEADER,
        entry("aaaaaaaa", None, "first"),
        entry("aaaaaaaa", "aaaaaaaa", "second"),
        entry("bbbbbbbb", "aaaaaaaa"),
        entry("aaaaaaaa", "bbbbbbbb", "third"),
    ),
    "ids-with-slashes": lambda: lines(
        HEADER, entry("../../etc", None), entry("a/b", "../../etc"), entry("/", "a/b")
    ),
    "non-string-ids": lambda: lines(
        HEADER,
        {"type": "message", "id": 5, "parentId": None, "message": user("n")},
        {"type": "message", "id": None, "parentId": 5, "message": "not a dict"},
        {"type": "label", "id": "aaaaaaaa", "parentId": None, "targetId": 5, "label": ["x"]},
        {"type": "compaction", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "firstKeptEntryId": 7},
    ),
    "unhashable-ids": lambda: lines(
        HEADER,
        {"type": "message", "id": [1], "parentId": {"a": 1}, "message": user("l")},
        {"type": "label", "id": {"x": 1}, "parentId": [1], "targetId": [1], "label": "y"},
        entry("aaaaaaaa", None),
        {"type": "message", "id": "bbbbbbbb", "parentId": ["aaaaaaaa"], "message": user("m")},
    ),
    "v1-with-bad-compaction-index": lambda: lines(
        {"type": "session", "id": "v1", "timestamp": "2025-01-01T00:00:00.000Z"},
        {"type": "message", "timestamp": "t", "message": user("a")},
        {"type": "compaction", "timestamp": "t", "summary": "s", "firstKeptEntryIndex": 99},
        {"type": "compaction", "timestamp": "t", "summary": "s", "firstKeptEntryIndex": "x"},
    ),
    "torn-last-line": lambda: lines(HEADER, entry("aaaaaaaa", None)) + b'{"type":"mess',
    "array-and-scalar-lines": lambda: (
        lines(HEADER) + b'[1,2]\n"str"\n42\nnull\n' + lines(entry("aaaaaaaa", None))
    ),
}


@pytest.fixture(params=sorted(CASES))
def hostile_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "agent" / "sessions" / "--h--" / f"{request.param}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(CASES[request.param]())
    return path


def exercise(m: SessionManager) -> None:
    """Everything a reader does with a session; must terminate without raising."""
    entries = m.get_entries()
    m.build_session_context()
    for e in entries[:200]:
        entry_id = e.get("id")
        if isinstance(entry_id, str):
            m.build_session_context(entry_id)
            m.get_branch(entry_id)
            m.get_children(entry_id)
    tree = m.get_tree()
    # every entry appears exactly once in the tree (walked iteratively)
    seen = 0
    stack = list(tree)
    while stack:
        node = stack.pop()
        seen += 1
        stack.extend(node["children"])
    assert seen == len(entries)
    m.get_usage_statistics()
    m.get_labels()


def test_browse_load_never_raises_anything_but_not_a_session(hostile_file: Path) -> None:
    before = hostile_file.read_bytes()
    try:
        m = SessionManager.open(hostile_file, browse=True)
    except NotASessionError:
        assert hostile_file.read_bytes() == before
        return
    assert hostile_file.read_bytes() == before  # browsing never writes
    exercise(m)


def test_open_for_writing_then_append_and_reload(hostile_file: Path) -> None:
    m = SessionManager.open(hostile_file)
    exercise(m)
    m.append_message(user("appended after hostile content"))
    m.append_message(assistant("reply"))
    m.close()
    again = SessionManager.open(hostile_file, browse=True)
    assert again.get_entries()[-1]["message"]["content"][0]["text"] == "reply"
    exercise(again)


def test_discovery_skips_or_lists_hostile_files(hostile_file: Path) -> None:
    directory = hostile_file.parent
    agent = directory.parent.parent
    core.get_recent_sessions(directory, limit=50)
    core.find_most_recent_session(directory)
    infos = core.list_all(agent)
    assert all(info.path == str(hostile_file) for info in infos)
    core.resolve_session("hostile", "/h", agent_dir=agent)


def test_cycle_context_is_the_cycle_once() -> None:
    storage = core.MemorySessionStorage()
    storage.write_bytes("/c.jsonl", CASES["parent-cycle"]())
    m = SessionManager.open("/c.jsonl", storage=storage, browse=True)
    messages = m.build_session_context()["messages"]
    assert len(messages) == 3
    assert len(m.get_branch()) == 3
