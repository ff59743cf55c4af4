"""The contract between the agents' readers and the Markdown renderer: a Claude Code
session's transcript messages render to the spec's ``transcript.md`` (one heading per
message with role, first uuid and time; thinking quoted; calls and results fenced;
images as ``[image <media_type>, N bytes]``), in the same Markdown as xcsh sessions;
and such a session held by the view (`LoadedSession` with the agent's reader):
renderings, catch-up, and writes refused."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import orjson
import pytest
from support import claude_code as cc
from support import codex_cli as cx

from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.renderings import RENDERINGS, render_source
from sessionfs.view.session_ref import SessionRef

IMAGE = "iVBORw0KGgo="  # 8 bytes


def _markdown(source: SessionSource) -> str:
    return render_source(source, "transcript.md").decode()


def test_claude_transcript_markdown(tmp_path: Path) -> None:
    lines = [
        {"type": "custom-title", "customTitle": "Look at a picture"},
        cc.user("u1", None, [cc.text("What is this?"), cc.image("image/png", IMAGE)], 1),
        cc.assistant("a1", "u1", "msg_1", cc.thinking("A PNG header."), 2),
        cc.assistant(
            "a2", "a1", "msg_1", cc.tool_use("toolu_1", "Read", {"file_path": "x.png"}), 3
        ),
        cc.tool_result("r1", "a2", "toolu_1", [cc.image("image/png", IMAGE)], 4, is_error=True),
        cc.assistant("a3", "r1", "msg_2", cc.text("An 8-byte PNG."), 5),
    ]
    source = ClaudeSession(cc.write_jsonl(tmp_path / "s.jsonl", lines))  # type: ignore[arg-type]
    assert _markdown(source) == (
        "# Look at a picture\n"
        f"\n## user · u1 · {cc.ts(1)}\n\n"
        "What is this?\n\n[image image/png, 8 bytes]\n"
        f"\n## assistant · a1 · {cc.ts(2)}\n\n"
        "> A PNG header.\n\n"
        "**tool call** `Read` `toolu_1`\n\n"
        '```json\n{\n  "file_path": "x.png"\n}\n```\n'
        f"\n## toolResult · r1 · {cc.ts(4)}\n\n"
        "result of `Read` `toolu_1` (error)\n\n"
        "```\n[image image/png, 8 bytes]\n```\n"
        f"\n## assistant · a3 · {cc.ts(5)}\n\n"
        "An 8-byte PNG.\n"
    )


def test_codex_transcript_markdown(tmp_path: Path) -> None:
    lines = [
        cx.session_meta(),
        cx.item(
            cx.message("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"), 1
        ),
        cx.item(cx.message("user", "List it"), 2),
        cx.event({"type": "user_message", "message": "List it"}, 2),
        cx.item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan"}]}, 3),
        cx.item(
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"cmd":"ls"}',
                "call_id": "c1",
            },
            4,
        ),
        cx.item({"type": "function_call_output", "call_id": "c1", "output": "a.py"}, 5),
        cx.item(cx.message("assistant", "One file."), 6),
        cx.event({"type": "agent_message", "message": "One file."}, 6),
    ]
    source = CodexSession(
        cx.write_jsonl(tmp_path / "rollout-x.jsonl", lines), index_title="Listing"
    )  # type: ignore[arg-type]
    assert _markdown(source) == (
        "# Listing\n"
        f"\n## user · 000002-response_item-message · {cx.ts(1)}\n\n"
        "[<environment_context> … 60 characters]\n"
        f"\n## user · 000003-response_item-message · {cx.ts(2)}\n\n"
        "List it\n"
        f"\n## assistant · 000005-response_item-reasoning · {cx.ts(3)}\n\n"
        "> Plan\n"
        f"\n## assistant · 000006-response_item-function_call · {cx.ts(4)}\n\n"
        "**tool call** `shell` `c1`\n\n"
        '```json\n{\n  "cmd": "ls"\n}\n```\n'
        f"\n## toolResult · 000007-response_item-function_call_output · {cx.ts(5)}\n\n"
        "result of `shell` `c1`\n\n"
        "```\na.py\n```\n"
        f"\n## assistant · 000008-response_item-message · {cx.ts(6)}\n\n"
        "One file.\n"
    )


def test_a_claude_session_held_by_the_view(tmp_path: Path) -> None:
    lines = [
        cc.user("u1", None, [cc.text("first")], 1),
        cc.assistant("a1", "u1", "msg_1", cc.text("answer"), 2),
    ]
    path = cc.write_jsonl(tmp_path / "s.jsonl", lines)  # type: ignore[arg-type]
    st = os.stat(path)
    ref = SessionRef("p", "s", Path(path), {}, st.st_mtime_ns, st.st_size)
    session = LoadedSession(ref=ref, opener=lambda r: ClaudeSession(r.path))
    session.load(warm="context.json")
    assert session.manager is None and session.memory_cost() > 0
    for what in RENDERINGS:
        assert session.rendered(what) == render_source(ClaudeSession(path), what)
    assert session.table().names == ["u1.json", "a1.json"]
    assert session.name_for_id(session.leaf_id()) == "a1.json"

    version = session.version
    with open(path, "ab") as f:  # another process appends one line
        f.write(orjson.dumps(cc.user("u2", "a1", [cc.text("more")], 3)) + b"\n")
    assert session.refresh() == 1 and session.version > version  # appended, not reloaded
    assert session.leaf_id() == "u2" and b"more" in session.rendered("transcript.md")

    replacement = tmp_path / "new.jsonl"
    cc.write_jsonl(replacement, lines[:1])  # type: ignore[arg-type]
    os.replace(replacement, path)
    assert session.refresh() == -1 and session.entry_count() == 1

    before = Path(path).read_bytes()
    with pytest.raises(WriteRejected) as refused:
        session.hydrated  # noqa: B018 -- the property is what a write asks for
    assert refused.value.errno == errno.EROFS
    assert session.manager is None and Path(path).read_bytes() == before
