"""Every line type and block the spec lists, in both agents' formats: each is shown
in ``entries/`` as stored, and the context and transcript take exactly the ones that
carry conversation (a kind not known never fails a session)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
from support import claude_code as cc
from support import codex_cli as cx

from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession

GIF = base64.b64encode(b"GIF89a").decode()


def test_claude_every_line_type_and_block(tmp_path: Path) -> None:
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    failed = [cc.text("boom"), cc.image("image/gif", GIF)]
    lines: list[dict[str, Any] | bytes] = [
        {"type": "queue-operation", "operation": "enqueue", "content": "later"},
        cc.user("u1", None, [cc.text("look at this"), cc.image("image/gif", GIF)], 1),
        cc.chain_line("progress", "p1", "u1", 2, data={"type": "hook_progress"}),  # legacy
        cc.assistant("a1", "p1", "msg_1", redacted, 3),
        cc.assistant("a2", "a1", "msg_1", cc.tool_use("toolu_1", "Bash", {"command": "x"}), 4),
        cc.tool_result("r1", "a2", "toolu_1", failed, 5, is_error=True),
        cc.system("s1", "r1", "local_command", 6),
        cc.attachment("at1", "s1", 7),
        cc.assistant("a3", "at1", "msg_2", cc.text("it failed"), 8),
        {"type": "mode", "mode": "plan"},
        {"type": "pr-link", "url": "https://example.invalid/pr/1"},
        {"type": "tag", "tag": "t"},
        {"type": "last-prompt", "lastPrompt": "look at this"},
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
        {"type": "brand-new-kind", "uuid": "n1", "parentUuid": "a3", "timestamp": cc.ts(9)},
    ]
    path = cc.write_jsonl(tmp_path / "all.jsonl", lines)
    s = ClaudeSession(path)
    assert len(s) == len(lines)
    assert [orjson.loads(s.raw_line(i)) for i in range(len(s))] == lines
    assert [s.entry_name(i) for i in range(len(s))][:3] == ["meta-1-queue-operation", "u1", "p1"]
    assert s.leaf_name() == "a3"  # n1, an unknown chain line, walks up to it
    assert s.context()["messages"] == [
        lines[1]["message"],  # type: ignore[index]
        {
            "role": "assistant",
            "content": [redacted, cc.tool_use("toolu_1", "Bash", {"command": "x"})],
        },
        {"role": "user", "content": [lines[5]["message"]["content"][0]]},  # type: ignore[index]
        {"role": "assistant", "content": [cc.text("it failed")]},
    ]
    assert [m.message for m in s.transcript_messages()] == [
        {
            "role": "user",
            "content": [cc.text("look at this"), cc.text("[image image/gif, 6 bytes]")],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "[redacted thinking]"},
                {
                    "type": "toolCall",
                    "id": "toolu_1",
                    "name": "Bash",
                    "arguments": {"command": "x"},
                },
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "toolu_1",
            "toolName": "Bash",
            "isError": True,
            "content": [cc.text("boom"), cc.text("[image image/gif, 6 bytes]")],
        },
        {"role": "assistant", "content": [cc.text("it failed")]},
    ]
    assert s.stats()["byType"]["progress"] == 1 and s.stats()["byType"]["brand-new-kind"] == 1


def test_codex_every_kind_and_payload_type(tmp_path: Path) -> None:
    parts_output = {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [
            {"type": "input_text", "text": "listing"},
            {"type": "input_image", "image_url": "data:image/gif;base64," + GIF},
        ],
    }
    system = cx.message("system", "<system note>\nbe brief")
    lines: list[dict[str, Any] | bytes] = [
        cx.session_meta(),
        cx.event({"type": "task_started", "model_context_window": 272000}, 1),
        cx.turn_context("gpt-5-codex", 1),
        cx.item(system, 1),
        {**cx.item(cx.message("user", "hello"), 2), "ordinal": 4, "metadata": {"turn_id": "t1"}},
        cx.event({"type": "user_message", "message": "hello", "images": []}, 2),
        cx.event({"type": "agent_reasoning", "text": "thinking it over"}, 3),
        cx.item(
            {"type": "function_call", "name": "shell", "arguments": "not json", "call_id": "c1"}, 4
        ),
        cx.item(parts_output, 5),
        cx.item({"type": "compaction", "encrypted_content": "opaque"}, 6),
        cx.item(
            {"type": "ghost_snapshot", "ghost_commit": {"id": "x"}}, 7
        ),  # not listed: shown only
        cx.event({"type": "turn_aborted", "reason": "interrupted"}, 8),
        cx.event({"type": "task_complete", "last_agent_message": None}, 9),
    ]
    path = cx.write_jsonl(tmp_path / "rollout-all.jsonl", lines)
    s = CodexSession(path)
    assert [orjson.loads(s.raw_line(i)) for i in range(len(s))] == lines
    assert s.entry_name(10) == "000011-response_item-ghost_snapshot"
    assert s.context()["messages"] == [line["payload"] for line in lines[3:5] + lines[7:11]]  # type: ignore[index]
    assert [m.message for m in s.transcript_messages()] == [
        {
            "role": "system",
            "content": [{"type": "text", "text": "[<system note> … 22 characters]"}],
        },
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c1", "name": "shell", "arguments": "not json"}],
        },
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "shell",
            "isError": False,
            "content": [
                {"type": "text", "text": "listing"},
                {"type": "text", "text": "[image image/gif, 6 bytes]"},
            ],
        },
    ]
    assert s.stats()["byRole"] == {"system": 1, "user": 1}
