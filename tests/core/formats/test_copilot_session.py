"""GitHub Copilot CLI sessions in core: the reader's renderings inputs, discovery in both
layouts, the search rows, and bad input (junk lines, a torn last line)."""

from __future__ import annotations

import json
from pathlib import Path

from support.newer_agent_files import copilot_event, write_copilot_session

from core.formats.copilot import CopilotSession, read_workspace
from core.formats.copilot_agent import COPILOT_SEARCH, list_copilot_sessions
from core.formats.copilot_dirs import copilot_dir, list_sessions
from core.formats.registry import AGENT_FORMATS
from core.paths import encode_cwd

SID = "1eebf1e6-1997-4afd-98a6-6f767c4fbba6"


def test_context_is_the_chat_the_model_is_sent(tmp_path: Path) -> None:
    session = CopilotSession(write_copilot_session(tmp_path, SID, "/home/me/app"))
    context = session.context()
    assert context["model"] == "m2"
    assert context["messages"] == [
        {"role": "system", "content": "You are Copilot."},
        {"role": "user", "content": "<ctx/>\n\nlist files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"},
        {"role": "assistant", "content": "Two files."},
    ]


def test_transcript_header_title_stats(tmp_path: Path) -> None:
    path = write_copilot_session(tmp_path, SID, "/home/me/app", name="my work")
    session = CopilotSession(path)
    shown = [(m.entry_name, m.message) for m in session.transcript_messages()]
    assert shown == [
        ("e01", {"role": "user", "content": "list files"}),
        (
            "e05",
            {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}
                ],
            },
        ),
        (
            "e07",
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "isError": False,
                "content": [{"type": "text", "text": "a.txt\nb.txt"}],
            },
        ),
        ("e09", {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]}),
    ]
    header = session.header()
    assert header["id"] == SID and header["cwd"] == "/home/me/app"
    assert header["copilotVersion"] == "1.0.102" and header["file"] == str(path)
    assert session.title() == "my work"
    stats = session.stats()
    assert stats["entries"] == 11 and stats["leafId"] == "e10" and stats["pathLength"] == 11
    assert stats["usage"] == {"input": 30, "output": 5, "cacheRead": 1, "cacheWrite": 4}
    assert stats["byRole"] == {"assistant": 2, "system": 1, "toolResult": 1, "user": 1}


def test_junk_lines_and_a_torn_last_line_are_skipped(tmp_path: Path) -> None:
    path = write_copilot_session(tmp_path, SID, "/home/me/app")
    with path.open("a") as f:
        f.write("not json\n[1, 2]\n")
        f.write('{"type": "user.message", "data": {"content": "half')  # torn: no newline
    session = CopilotSession(path)
    assert session.malformed_lines == 2
    assert len(session) == 11
    with path.open("a") as f:
        f.write('"}, "id": "e11", "parentId": "e10"}\n')
    assert session.catch_up() and not session.reread
    assert session.context()["messages"][-1] == {"role": "user", "content": "half"}


def test_discovery_both_layouts_and_the_registry(tmp_path: Path) -> None:
    root = tmp_path / ".copilot"
    write_copilot_session(root, SID, "/home/me/app")
    write_copilot_session(root, "0ld", "/home/me/old", bare=True)
    (root / "session-state" / ".session-operation-locks").mkdir()
    found = {s.id: s for s in list_sessions(root)}
    assert set(found) == {SID, "0ld"}
    assert found[SID].project == encode_cwd("/home/me/app")
    assert found["0ld"].project == encode_cwd("/home/me/old")  # from the first KiB
    assert CopilotSession(found["0ld"].path).header()["id"] == "0ld"
    listed = {(s.project, s.stem) for s in list_copilot_sessions(root)}
    assert (encode_cwd("/home/me/app"), SID) in listed
    assert "copilot" in AGENT_FORMATS
    assert copilot_dir({"COPILOT_HOME": str(root)}) == root
    assert copilot_dir({"HOME": str(tmp_path)}) == root


def test_search_rows_are_named_as_entries(tmp_path: Path) -> None:
    root = tmp_path / ".copilot"
    path = write_copilot_session(root, SID, "/home/me/app")
    keys = list(COPILOT_SEARCH.file_keys(str(root)))
    assert keys == [("session-state", SID, "events.jsonl")]
    lines, at = [], 0
    for raw in path.read_bytes().splitlines(keepends=True):
        lines.append((at, raw.rstrip(b"\n")))
        at += len(raw)
    _, rows = COPILOT_SEARCH.whole_file_rows(lines)
    named = {row.entry_id: row.text for row in rows}
    session = CopilotSession(path)
    assert set(named) <= {session.entry_name(i) for i in range(len(session))}
    assert "a.txt" in named["e07"] and "Two files." in named["e09"] and "bash" in named["e05"]


def test_workspace_yaml_scalars_only(tmp_path: Path) -> None:
    path = tmp_path / "workspace.yaml"
    path.write_text('name: "quoted: yes"\nsummary: |\n  multi\nlist:\n  - a\ncwd: /x\n')
    assert read_workspace(path) == {"name": "quoted: yes", "cwd": "/x"}
    assert json.dumps(read_workspace(tmp_path / "missing.yaml")) == "{}"


def test_a_compaction_replaces_the_history(tmp_path: Path) -> None:
    path = write_copilot_session(tmp_path, SID, "/home/me/app")
    compacted = {"success": True, "outcome": "applied", "summaryContent": "We listed files."}
    failed = {"success": False, "summaryContent": "ignored"}
    more = [
        copilot_event("session.compaction_complete", failed, "e11", "e10", 11),
        copilot_event("session.compaction_complete", compacted, "e12", "e11", 12),
        copilot_event(
            "user.message", {"content": "next", "transformedContent": "<t/>next"}, "e13", "e12", 13
        ),
    ]
    with path.open("a") as f:
        f.writelines(json.dumps(event) + "\n" for event in more)
    messages = CopilotSession(path).context()["messages"]
    assert messages == [
        {"role": "system", "content": "You are Copilot."},
        {
            "role": "user",
            "content": "Some of the conversation history has been summarized to free up "
            "context.\n\nYou were originally given instructions from a user over one or "
            "more turns. Here were the user messages:\n<user_message>\nlist files\n"
            "</user_message>\n\nHere is a summary of the prior context:\n<summary>\n"
            "We listed files.\n</summary>\n",
        },
        {"role": "user", "content": "<t/>next"},
    ]
