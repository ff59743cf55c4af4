"""Spec section 13, the session half: sub-agent sessions in artifacts dirs, the newer
entry types and context fields, OpenAI remote compaction, usage of task results, and
the bad input around them (header-less sub-agent files, nested sub-agent dirs,
unknown entry types)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from support.agent_messages import assistant, user
from support.session_helpers import session_with_one_exchange

from core import SessionManager, build_session_context, list_all, resolve_session
from core.discovery import sub_agent_files


def _sub_agent(parent: Path, task_id: str, text: str) -> Path:
    artifacts = parent.with_suffix("")
    artifacts.mkdir(exist_ok=True)
    task_file = artifacts / f"{task_id}.jsonl"
    with SessionManager.open(task_file) as manager:
        manager.append_message(user(text))
        manager.append_message(assistant("done"))
    return task_file


# --------------------------------------------------------------------------- sub-agents


def test_list_all_includes_sub_agent_sessions(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    parent = session_with_one_exchange(agent / "sessions" / "-proj", "parent task")
    task = _sub_agent(parent, "0-Explore", "explore the code")
    (parent.with_suffix("") / "0-Explore.md").write_text("tool output, not a session")
    infos = {info.path: info for info in list_all(agent)}
    assert set(infos) == {str(parent), str(task)}
    assert infos[str(task)].parent_file == str(parent)
    assert infos[str(task)].first_message == "explore the code"
    assert infos[str(parent)].parent_file is None


def test_sub_agent_sessions_are_resumable_by_id(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    parent = session_with_one_exchange(agent / "sessions" / "-proj", "parent")
    task = _sub_agent(parent, "1-Review", "review")
    task_id = orjson.loads(task.read_bytes().split(b"\n", 1)[0])["id"]
    assert resolve_session(task_id[:13], "/elsewhere", agent_dir=agent) == str(task)
    # Also from the parent's own cwd (its project is searched first, sub-agents next).
    assert resolve_session("1-review", "/work/demo", agent_dir=agent) == str(task)


def test_sub_agent_file_without_header_is_skipped(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    parent = session_with_one_exchange(agent / "sessions" / "-proj", "parent")
    artifacts = parent.with_suffix("")
    artifacts.mkdir()
    (artifacts / "0-Broken.jsonl").write_bytes(b'{"type":"message","id":"a"}\nnot json\n')
    assert [info.path for info in list_all(agent)] == [str(parent)]


def test_nested_sub_agent_dirs(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    parent = session_with_one_exchange(agent / "sessions" / "-proj", "parent")
    task = _sub_agent(parent, "0-Plan", "plan")
    nested = _sub_agent(task, "0-Sub", "a sub-agent of a sub-agent")
    # A dir nested again without a session file beside it is tool output.
    stray = parent.with_suffix("") / "0-Plan-extra" / "deeper"
    stray.mkdir(parents=True)
    session_with_one_exchange(stray, "never listed")
    # A loop back up must not make discovery spin.
    (task.with_suffix("") / "loop").symlink_to(parent.parent)
    found = sub_agent_files(str(parent))
    assert found == [(str(task), str(parent)), (str(nested), str(task))]
    infos = {info.path: info.parent_file for info in list_all(agent)}
    assert infos == {str(parent): None, str(task): str(parent), str(nested): str(task)}


def test_artifacts_dir_is_not_a_project(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    parent = session_with_one_exchange(agent / "sessions" / "-proj", "parent")
    _sub_agent(parent, "0-T", "task")
    projects = {Path(info.path).parent.name for info in list_all(agent) if info.parent_file is None}
    assert projects == {"-proj"}


# --------------------------------------------------------------------------- context


def _entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind,
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        **fields,
    }


def test_newer_state_entries_set_context_fields() -> None:
    with SessionManager.in_memory("/w") as manager:
        empty = manager.build_session_context()
        assert empty["serviceTier"] is None
        assert empty["selectedMCPToolNames"] == []
        assert empty["hasPersistedMCPToolSelection"] is False
        manager.append_service_tier_change("priority")
        manager.append_context_change("prod", "acme", "default")
        manager.append_mcp_tool_selection(["mcp_a", "mcp_b"])
        manager.append_mcp_tool_selection(["mcp_c"])
        context = manager.build_session_context()
        assert context["serviceTier"] == "priority"
        assert context["activeContextName"] == "prod"
        assert context["activeContextTenant"] == "acme"
        assert context["selectedMCPToolNames"] == ["mcp_c"]
        assert context["hasPersistedMCPToolSelection"] is True
        manager.append_service_tier_change(None)
        manager.append_mcp_tool_selection([])
        cleared = manager.build_session_context()
        assert cleared["serviceTier"] is None
        assert cleared["selectedMCPToolNames"] == []
        assert cleared["hasPersistedMCPToolSelection"] is True
        types = [e["type"] for e in manager.get_entries()]
        assert types[:3] == ["service_tier_change", "context_change", "mcp_tool_selection"]
        assert manager.get_entries()[1]["namespace"] == "default"


def test_openai_remote_compaction_replaces_the_kept_tail() -> None:
    history = [{"type": "compaction", "encrypted_content": "opaque"}]
    entries = [
        _entry("message", "u1", None, message=user("one")),
        _entry("message", "a1", "u1", message=assistant("two")),
        _entry(
            "compaction",
            "c1",
            "a1",
            summary="s",
            firstKeptEntryId="u1",
            tokensBefore=9,
            preserveData={
                "openaiRemoteCompaction": {"provider": "openai", "replacementHistory": history}
            },
        ),
        _entry("message", "u2", "c1", message=user("after")),
    ]
    messages = build_session_context(entries)["messages"]
    assert [m["role"] for m in messages] == ["compactionSummary", "user"]
    assert messages[0]["providerPayload"] == {
        "type": "openaiResponsesHistory",
        "provider": "openai",
        "items": history,
    }


def test_malformed_remote_compaction_keeps_the_tail() -> None:
    for bad in (
        {"provider": "", "replacementHistory": []},
        {"provider": "openai", "replacementHistory": "not a list"},
        "not an object",
    ):
        entries = [
            _entry("message", "u1", None, message=user("one")),
            _entry(
                "compaction",
                "c1",
                "u1",
                summary="s",
                firstKeptEntryId="u1",
                tokensBefore=1,
                preserveData={"openaiRemoteCompaction": bad},
            ),
        ]
        messages = build_session_context(entries)["messages"]
        assert [m["role"] for m in messages] == ["compactionSummary", "user"]
        assert "providerPayload" not in messages[0]


def test_usage_counts_task_tool_results(tmp_path: Path) -> None:
    cost = {"total": 0.5}
    usage = {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": cost}
    sub_usage = {
        "input": 100,
        "output": 20,
        "cacheRead": 5,
        "cacheWrite": 1,
        "cost": {"total": 2.0},
    }
    with SessionManager.in_memory("/w") as manager:
        manager.append_message(assistant("calls task", usage=usage))
        manager.append_message(
            {
                "role": "toolResult",
                "toolCallId": "t1",
                "toolName": "task",
                "content": [{"type": "text", "text": "done"}],
                "details": {"usage": sub_usage},
                "timestamp": 1,
            }
        )
        manager.append_message(
            {
                "role": "toolResult",
                "toolCallId": "t2",
                "toolName": "bash",
                "content": [],
                "details": {"usage": sub_usage},  # not a task: not counted
                "timestamp": 2,
            }
        )
        totals = manager.get_usage_statistics()
    assert totals["input"] == 110 and totals["output"] == 22 and totals["cacheRead"] == 5
    assert totals["cost"] == 2.5


def test_unknown_entry_types_are_kept_and_never_fatal(tmp_path: Path) -> None:
    file = session_with_one_exchange(tmp_path / "agent" / "sessions" / "-p", "hello")
    odd = {"type": "future_thing", "id": "f0f0f0f0", "parentId": None, "timestamp": "x", "x": [1]}
    with file.open("ab") as fh:
        fh.write(orjson.dumps(odd) + b"\n")
    manager = SessionManager.open(file, browse=True)
    assert manager.get_entries()[-1] == odd
    assert manager.build_session_context()["messages"] == []  # a root of its own: empty path
    manager.branch(manager.get_entries()[1]["id"])
    assert [m["role"] for m in manager.build_session_context()["messages"]] == ["user", "assistant"]
