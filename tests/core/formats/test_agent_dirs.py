"""Finding Claude Code and Codex sessions the way the agents do, listing them from the
first KiB of each file: both Claude sub-agent layouts, Codex sub-agents under their
parent, archived ``.jsonl.zst``, the 2025 format, ``session_index.jsonl``."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from support import claude_code as cc
from support import codex_cli as cx

from core.formats.claude_dirs import (
    claude_dir,
    flat_sub_agents,
    list_projects,
    list_sessions,
    sub_agents,
)
from core.formats.codex_dirs import (
    NO_CWD_PROJECT,
    CodexIndex,
    codex_dir,
    read_session_index,
    rollout_stem,
)
from core.formats.prefix import LISTING_PREFIX_BYTES


def test_agent_dirs_from_env_or_home(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert claude_dir(home) == tmp_path / ".claude"
    assert codex_dir(home) == tmp_path / ".codex"
    env = {**home, "CLAUDE_CONFIG_DIR": str(tmp_path / "c"), "CODEX_HOME": str(tmp_path / "x")}
    assert claude_dir(env) == tmp_path / "c"
    assert codex_dir(env) == tmp_path / "x"


SID_2 = "22222222-2222-4222-8222-222222222222"


def _claude_tree(root: Path) -> Path:
    project = root / "projects" / "-home-me-app"
    main = project / f"{cc.SESSION_ID}.jsonl"
    cc.write_jsonl(
        main, [{"type": "summary", "summary": "s", "leafUuid": "u1"}, cc.user("u1", None, "hi", 1)]
    )
    nested = project / cc.SESSION_ID / "subagents"
    sub = [cc.user("s1", None, "look", 2, isSidechain=True, agentId="a1")]
    cc.write_jsonl(nested / "agent-a1.jsonl", sub)
    meta = {"agentType": "Explore", "description": "look around", "toolUseId": "toolu_7"}
    (nested / "agent-a1.meta.json").write_bytes(orjson.dumps(meta))
    cc.write_jsonl(nested / "agent-a2.jsonl", sub)  # no meta.json
    cc.write_jsonl(project / "agent-b2.jsonl", sub)  # the older flat layout
    other = cc.user("o1", None, "x", 1, sessionId=SID_2)
    cc.write_jsonl(project / "agent-b3.jsonl", [other])  # another session's
    # a first line longer than a listing reads: its cwd is not found
    late = cc.user("l1", None, "y" * LISTING_PREFIX_BYTES, 1, sessionId=SID_2)
    late_line = {"type": "summary", "summary": "z" * LISTING_PREFIX_BYTES}
    cc.write_jsonl(project / f"{SID_2}.jsonl", [late_line, late])
    os.utime(project / f"{SID_2}.jsonl", ns=(1, 1))
    (project / "notes.txt").write_text("not a session")
    (root / "projects" / "stray.jsonl").write_text("{}\n")  # a file, not a project
    return project


def test_claude_listing_and_both_sub_agent_layouts(tmp_path: Path) -> None:
    project = _claude_tree(tmp_path)
    assert list_projects(tmp_path) == ["-home-me-app"]
    sessions = list_sessions(project)
    assert [(s.id, s.cwd) for s in sessions] == [(cc.SESSION_ID, cc.CWD), (SID_2, None)]
    assert sessions[0].size == sessions[0].path.stat().st_size
    found = sub_agents(sessions[0].path, cc.SESSION_ID)
    assert [(s.stem, s.meta) for s in found] == [
        (
            "agent-a1",
            {"agentType": "Explore", "description": "look around", "toolUseId": "toolu_7"},
        ),
        ("agent-a2", {}),
        ("agent-b2", {}),
    ]
    assert found[2].path == project / "agent-b2.jsonl"
    assert [s.stem for s in sub_agents(sessions[1].path, SID_2)] == ["agent-b3"]
    assert sorted(flat_sub_agents(project)) == sorted([cc.SESSION_ID, SID_2])
    assert list_projects(tmp_path / "nowhere") == [] and list_sessions(tmp_path / "nowhere") == []


PARENT = "019a0000-0000-7000-8000-00000000000a"
CHILD = "019a0000-0000-7000-8000-00000000000b"
ARCHIVED = "019a0000-0000-7000-8000-00000000000c"


def _codex_tree(root: Path) -> None:
    day = root / "sessions" / "2026" / "03" / "02"
    long_instructions = {"text": "i" * 5000}  # the first line is far longer than a KiB
    cx.write_jsonl(
        day / f"rollout-2026-03-02T09-00-00-{PARENT}.jsonl",
        [cx.session_meta(0, PARENT, base_instructions=long_instructions)],
    )
    cx.write_jsonl(
        day / f"rollout-2026-03-02T09-05-00-{CHILD}.jsonl",
        [cx.session_meta(5, CHILD, source=cx.sub_agent_source(PARENT))],
    )
    legacy = {"id": "legacy", "timestamp": "2025-05-01T12:00:00.000Z", "instructions": None}
    cx.write_jsonl(
        root / "sessions" / "2025" / "05" / "01" / "rollout-2025-05-01T12-00-00-legacy.jsonl",
        [legacy],
    )
    (day / "notes.jsonl").write_text("{}\n")  # not a rollout name
    (root / "archived_sessions").mkdir()
    cx.write_zst(
        root / "archived_sessions" / f"rollout-2026-01-01T00-00-00-{ARCHIVED}.jsonl.zst",
        [cx.session_meta(0, ARCHIVED, cwd="/home/me/other")],
    )
    index_lines = [
        {"id": PARENT, "thread_name": "first name", "updated_at": "2026-03-02T09:00:00Z"},
        b"junk",
        {"id": PARENT, "thread_name": "second name", "updated_at": "2026-03-02T10:00:00Z"},
        {"id": CHILD, "thread_name": "", "updated_at": "2026-03-02T10:00:00Z"},
    ]
    cx.write_jsonl(root / "session_index.jsonl", index_lines)


def test_codex_listing_projects_sub_agents_archive_index(tmp_path: Path) -> None:
    _codex_tree(tmp_path)
    index = CodexIndex.scan(tmp_path)
    assert index.projects() == sorted(["--home-me-app--", "--home-me-other--", NO_CWD_PROJECT])
    (parent,) = index.sessions("--home-me-app--")  # the sub-agent is not listed here
    assert parent.id == PARENT and parent.cwd == cx.CWD and not parent.archived
    assert parent.stem == f"rollout-2026-03-02T09-00-00-{PARENT}"
    assert parent.parent_thread_id is None
    (child,) = index.sub_agents(PARENT)
    assert child.id == CHILD and child.parent_thread_id == PARENT
    (archived,) = index.sessions("--home-me-other--")
    assert archived.archived and archived.stem == f"rollout-2026-01-01T00-00-00-{ARCHIVED}"
    (legacy,) = index.sessions(NO_CWD_PROJECT)
    assert legacy.id == "legacy" and legacy.cwd is None
    assert index.sub_agents(CHILD) == [] and index.sessions("--nope--") == []
    assert read_session_index(tmp_path) == {PARENT: "second name"}
    assert read_session_index(tmp_path / "nowhere") == {}
    assert CodexIndex.scan(tmp_path / "nowhere").projects() == []


def test_rollout_stem() -> None:
    assert rollout_stem("rollout-x.jsonl") == "rollout-x"
    assert rollout_stem("rollout-x.jsonl.zst") == "rollout-x"
    assert rollout_stem("rollout-x.json") is None
    assert rollout_stem("other.jsonl") is None
