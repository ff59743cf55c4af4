"""Claude Code sessions through ``ClaudeSession``: every rendering input (entries,
path, leaf, context, transcript messages, stats, header, title) asserted exactly, on
files written here in the documented format."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import claude_code as cc

from core.formats.base import TranscriptMessage
from core.formats.claude import ClaudeSession

PNG = base64.b64encode(b"png").decode()
READ_ARGS = {"file_path": "app.py"}
BASH_ARGS = {"command": "ls"}
U1 = cc.user("u1", None, "Fix the bug in app.py", 1)


def _main_lines() -> list[dict[str, Any] | bytes]:
    """Split responses (msg_1 over four lines, one of them off the path: parallel tool
    calls), an isMeta line, an attachment, junk, a rewind under a5, a sidechain,
    a replayed uuid, metadata titles, unknown types and a torn tail."""
    big = cc.usage(100, 5, 1000, 50)
    return [
        {"type": "summary", "summary": "Older summary", "leafUuid": "a5"},  # 1
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},  # 2
        U1,  # 3
        cc.user("m1", "u1", "<local-command-caveat>ignore</local-command-caveat>", 2, isMeta=True),
        cc.assistant("a1", "m1", "msg_1", cc.thinking("Let me look."), 3, big),  # 5
        cc.assistant("a2", "a1", "msg_1", cc.text("Looking."), 4, big),  # 6
        cc.assistant("a3", "a2", "msg_1", cc.tool_use("toolu_1", "Read", READ_ARGS), 5, big),
        cc.tool_result("r1", "a3", "toolu_1", "print(1)", 6),  # 8
        cc.assistant(
            "a4",
            "a3",
            "msg_1",
            cc.tool_use("toolu_2", "Bash", BASH_ARGS),
            7,
            cc.usage(100, 40, 1000, 50),
        ),  # 9: a sibling of r1, off the path
        cc.tool_result("r2", "r1", "toolu_2", [cc.text("app.py"), cc.image("image/png", PNG)], 8),
        b"this is not json {",  # 11
        cc.attachment("at1", "r2", 9),  # 12
        cc.assistant("a5", "at1", "msg_2", cc.text("Fixed it."), 10, cc.usage(200, 20, 2000)),
        cc.system("sh1", "a5", "stop_hook_summary", 11),  # 14
        cc.user("u3", "a5", "Now add tests", 12),  # 15
        cc.assistant("a6", "u3", "msg_3", cc.text("Tests added."), 13, cc.usage(300, 30)),
        cc.user("u3b", "a5", "Now add docs instead", 20),  # 17: the rewind
        cc.assistant("a6b", "u3b", "msg_4", cc.text("Docs added."), 21, cc.usage(400, 40)),
        cc.user("sc1", "a6b", "side task", 30, isSidechain=True),  # 19
        cc.assistant(
            "sc2", "sc1", "msg_5", cc.text("side answer"), 31, cc.usage(50, 5), isSidechain=True
        ),
        cc.user("u1", None, "REPLAYED", 40),  # 21: a resumed session's replay
        {"type": "ai-title", "aiTitle": "Fix app bug", "sessionId": cc.SESSION_ID},  # 22
        {"type": "custom-title", "customTitle": "first name", "sessionId": cc.SESSION_ID},
        {"type": "future-kind", "uuid": "fk1", "parentUuid": "a6b", "timestamp": cc.ts(22)},
        {"type": "mystery", "value": 1},  # 25
        {"type": "custom-title", "customTitle": "Bug fix session", "sessionId": cc.SESSION_ID},
        {"type": "tag", "tag": "x"},  # 27
        {"type": "last-prompt", "lastPrompt": "Now add docs instead"},  # 28
        b'{"type":"user","uuid":"torn',  # 29: half a line
    ]


@pytest.fixture
def main_session(tmp_path: Path) -> ClaudeSession:
    path = cc.write_jsonl(tmp_path / f"{cc.SESSION_ID}.jsonl", _main_lines())
    return ClaudeSession(path)


NAMES = [
    "meta-1-summary",
    "meta-2-file-history-snapshot",
    "u1", "m1", "a1", "a2", "a3", "r1", "a4", "r2", "at1", "a5", "sh1", "u3", "a6", "u3b",
    "a6b", "sc1", "sc2",
    "meta-22-ai-title",
    "meta-23-custom-title",
    "fk1",
    "meta-25-mystery",
    "meta-26-custom-title",
    "meta-27-tag",
    "meta-28-last-prompt",
]  # fmt: skip


def _names(session: ClaudeSession, indexes: list[int]) -> list[str]:
    return [session.entry_name(i) for i in indexes]


def test_entries_in_file_order_replay_shown_once(main_session: ClaudeSession) -> None:
    s = main_session
    assert [s.entry_name(i) for i in range(len(s))] == NAMES
    u1 = s.index_of("u1")
    assert u1 is not None
    assert s.entry(u1)["message"]["content"] == "Fix the bug in app.py"  # the first
    lines = s.path.read_bytes().split(b"\n")
    for index in range(len(s)):
        assert s.raw_line(index) in lines
    assert s.raw_line(u1) == lines[2]
    assert s.index_of("meta-25-mystery") == NAMES.index("meta-25-mystery")
    assert s.index_of("torn") is None and s.index_of("nope") is None
    assert s.entry_time_ms(u1) == 1772359201000
    assert s.entry_time_ms(0) is None


def test_leaf_is_newest_non_sidechain_tip_and_path(main_session: ClaudeSession) -> None:
    s = main_session
    assert s.leaf_name() == "a6b"
    assert _names(s, s.path_indexes()) == [
        "u1", "m1", "a1", "a2", "a3", "r1", "r2", "at1", "a5", "u3b", "a6b",
    ]  # fmt: skip
    a5 = s.index_of("a5")
    assert _names(s, s.forest().children[a5]) == ["sh1", "u3", "u3b"]  # oldest first
    assert _names(s, s.forest().children[s.index_of("a3")]) == ["r1", "a4"]
    assert _names(s, s.forest().roots) == [
        "meta-1-summary", "meta-2-file-history-snapshot", "u1", "meta-22-ai-title",
        "meta-23-custom-title", "meta-25-mystery", "meta-26-custom-title", "meta-27-tag",
        "meta-28-last-prompt",
    ]  # fmt: skip


def test_context_merges_one_response_and_places_results(main_session: ClaudeSession) -> None:
    results = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": [cc.text("app.py"), cc.image("image/png", PNG)],
            "is_error": False,
        },
    ]
    assert main_session.context() == {
        "messages": [
            {
                # consecutive user lines are one message; the isMeta caveat is sent too
                "role": "user",
                "content": [
                    cc.text("Fix the bug in app.py\n"),
                    cc.text("<local-command-caveat>ignore</local-command-caveat>"),
                ],
            },
            {
                "role": "assistant",
                "content": [
                    cc.thinking("Let me look."),
                    cc.text("Looking."),
                    cc.tool_use("toolu_1", "Read", READ_ARGS),
                    cc.tool_use("toolu_2", "Bash", BASH_ARGS),
                ],
            },
            {"role": "user", "content": results},
            {"role": "assistant", "content": [cc.text("Fixed it.")]},
            {"role": "user", "content": "Now add docs instead"},
            {"role": "assistant", "content": [cc.text("Docs added.")]},
        ],
        "model": "claude-sonnet-4-5",
    }


def test_transcript_messages(main_session: ClaudeSession) -> None:
    assert main_session.transcript_messages() == [
        TranscriptMessage("u1", cc.ts(1), {"role": "user", "content": "Fix the bug in app.py"}),
        TranscriptMessage(
            "m1",
            cc.ts(2),
            {"role": "user", "content": "<local-command-caveat>ignore</local-command-caveat>"},
        ),
        TranscriptMessage(
            "a1",
            cc.ts(3),
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Let me look."},
                    {"type": "text", "text": "Looking."},
                    {"type": "toolCall", "id": "toolu_1", "name": "Read", "arguments": READ_ARGS},
                    {"type": "toolCall", "id": "toolu_2", "name": "Bash", "arguments": BASH_ARGS},
                ],
            },
        ),
        TranscriptMessage(
            "r1",
            cc.ts(6),
            {
                "role": "toolResult",
                "toolCallId": "toolu_1",
                "toolName": "Read",
                "isError": False,
                "content": [{"type": "text", "text": "print(1)"}],
            },
        ),
        TranscriptMessage(
            "r2",
            cc.ts(8),
            {
                "role": "toolResult",
                "toolCallId": "toolu_2",
                "toolName": "Bash",
                "isError": False,
                "content": [
                    {"type": "text", "text": "app.py"},
                    {"type": "text", "text": "[image image/png, 3 bytes]"},
                ],
            },
        ),
        TranscriptMessage(
            "a5", cc.ts(10), {"role": "assistant", "content": [cc.text("Fixed it.")]}
        ),
        TranscriptMessage("u3b", cc.ts(20), {"role": "user", "content": "Now add docs instead"}),
        TranscriptMessage(
            "a6b", cc.ts(21), {"role": "assistant", "content": [cc.text("Docs added.")]}
        ),
    ]


def test_stats_usage_once_per_message_id(main_session: ClaudeSession) -> None:
    assert main_session.stats() == {
        "entries": 26,
        "byType": {
            "ai-title": 1,
            "assistant": 8,
            "attachment": 1,
            "custom-title": 2,
            "file-history-snapshot": 1,
            "future-kind": 1,
            "last-prompt": 1,
            "mystery": 1,
            "summary": 1,
            "system": 1,
            "tag": 1,
            "user": 7,
        },
        "byRole": {"assistant": 8, "user": 7},
        "leafCount": 13,
        "roots": 9,
        "depth": 13,
        "leafId": "a6b",
        "pathLength": 11,
        # msg_1 counted once, with its last line's usage (output 40, not 5+5+5+40)
        "usage": {"input": 1050, "output": 135, "cacheRead": 3000, "cacheWrite": 50},
        "malformedLines": 1,
    }


def test_header_and_title(main_session: ClaudeSession) -> None:
    assert main_session.header() == {
        "agent": "claude",
        "id": cc.SESSION_ID,
        "cwd": cc.CWD,
        "version": cc.VERSION,
        "gitBranch": cc.BRANCH,
        "timestamp": cc.ts(1),
        "file": str(main_session.path),
    }
    assert main_session.title() == "Bug fix session"  # the later custom title


def test_tree_descriptions(main_session: ClaudeSession) -> None:
    s = main_session

    def described(name: str) -> tuple[str, str]:
        index = s.index_of(name)
        assert index is not None
        return s.entry_kind(index), s.entry_text(index)

    assert described("a1") == ("assistant", "Let me look.")
    assert described("a3") == ("assistant", "Read")
    assert described("r1") == ("user", "print(1)")
    assert described("sh1") == ("system", "stop_hook_summary")
    assert described("at1") == ("attachment", "hook_success")
    assert described("meta-26-custom-title") == ("custom-title", "Bug fix session")
    assert described("meta-1-summary") == ("summary", "Older summary")
    assert described("fk1") == ("future-kind", "")


def test_appended_lines_and_completed_torn_line(main_session: ClaudeSession) -> None:
    s = main_session
    assert s.catch_up() is False
    with s.path.open("ab") as f:
        f.write(b'", "parentUuid": "a6b", "timestamp": "' + cc.ts(50).encode() + b'"}\n')
    assert s.catch_up() is True
    assert s.entry_name(len(s) - 1) == "torn"
    assert s.leaf_name() == "torn"  # a user line, the newest tip
    assert s.context()["messages"][-1]["content"] == [cc.text("Docs added.")]  # no message
    with s.path.open("ab") as f:
        f.write(orjson.dumps(cc.user("u9", "torn", "after the torn one", 51)) + b"\n")
        f.write(orjson.dumps(cc.assistant("a9", "u9", "msg_9", cc.text("yes"), 52)) + b"\n")
    assert s.catch_up() is True
    assert s.leaf_name() == "a9"
    assert _names(s, s.path_indexes())[-4:] == ["a6b", "torn", "u9", "a9"]
    assert s.context()["messages"][-2:] == [
        {"role": "user", "content": "after the torn one"},
        {"role": "assistant", "content": [cc.text("yes")]},
    ]
    assert s.stats()["entries"] == 29
    s.path.write_bytes(orjson.dumps(U1) + b"\n")  # replaced by a shorter file
    assert s.catch_up() is True
    assert len(s) == 1 and s.leaf_name() == "u1" and s.title() == ""


def _two_exchanges(asked: str, answered: str) -> list[dict[str, Any] | bytes]:
    """u1 -> a1 ("hi") -> u2 (``asked``) -> a2 (``answered``): what a compaction follows."""
    return [
        U1,
        cc.assistant("a1", "u1", "msg_1", cc.text("hi"), 2),
        cc.user("u2", "a1", asked, 3),
        cc.assistant("a2", "u2", "msg_2", cc.text(answered), 4),
    ]


def test_compaction_new_root_path_follows_logical_parent(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        *_two_exchanges("more", "sure"),
        cc.compact_boundary("cb", "a2", 5),
        cc.user(
            "cs",
            "cb",
            "This session is being continued. Summary: bug fixed.",
            6,
            isCompactSummary=True,
        ),
        cc.user("u3", "cs", [cc.text("look"), cc.image("image/jpeg", PNG)], 7),
        cc.assistant("a3", "u3", "msg_3", cc.text("seen"), 8, model="claude-opus-4-1"),
        {"type": "ai-title", "aiTitle": "first ai"},
        {"type": "summary", "summary": "a summary", "leafUuid": "a3"},
        {"type": "ai-title", "aiTitle": "second ai"},
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "c.jsonl", lines))
    assert s.leaf_name() == "a3"
    assert _names(s, s.path_indexes()) == ["u1", "a1", "u2", "a2", "cb", "cs", "u3", "a3"]
    assert _names(s, s.forest().roots) == [
        "u1", "meta-9-ai-title", "meta-10-summary", "meta-11-ai-title",
    ]  # fmt: skip
    assert s.context() == {
        "messages": [
            {
                "role": "user",
                "content": [
                    cc.text("This session is being continued. Summary: bug fixed.\n"),
                    cc.text("look"),
                    cc.image("image/jpeg", PNG),
                ],
            },
            {"role": "assistant", "content": [cc.text("seen")]},
        ],
        "model": "claude-opus-4-1",
    }
    assert next(m.message for m in s.transcript_messages()) == {
        "role": "user",
        "content": "This session is being continued. Summary: bug fixed.",
    }
    assert [m.message for m in s.transcript_messages()][1] == {
        "role": "user",
        "content": [cc.text("look"), {"type": "text", "text": "[image image/jpeg, 3 bytes]"}],
    }
    assert s.stats()["roots"] == 4 and s.stats()["depth"] == 8
    assert s.title() == "second ai"


def test_titles_newest_summary_else_last_prompt_else_empty(tmp_path: Path) -> None:
    summaries: list[dict[str, Any] | bytes] = [
        {"type": "summary", "summary": "old", "leafUuid": "u1"},
        U1,
        {"type": "summary", "summary": "new", "leafUuid": "u1"},
        {"type": "last-prompt", "lastPrompt": "Fix the bug in app.py"},
    ]
    assert ClaudeSession(cc.write_jsonl(tmp_path / "a.jsonl", summaries)).title() == "new"
    prompted = [U1, {"type": "last-prompt", "lastPrompt": "Fix the bug in app.py"}]
    title = ClaudeSession(cc.write_jsonl(tmp_path / "p.jsonl", prompted)).title()
    assert title == "Fix the bug in app.py"  # an untitled print-mode session
    assert ClaudeSession(cc.write_jsonl(tmp_path / "b.jsonl", [U1])).title() == ""


def test_leaf_is_the_last_prompts_leaf_uuid(tmp_path: Path) -> None:
    """Claude Code's own leaf wins over the newest tip (here an attachment after a
    compaction, and then an older branch it was told to resume at)."""
    lines: list[dict[str, Any] | bytes] = [
        U1,
        cc.assistant("a1", "u1", "msg_1", cc.text("hi"), 2),
        cc.attachment("at1", "a1", 3),
        {"type": "last-prompt", "lastPrompt": "Fix", "leafUuid": "at1"},
    ]
    path = cc.write_jsonl(tmp_path / "l.jsonl", lines)
    s = ClaudeSession(path)
    assert s.leaf_name() == "at1"
    assert _names(s, s.path_indexes()) == ["u1", "a1", "at1"]
    more = [cc.user("u2", "a1", "again", 9), {"type": "last-prompt", "leafUuid": "u1"}]
    with path.open("ab") as f:
        f.write(b"".join(orjson.dumps(line) + b"\n" for line in more))
    assert s.catch_up() is True
    assert s.leaf_name() == "u1"  # --resume-session-at u1: not the newest line
    with path.open("ab") as f:
        f.write(orjson.dumps({"type": "last-prompt", "leafUuid": "gone"}) + b"\n")
    assert s.catch_up() is True
    assert s.leaf_name() == "u2"  # naming no line: the newest tip, as before


def test_compaction_sends_the_preserved_segment_after_the_summary(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        *_two_exchanges("keep me", "kept"),
        {
            **cc.compact_boundary("cb", "a2", 5),
            "compactMetadata": {
                "trigger": "manual",
                "preservedSegment": {"headUuid": "u2", "anchorUuid": "cs", "tailUuid": "a2"},
            },
        },
        cc.user("cs", "cb", "Summary: said hi.", 6, isCompactSummary=True),
        cc.user("c1", "cs", "<command-name>/compact</command-name>", 7),
        cc.user("u3", "c1", "go on", 8),
        cc.assistant("a3", "u3", "msg_3", cc.text("going"), 9),
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "p.jsonl", lines))
    assert s.context()["messages"] == [
        {"role": "user", "content": [cc.text("Summary: said hi.\n"), cc.text("keep me")]},
        {"role": "assistant", "content": [cc.text("kept")]},
        {
            "role": "user",
            "content": [cc.text("<command-name>/compact</command-name>\n"), cc.text("go on")],
        },
        {"role": "assistant", "content": [cc.text("going")]},
    ]
    said = [m.entry_name for m in s.transcript_messages()]
    assert said == ["cs", "u2", "a2", "c1", "u3", "a3"]


@pytest.mark.parametrize(
    "segment",
    [
        {"headUuid": "a1", "anchorUuid": "cs", "tailUuid": "u1"},  # head below tail
        {"headUuid": "nowhere", "anchorUuid": "cs", "tailUuid": "a2"},
        {"headUuid": "u2", "tailUuid": "gone"},
        "not an object",
    ],
)
def test_a_preserved_segment_that_leads_nowhere_keeps_nothing(tmp_path: Path, segment: Any) -> None:
    boundary = {
        **cc.compact_boundary("cb", "a2", 5),
        "compactMetadata": {"preservedSegment": segment},
    }
    lines: list[dict[str, Any] | bytes] = [
        *_two_exchanges("keep me", "kept"),
        boundary,
        cc.user("cs", "cb", "Summary: said hi.", 6, isCompactSummary=True),
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "n.jsonl", lines))
    assert s.context()["messages"] == [{"role": "user", "content": "Summary: said hi."}]


def test_parallel_results_in_the_order_they_were_written(tmp_path: Path) -> None:
    """Claude Code sends the results of parallel calls in completion (file) order."""
    lines: list[dict[str, Any] | bytes] = [
        U1,
        cc.assistant("a1", "u1", "msg_1", cc.tool_use("t_bash", "Bash", BASH_ARGS), 2),
        cc.assistant("a2", "a1", "msg_1", cc.tool_use("t_read", "Read", READ_ARGS), 3),
        cc.tool_result("r_read", "a2", "t_read", "file text", 4),
        cc.tool_result("r_bash", "a1", "t_bash", "ls output", 5),
        cc.assistant("a3", "r_bash", "msg_2", cc.text("done"), 6),
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "r.jsonl", lines))
    results = s.context()["messages"][2]["content"]
    assert [block["tool_use_id"] for block in results] == ["t_read", "t_bash"]


def test_usage_and_cost_from_the_latest_cost_state(tmp_path: Path) -> None:
    def cost_state(total: float, sonnet_in: int) -> dict[str, Any]:
        models = {
            "claude-sonnet-4-5": {
                "inputTokens": sonnet_in,
                "outputTokens": 5,
                "cacheReadInputTokens": 7,
                "cacheCreationInputTokens": 3,
                "costUSD": total / 2,
            },
            "claude-haiku-4-5": {
                "inputTokens": 10,
                "outputTokens": 1,
                "cacheReadInputTokens": 0,
                "cacheCreationInputTokens": 0,
                "costUSD": total / 2,
            },
        }
        return {"type": "cost-state", "totalCostUSD": total, "modelUsage": models}

    lines: list[dict[str, Any] | bytes] = [
        U1,
        cc.assistant("a1", "u1", "msg_1", cc.text("hi"), 2, cc.usage(1, 1)),
        cost_state(0.5, 100),
        cost_state(0.75, 300),  # rewritten by a later run: the latest counts
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "c.jsonl", lines))
    assert s.usage() == {
        "input": 310,
        "output": 6,
        "cacheRead": 7,
        "cacheWrite": 3,
        "cost": 0.75,
    }


def test_leaf_ties_go_to_the_later_line(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        U1,
        cc.assistant("x", "u1", "m_x", cc.text("x"), 5),
        cc.assistant("y", "u1", "m_y", cc.text("y"), 5),
        cc.system("s", "x", "local_command", 9),  # a tip: walks up to x (time 5)
    ]
    s = ClaudeSession(cc.write_jsonl(tmp_path / "t.jsonl", lines))
    assert s.leaf_name() == "y"


def test_sub_agent_file_all_sidechain_still_has_a_leaf(tmp_path: Path) -> None:
    lines: list[dict[str, Any] | bytes] = [
        cc.user("s1", None, "Find the config", 1, isSidechain=True, agentId="abc"),
        cc.assistant(
            "s2", "s1", "msg_s", cc.text("It is in app.toml"), 2, isSidechain=True, agentId="abc"
        ),
    ]
    meta = {"agentType": "Explore", "description": "find config", "toolUseId": "toolu_9"}
    s = ClaudeSession(cc.write_jsonl(tmp_path / "agent-abc.jsonl", lines), meta)
    assert s.leaf_name() == "s2"
    header = s.header()
    assert header["agentType"] == "Explore" and header["toolUseId"] == "toolu_9"
    assert header["description"] == "find config"


def test_only_junk_is_an_empty_session(tmp_path: Path) -> None:
    s = ClaudeSession(cc.write_jsonl(tmp_path / "j.jsonl", [b"junk", b"[1,2]", b"{}"]))
    assert len(s) == 1  # {} is an object: a metadata line of unknown type
    assert s.entry_name(0) == "meta-3-unknown"
    assert s.leaf_index() is None and s.path_indexes() == []
    assert s.context() == {"messages": [], "model": None}
    assert s.transcript_messages() == []
    assert s.stats()["malformedLines"] == 2
    assert s.header()["id"] == "j"


def test_a_chosen_leaf_is_the_leaf_until_unchosen(tmp_path: Path) -> None:
    """`choose_leaf` (the mount's ``ln -sfn``): leaf, path, context and transcript end
    at the chosen entry; a metadata line cannot be chosen; ``None`` gives the agent's
    own leaf back. The file is never written."""
    lines = [*_two_exchanges("more", "sure"), {"type": "last-prompt", "lastPrompt": "more"}]
    path = cc.write_jsonl(tmp_path / "c.jsonl", lines)
    before = path.read_bytes()
    s = ClaudeSession(path)
    assert s.leaf_name() == "a2" and s.own_leaf_name() == "a2"
    s.choose_leaf("a1")
    assert (s.leaf_name(), s.own_leaf_name(), s.chosen_leaf()) == ("a1", "a2", "a1")
    assert _names(s, s.path_indexes()) == ["u1", "a1"]
    assert [m["role"] for m in s.context()["messages"]] == ["user", "assistant"]
    assert "more" not in str(s.transcript_messages())
    with pytest.raises(ValueError):
        s.choose_leaf("meta-5-last-prompt")
    with pytest.raises(KeyError):
        s.choose_leaf("nowhere")
    assert s.leaf_name() == "a1"  # a refused choice changes nothing
    s.choose_leaf(None)
    assert s.leaf_name() == "a2" and s.chosen_leaf() is None
    assert path.read_bytes() == before
