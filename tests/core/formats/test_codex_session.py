"""Codex rollouts through ``CodexSession``: every rendering input asserted exactly,
on files written here in the documented formats (2026 envelopes, the 2025 format,
``.jsonl.zst``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import codex_cli as cx

from core.formats.base import TranscriptMessage
from core.formats.codex import CodexSession

PERMISSIONS = "<permissions instructions>\nSandbox: workspace-write.\n</permissions instructions>"
ENVIRONMENT = "<environment_context>\n  <cwd>/home/me/app</cwd>\n</environment_context>"
PNG_URL = "data:image/png;base64,cG5n"
SHELL = {
    "name": "shell",
    "arguments": '{"command":["ls"]}',
    "call_id": "call_1",
    "type": "function_call",
}
PATCH = {
    "type": "custom_tool_call",
    "name": "apply_patch",
    "input": "*** Begin Patch",
    "call_id": "call_2",
}
LOCAL = {
    "type": "local_shell_call",
    "call_id": "call_3",
    "action": {"type": "exec", "command": ["rm", "b.py"]},
}
SEARCH = {
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "python"},
}
REASONING = {
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "**Listing**"}],
    "encrypted_content": "e1",
}
SECRET = {"type": "reasoning", "summary": [], "encrypted_content": "e2"}
USER_IMAGE = {
    "type": "message",
    "role": "user",
    "content": [
        {"type": "input_text", "text": "Now delete b.py"},
        {"type": "input_image", "image_url": PNG_URL},
    ],
}
OUT_1 = {"type": "function_call_output", "call_id": "call_1", "output": "a.py\nb.py"}
OUT_2 = {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"}
OUT_3 = {
    "type": "function_call_output",
    "call_id": "call_3",
    "output": {"content": "rm: denied", "success": False},
}


def _main_lines() -> list[dict[str, Any] | bytes]:
    """Duplicated user/assistant text (response_item + event_msg), calls answered out
    of order, junk, an unknown kind, a rollback of the last turn, a title and usage."""
    return [
        cx.session_meta(),  # 1
        cx.item(cx.message("developer", PERMISSIONS), 1),  # 2
        cx.item(cx.message("user", ENVIRONMENT), 1),  # 3
        cx.turn_context("gpt-5-codex", 2),  # 4
        cx.item(cx.message("user", "List the files"), 3),  # 5
        cx.event({"type": "user_message", "message": "List the files", "images": []}, 3),  # 6
        cx.item(REASONING, 4),  # 7
        cx.item(SHELL, 5),  # 8
        cx.item(SECRET, 6),  # 9
        cx.item(PATCH, 7),  # 10
        cx.item(OUT_1, 8),  # 11: call_1's output after call_2
        cx.item(OUT_2, 9),  # 12
        cx.item(cx.message("assistant", "Two files."), 10),  # 13
        cx.event({"type": "agent_message", "message": "Two files."}, 10),  # 14
        cx.token_count(100, 40, 20, 11),  # 15
        b"{ not json",  # 16
        {"timestamp": cx.ts(12), "type": "future_kind", "payload": {"x": 1}},  # 17
        cx.turn_context("gpt-5.1-codex", 13),  # 18
        cx.item(USER_IMAGE, 14),  # 19
        cx.item(LOCAL, 15),  # 20
        cx.item(OUT_3, 16),  # 21
        cx.item(SEARCH, 17),  # 22
        cx.event({"type": "thread_rolled_back", "num_turns": 1}, 18),  # 23
        cx.event({"type": "thread_name_updated", "thread_name": "Files cleanup"}, 19),  # 24
        cx.token_count(300, 100, 50, 20),  # 25
        cx.item(cx.message("user", "Thanks"), 21),  # 26
        cx.item(cx.message("assistant", "You're welcome"), 22),  # 27
    ]


@pytest.fixture
def main_session(tmp_path: Path) -> CodexSession:
    path = cx.write_jsonl(
        tmp_path / f"rollout-2026-03-02T09-00-00-{cx.THREAD_ID}.jsonl", _main_lines()
    )
    return CodexSession(path, index_title="from the index")


def test_entries_named_by_line_kind_and_payload_type(main_session: CodexSession) -> None:
    s = main_session
    names = [s.entry_name(i) for i in range(len(s))]
    assert names[:6] == [
        "000001-session_meta",
        "000002-response_item-message",
        "000003-response_item-message",
        "000004-turn_context",
        "000005-response_item-message",
        "000006-event_msg-user_message",
    ]
    assert names[14:17] == [
        "000015-event_msg-token_count",
        "000017-future_kind",
        "000018-turn_context",
    ]
    assert len(s) == 26
    assert s.raw_line(16) == orjson.dumps(_main_lines()[17])
    assert s.index_of("000017-future_kind") == 15
    assert s.leaf_name() == "000027-response_item-message"
    assert s.path_indexes() == list(range(26))
    assert s.forest().roots == [0] and s.forest().children[3] == [4]
    assert s.entry_time_ms(0) == 1772442000000


def test_context_items_in_own_shape_after_rollback(main_session: CodexSession) -> None:
    lines = _main_lines()
    kept = [2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 26, 27]  # 19-22: the rolled back turn
    assert main_session.context() == {
        "messages": [lines[n - 1]["payload"] for n in kept],  # type: ignore[index]
        "model": "gpt-5.1-codex",
    }


def _folded(text: str) -> str:
    return f"[{text.split(chr(10))[0]} … {len(text)} characters]"


def test_transcript_from_response_items_calls_paired(main_session: CodexSession) -> None:
    def tm(line: int, second: int, message: dict[str, Any]) -> TranscriptMessage:
        kinds = {
            11: "function_call_output",
            12: "custom_tool_call_output",
            21: "function_call_output",
        }
        payload = {
            7: "reasoning",
            8: "function_call",
            10: "custom_tool_call",
            20: "local_shell_call",
        }
        payload.update({22: "web_search_call"} | kinds)
        name = f"{line:06d}-response_item-{payload.get(line, 'message')}"
        return TranscriptMessage(name, cx.ts(second), message)

    def text(value: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": value}]

    def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
        return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}

    def result(call_id: str, name: str, output: str, error: bool = False) -> dict[str, Any]:
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "isError": error,
            "content": text(output),
        }

    assert main_session.transcript_messages() == [
        tm(2, 1, {"role": "developer", "content": text(_folded(PERMISSIONS))}),
        tm(3, 1, {"role": "user", "content": text(_folded(ENVIRONMENT))}),
        tm(5, 3, {"role": "user", "content": text("List the files")}),
        tm(
            7,
            4,
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "**Listing**"}]},
        ),
        tm(8, 5, {"role": "assistant", "content": [call("call_1", "shell", {"command": ["ls"]})]}),
        tm(11, 8, result("call_1", "shell", "a.py\nb.py")),
        tm(
            10,
            7,
            {"role": "assistant", "content": [call("call_2", "apply_patch", "*** Begin Patch")]},
        ),
        tm(12, 9, result("call_2", "apply_patch", "Done!")),
        tm(13, 10, {"role": "assistant", "content": text("Two files.")}),
        tm(
            19,
            14,
            {
                "role": "user",
                "content": [
                    *text("Now delete b.py"),
                    {"type": "text", "text": "[image image/png, 3 bytes]"},
                ],
            },
        ),
        tm(
            20,
            15,
            {"role": "assistant", "content": [call("call_3", "local_shell", LOCAL["action"])]},
        ),
        tm(21, 16, result("call_3", "local_shell", "rm: denied", error=True)),
        tm(22, 17, {"role": "assistant", "content": [call("", "web_search", SEARCH["action"])]}),
        tm(26, 21, {"role": "user", "content": text("Thanks")}),
        tm(27, 22, {"role": "assistant", "content": text("You're welcome")}),
    ]


def test_stats(main_session: CodexSession) -> None:
    assert main_session.stats() == {
        "entries": 26,
        "byType": {
            "event_msg-agent_message": 1,
            "event_msg-thread_name_updated": 1,
            "event_msg-thread_rolled_back": 1,
            "event_msg-token_count": 2,
            "event_msg-user_message": 1,
            "future_kind": 1,
            "response_item-custom_tool_call": 1,
            "response_item-custom_tool_call_output": 1,
            "response_item-function_call": 1,
            "response_item-function_call_output": 2,
            "response_item-local_shell_call": 1,
            "response_item-message": 7,
            "response_item-reasoning": 2,
            "response_item-web_search_call": 1,
            "session_meta": 1,
            "turn_context": 2,
        },
        "byRole": {"assistant": 2, "developer": 1, "user": 4},
        "leafCount": 1,
        "roots": 1,
        "depth": 26,
        "leafId": "000027-response_item-message",
        "pathLength": 26,
        "usage": {"input": 300, "output": 50, "cacheRead": 100},
        "malformedLines": 1,
    }


def test_header_and_titles(main_session: CodexSession, tmp_path: Path) -> None:
    assert main_session.header() == {
        "agent": "codex",
        "id": cx.THREAD_ID,
        "cwd": cx.CWD,
        "cli_version": "0.63.0",
        "model_provider": "openai",
        "git": {"commit_hash": "abc123", "branch": "main", "repository_url": "git@x:me/app.git"},
        "forked_from_id": None,
        "archived": False,
        "timestamp": cx.ts(0),
        "file": str(main_session.path),
    }
    assert main_session.title() == "Files cleanup"  # the file's own name wins
    plain = cx.write_jsonl(tmp_path / "rollout-b.jsonl", [cx.session_meta()])
    assert CodexSession(plain, index_title="from the index").title() == "from the index"
    assert CodexSession(plain).title() == ""


def test_fork_header_is_the_first_session_meta(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        cx.session_meta(0, "fork-id", forked_from_id=cx.THREAD_ID),
        cx.session_meta(0, cx.THREAD_ID),
        cx.item(cx.message("user", "copied from the parent"), 1),
    ]
    s = CodexSession(cx.write_jsonl(tmp_path / "rollout-fork.jsonl", lines))
    assert s.header()["id"] == "fork-id"
    assert s.header()["forked_from_id"] == cx.THREAD_ID


def test_compacted_replaces_what_came_before(tmp_path: Path) -> None:
    replacement = [cx.message("user", "first"), cx.message("user", "summary text")]
    lines: list[dict[str, Any] | bytes] = [
        cx.session_meta(),
        cx.item(cx.message("user", "first"), 1),
        cx.item(cx.message("assistant", "a1"), 2),
        cx.line("compacted", {"message": "summary text", "replacement_history": replacement}, 3),
        cx.event({"type": "context_compacted"}, 3),
        cx.item(cx.message("user", "after"), 4),
        cx.item(cx.message("assistant", "ok"), 5),
    ]
    s = CodexSession(cx.write_jsonl(tmp_path / "rollout-c.jsonl", lines))
    assert s.context()["messages"] == [
        *replacement,
        cx.message("user", "after"),
        cx.message("assistant", "ok"),
    ]
    transcript = s.transcript_messages()
    assert [m.entry_name for m in transcript] == [
        "000002-response_item-message",
        "000003-response_item-message",
        "000004-compacted",
        "000006-response_item-message",
        "000007-response_item-message",
    ]
    assert transcript[2].message == {"role": "compactionSummary", "summary": "summary text"}
    older = [*lines[:3], cx.line("compacted", {"message": "only a summary"}, 3), *lines[5:]]
    s = CodexSession(cx.write_jsonl(tmp_path / "rollout-d.jsonl", older))
    assert s.context()["messages"] == [
        cx.message("user", "only a summary"),
        cx.message("user", "after"),
        cx.message("assistant", "ok"),
    ]


def test_rollback_more_turns_than_there_are(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        cx.session_meta(),
        cx.item(cx.message("user", ENVIRONMENT), 1),
        cx.item(cx.message("user", "one"), 2),
        cx.item(cx.message("assistant", "1"), 3),
        cx.item(cx.message("user", "two"), 4),
        cx.event({"type": "thread_rolled_back", "num_turns": 5}, 5),
        cx.item(cx.message("user", "three"), 6),
    ]
    s = CodexSession(cx.write_jsonl(tmp_path / "rollout-r.jsonl", lines))
    assert s.context()["messages"] == [cx.message("user", ENVIRONMENT), cx.message("user", "three")]


def test_2025_format_without_envelopes(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        {"id": "legacy-id", "timestamp": "2025-05-01T12:00:00.000Z", "instructions": None},
        {"record_type": "state"},
        cx.message("user", "hello"),
        cx.message("assistant", "hi"),
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"record_type": "state"},
    ]
    s = CodexSession(
        cx.write_jsonl(tmp_path / "rollout-2025-05-01T12-00-00-legacy-id.jsonl", lines)
    )
    assert [s.entry_name(i) for i in range(len(s))] == [
        "000001-session_meta",
        "000002-state",
        "000003-response_item-message",
        "000004-response_item-message",
        "000005-response_item-function_call",
        "000006-response_item-function_call_output",
        "000007-state",
    ]
    header = s.header()
    assert header["id"] == "legacy-id" and header["timestamp"] == "2025-05-01T12:00:00.000Z"
    assert header["cwd"] is None
    assert s.context()["messages"] == lines[2:6]
    assert [m.message["role"] for m in s.transcript_messages()] == [
        "user",
        "assistant",
        "assistant",
        "toolResult",
    ]
    assert s.transcript_messages()[0].time == ""
    assert s.stats()["byType"] == {
        "response_item-function_call": 1,
        "response_item-function_call_output": 1,
        "response_item-message": 2,
        "session_meta": 1,
        "state": 2,
    }


def test_zst_archive_read_as_stream(tmp_path: Path) -> None:
    archive = (
        tmp_path / "archived_sessions" / f"rollout-2026-03-02T09-00-00-{cx.THREAD_ID}.jsonl.zst"
    )
    archive.parent.mkdir()
    cx.write_zst(archive, _main_lines())
    s = CodexSession(archive)
    assert s.header()["archived"] is True
    assert len(s) == 26 and s.title() == "Files cleanup"
    assert s.raw_line(0) == orjson.dumps(_main_lines()[0])
    assert s.catch_up() is False


def test_growing_rollout(main_session: CodexSession) -> None:
    assert main_session.catch_up() is False
    with main_session.path.open("ab") as f:
        f.write(orjson.dumps(cx.item(cx.message("user", "more"), 30)) + b"\n")
        f.write(b'{"timestamp": "' + cx.ts(31).encode())  # torn: waits
    assert main_session.catch_up() is True
    assert main_session.leaf_name() == "000028-response_item-message"
    assert main_session.context()["messages"][-1] == cx.message("user", "more")
    assert main_session.stats()["depth"] == 27
    with main_session.path.open("ab") as f:
        f.write(b'", "type": "event_msg", "payload": {"type": "task_complete"}}\n')
    assert main_session.catch_up() is True
    assert main_session.leaf_name() == "000029-event_msg-task_complete"


def test_a_chosen_leaf_ends_path_context_and_transcript(main_session: CodexSession) -> None:
    """An earlier line chosen as leaf (the mount's ``ln -sfn``): the session as it was
    when that line was the last."""
    own = main_session.leaf_name()
    earlier = main_session.entry_name(12)  # line 13: "Two files."
    main_session.choose_leaf(earlier)
    assert main_session.leaf_name() == earlier and main_session.own_leaf_name() == own
    assert main_session.path_indexes() == list(range(13))
    said = json.dumps(main_session.context()["messages"])
    assert "Two files." in said and "Thanks" not in said
    assert "Thanks" not in json.dumps([t.message for t in main_session.transcript_messages()])
    main_session.choose_leaf(None)
    assert "Thanks" in json.dumps(main_session.context()["messages"])
