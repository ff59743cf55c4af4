"""Claude Code and Codex trees under a fake HOME, for the tests of ``agents/``.

Written in the documented formats with the demo's line makers
(``contrib/demo_agents.py``), plus what a demo leaves out: a compaction, junk and
unknown lines, an older version's flat sub-agent file, a Codex sub-agent rollout, the
2025 Codex format, and an archived ``.jsonl.zst`` rollout. `fake_home` returns the
HOME and `AgentTrees`, which names what the tests look for.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import zstandard

from support.mount import REPO

__all__ = ["AgentTrees", "fake_home", "home_env", "load_demo_agents"]

CLAUDE_PROJECT = "-home-me-app"
CODEX_CWD = "/home/me/tool"
CODEX_PROJECT = "--home-me-tool--"
#: a fixed start, so names and times are the same in every run
START = 1_780_000_000.0


def load_demo_agents() -> ModuleType:
    path = REPO / "contrib" / "demo_agents.py"
    spec = importlib.util.spec_from_file_location("sessionfs_demo_agents", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class AgentTrees:
    home: Path
    claude: Path
    codex: Path
    #: the demo's session (split responses, a rewind, a sub-agent in subagents/)
    claude_session: Path
    #: a compacted session with junk lines and a flat (older) sub-agent file
    claude_compacted: Path
    codex_rollout: Path
    codex_subagent: Path
    codex_old_format: Path
    codex_archived: Path


def home_env(home: Path) -> dict[str, str]:
    """This process's environment with ``home`` as HOME and no agent dir variables:
    the mount finds ``~/.claude`` and ``~/.codex`` there, as the agents would."""
    dir_variables = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME")
    env = {k: v for k, v in os.environ.items() if k not in dir_variables}
    return {**env, "HOME": str(home)}


def _compacted_claude(demo: ModuleType, project: Path) -> Path:
    sid = "7b1e2c3d-0000-4000-8000-00000000c0de"
    s = demo.ClaudeLines(sid, "/home/me/app", START)
    s.meta("summary", summary="Old summary", leafUuid="none")
    s.user("Summarise the release notes.")
    s.response(
        "msg_c_01", [{"type": "text", "text": "The release adds a JSON exporter."}], (100, 10, 0, 0)
    )
    before = s.last
    s.lines.append("this line is not JSON {")
    s.lines.append(json.dumps(["a", "list", "is", "not", "an", "object"]))
    boundary = s.system(
        "compact_boundary",
        None,
        content="Conversation compacted",
        logicalParentUuid=before,
        compactMetadata={"trigger": "auto", "preTokens": 9000},
    )
    s.user(
        "Summary: the user asked for release notes; the exporter was described.",
        parent=boundary,
        isCompactSummary=True,
    )
    s.response(
        "msg_c_02", [{"type": "text", "text": "Continuing after the compaction."}], (200, 20, 0, 0)
    )
    s.meta("ai-title", aiTitle="Release notes")
    s.meta("some-future-kind", value=1)
    path = demo.write_lines(project / f"{sid}.jsonl", s.lines)
    flat = demo.ClaudeLines(sid, "/home/me/app", START + 10, sidechain=True, agent_id="f1a7")
    flat.user("Flat sub-agent task: count the exporters.")
    flat.response("msg_c_sub", [{"type": "text", "text": "There is one exporter."}], (5, 5, 0, 0))
    demo.write_lines(project / "agent-f1a7.jsonl", flat.lines)
    return path


def _codex(demo: ModuleType, root: Path) -> tuple[Path, Path, Path, Path]:
    main_id = "0199b000-0000-7000-8000-00000000a001"
    r = demo.CodexLines(START)
    r.session_meta(main_id, CODEX_CWD)
    r.turn_context(CODEX_CWD)
    r.message("user", "Rename the config loader.")
    r.call("call_1", "shell", {"command": ["rg", "load_config"]}, "src/config.py:3")
    r.message("assistant", "Renamed load_config to read_config everywhere.")
    r.add("event_msg", {"type": "thread_name_updated", "thread_name": "Config loader rename"})
    r.tokens(900, 400, 60)
    rollout = demo.write_lines(demo.rollout_path(root, START, main_id), r.lines)

    sub_id = "0199b000-0000-7000-8000-00000000a002"
    sub = demo.CodexLines(START + 20)
    spawn = {
        "parent_thread_id": main_id,
        "depth": 1,
        "agent_nickname": "scout",
        "agent_role": "explorer",
    }
    sub.session_meta(sub_id, CODEX_CWD, source={"subagent": {"thread_spawn": spawn}})
    sub.message("user", "Find every caller of load_config.")
    sub.message("assistant", "Three callers: cli.py, app.py, tests.")
    subagent = demo.write_lines(demo.rollout_path(root, START + 20, sub_id), sub.lines)

    old_id = "0199b000-0000-7000-8000-00000000a003"
    old = [
        {"id": old_id, "timestamp": "2025-05-01T10:00:00.000Z", "instructions": ""},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Explain the 2025 rollout format."}],
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It has no envelope per line."}],
        },
    ]
    old_path = demo.write_lines(demo.rollout_path(root, START - 86400 * 200, old_id), old)

    arch_id = "0199b000-0000-7000-8000-00000000a004"
    a = demo.CodexLines(START - 86400)
    a.session_meta(arch_id, CODEX_CWD)
    a.message("user", "An archived question about zstandard streams.")
    a.message("assistant", "Archived answer.")
    plain = demo.write_lines(
        demo.rollout_path(root, START - 86400, arch_id, archived=True), a.lines
    )

    archived = plain.with_name(plain.name + ".zst")
    archived.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    plain.unlink()
    demo.write_lines(
        root / "session_index.jsonl",
        [
            {"id": arch_id, "thread_name": "Old name", "updated_at": "2025-01-01T00:00:00Z"},
            {"id": arch_id, "thread_name": "Zstd archive", "updated_at": "2025-01-02T00:00:00Z"},
        ],
    )
    return rollout, subagent, old_path, archived


def fake_home(base: Path) -> AgentTrees:
    """A HOME with ``.claude`` and ``.codex`` (module docstring)."""
    demo = load_demo_agents()
    home = base / "home"
    claude, codex = home / ".claude", home / ".codex"
    main, _sub = demo.write_claude_home(claude, START)
    project = claude / "projects" / CLAUDE_PROJECT
    project.mkdir(parents=True)
    compacted = _compacted_claude(demo, project)
    rollout, subagent, old, archived = _codex(demo, codex)
    return AgentTrees(home, claude, codex, main, compacted, rollout, subagent, old, archived)
