"""A Claude Code session written in pieces while the mount reads it -- a writer caught
mid-append leaves half a line, the rest comes later -- shows the same ``entries/``
names (``meta-N-*`` counts lines) as a mount started after the file was whole."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support import claude_code as cc
from support.mount import Mount, MountFactory, run
from support.other_agents import CLAUDE_PROJECT, home_env
from support.waiting import eventually

from sessionfs.view.loaded_session import FRESH_INTERVAL

pytestmark = pytest.mark.fuse


def _session(mount: Mount) -> Path:
    return mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / cc.SESSION_ID


def _entries(mount: Mount) -> list[str]:
    return run("ls", _session(mount) / "entries").split()


def test_entry_names_do_not_shift_while_the_session_is_written(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    home = tmp_path / "home"
    path = home / ".claude" / "projects" / CLAUDE_PROJECT / f"{cc.SESSION_ID}.jsonl"
    lines = [
        {"type": "summary", "summary": "Earlier", "leafUuid": "a1"},
        cc.user("u1", None, "Fix the bug", 1),
        cc.assistant("a1", "u1", "msg_1", cc.text("Fixed."), 2),
        {"type": "custom-title", "customTitle": "Bug fix", "sessionId": cc.SESSION_ID},
        {"type": "last-prompt", "lastPrompt": "Fix the bug"},
    ]
    data = cc.write_jsonl(tmp_path / "whole.jsonl", lines).read_bytes()
    second_line_end = data.index(b"\n", data.index(b"\n") + 1) + 1
    torn_at = second_line_end + 40  # inside the assistant line

    path.parent.mkdir(parents=True)
    path.write_bytes(data[:second_line_end])
    live = mount_factory(demo_agent, env=home_env(home))
    assert _entries(live) == ["meta-1-summary.json", "u1.json"]

    with path.open("ab") as f:
        f.write(data[second_line_end:torn_at])  # the writer is mid-append
    time.sleep(FRESH_INTERVAL + 0.3)  # any access from now on catches the file up
    assert _entries(live) == ["meta-1-summary.json", "u1.json"]  # half a line: no entry

    with path.open("ab") as f:
        f.write(data[torn_at:])  # the rest of that line, and two more
    eventually(lambda: len(_entries(live)) == 5, "the appended lines listed", within=10)

    fresh = mount_factory(demo_agent, name="fresh", env=home_env(home))
    assert _entries(live) == _entries(fresh)
    assert "meta-4-custom-title.json" in _entries(fresh)
    assert run("cat", _session(live) / "title").strip() == "Bug fix"
