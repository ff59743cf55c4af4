"""Gemini CLI sessions read the way Gemini's own loader reads them: a record with a
repeated id replacing the earlier where it stood, ``$rewindTo`` (a branch in the tree,
the rewound messages out of the context), ``$set`` patches and whole message lists,
the older whole-file ``.json`` document (and one half written or too big), junk and
torn lines, sub-agent chats, the search rows, and where the dir is."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import gemini_cli as gc
from support.traced_memory import traced

from core.formats import gemini as gemini_module
from core.formats.gemini import GeminiDocumentSession, GeminiSession, open_gemini_session
from core.formats.gemini_agent import list_sessions
from core.formats.gemini_dirs import gemini_dir
from core.formats.gemini_search import GEMINI_SEARCH
from core.formats.registry import AGENT_FORMATS
from core.search_index.rows import ChunkedLines, Row

CALL = gc.tool_call("run_shell_command__c1", "run_shell_command", {"command": "ls"}, "a.txt")


def _session_records() -> list[gc.Record | bytes]:
    return [
        gc.header(0),
        gc.user("u1", "list the files", 1),
        gc.set_(lastUpdated=gc.ts(1)),
        gc.gemini("g1", "", 2, tokens=gc.tokens(10, 2)),
        gc.gemini("g1", "", 2, tokens=gc.tokens(10, 2), toolCalls=[CALL]),  # the same id
        gc.function_response("r1", CALL, 3),
        gc.gemini("g2", "there is a.txt", 4, tokens=gc.tokens(20, 4, 5)),
        b"not json at all\n",
        gc.user("u2", "now delete it", 5),
        gc.gemini("g3", "deleted", 6, tokens=gc.tokens(30, 1)),
        gc.rewind("u2"),
        gc.user("u3", "rename it instead", 7),
        gc.gemini("g4", "renamed", 8, tokens=gc.tokens(40, 1)),
        gc.set_(summary="Files in the project", lastUpdated=gc.ts(8)),
        b'{"id": "torn", "type": "us',
    ]


def test_records_entries_and_tree(tmp_path: Path) -> None:
    chats = gc.gemini_home(tmp_path)
    s = GeminiSession(gc.write_jsonl(chats / "session-a.jsonl", _session_records()))
    names = [s.entry_name(i) for i in range(len(s))]
    assert names == [
        "000001-session", "000002-user", "000003-set", "000004-gemini", "000005-gemini",
        "000006-user", "000007-gemini", "000009-user", "000010-gemini", "000011-rewind",
        "000012-user", "000013-gemini", "000014-set",
    ]  # fmt: skip
    assert s.malformed_lines == 1  # the junk line; the torn tail waits for its newline
    rewind = names.index("000011-rewind")
    assert s.parent_index(rewind) == names.index("000007-gemini")  # beside u2: a branch
    assert s.parent_index(names.index("000012-user")) == rewind
    assert s.leaf_name() == "000014-set"
    path = [names[i] for i in s.path_indexes()]
    assert "000009-user" not in path and "000011-rewind" in path
    stats = s.stats()
    assert stats["leafCount"] == 2 and stats["roots"] == 1
    assert stats["byRole"] == {"assistant": 5, "user": 4}
    # every id's last tokens, rewound ones too (they were paid for)
    assert stats["usage"] == {"input": 100, "output": 8, "cacheRead": 5}
    assert s.title() == "Files in the project"
    header = s.header()
    assert header["agent"] == "gemini" and header["id"] == gc.SESSION_ID
    assert header["cwd"] == gc.CWD and header["lastUpdated"] == gc.ts(8)
    assert s.entry_text(rewind) == "rewind to u2"
    assert s.entry_text(names.index("000005-gemini")) == "run_shell_command"


def test_context_is_what_a_resumed_gemini_sends(tmp_path: Path) -> None:
    s = GeminiSession(gc.write_jsonl(tmp_path / "session-a.jsonl", _session_records()))
    response = CALL["result"][0]
    assert s.context() == {
        "messages": [
            {"role": "user", "parts": [{"text": "list the files"}]},
            {"role": "model", "parts": [{"functionCall": {
                "id": CALL["id"], "name": "run_shell_command", "args": {"command": "ls"}}}]},
            # the call's result, then the user record of the same response: both sent
            {"role": "user", "parts": [response, response]},
            {"role": "model", "parts": [{"text": "there is a.txt"}]},
            {"role": "user", "parts": [{"text": "rename it instead"}]},
            {"role": "model", "parts": [{"text": "renamed"}]},
        ],
        "model": gc.MODEL,
    }  # fmt: skip


def test_transcript_shows_each_result_once_and_no_rewound_turn(tmp_path: Path) -> None:
    s = GeminiSession(gc.write_jsonl(tmp_path / "session-a.jsonl", _session_records()))
    turns = [(t.entry_name, t.message["role"]) for t in s.transcript_messages()]
    assert turns == [
        ("000002-user", "user"), ("000005-gemini", "assistant"),
        ("000005-gemini", "toolResult"), ("000007-gemini", "assistant"),
        ("000012-user", "user"), ("000013-gemini", "assistant"),
    ]  # fmt: skip
    result = s.transcript_messages()[2].message
    assert result["toolName"] == "run_shell_command" and result["content"][0]["text"] == "a.txt"


def test_set_messages_replaces_the_list_and_a_rewind_into_it(tmp_path: Path) -> None:
    listed = [gc.user("u1", "first", 1), gc.gemini("g1", "one", 2), gc.user("u2", "second", 3)]
    records: list[gc.Record | bytes] = [
        gc.header(0),
        gc.user("old", "gone after the set", 0),
        gc.set_(messages=listed),
        gc.rewind("u2"),
        gc.user("u3", "third", 4),
    ]
    s = GeminiSession(gc.write_jsonl(tmp_path / "session-b.jsonl", records))
    texts = [c["parts"][0]["text"] for c in s.context()["messages"]]
    assert texts == ["first", "one", "third"]
    assert s.parent_index(3) == 2  # rewound into the listed messages: after the list


def test_a_rewind_to_an_unknown_id_drops_everything(tmp_path: Path) -> None:
    records: list[gc.Record | bytes] = [gc.header(0), gc.user("u1", "a", 1), gc.rewind("zz")]
    s = GeminiSession(gc.write_jsonl(tmp_path / "session-c.jsonl", records))
    assert s.context()["messages"] == [] and s.parent_index(2) is None


def test_growing_file_shows_new_records(tmp_path: Path) -> None:
    file = gc.write_jsonl(tmp_path / "session-a.jsonl", [gc.header(0), gc.user("u1", "a", 1)])
    s = GeminiSession(file)
    with file.open("ab") as f:
        f.write(json.dumps(gc.gemini("g1", "b", 2)).encode() + b"\n")
    assert s.catch_up() and not s.reread
    assert s.leaf_name() == "000003-gemini" and len(s.context()["messages"]) == 2


def test_older_json_document(tmp_path: Path) -> None:
    messages = [gc.user("u1", "hello", 1), gc.gemini("g1", "hi", 2, tokens=gc.tokens(3, 1))]
    file = gc.write_document(tmp_path / "session-old.json", messages, summary="Greeting")
    s = open_gemini_session(file)
    assert isinstance(s, GeminiDocumentSession)
    assert [s.entry_name(i) for i in range(len(s))] == [
        "000001-session", "000002-user", "000003-gemini",
    ]  # fmt: skip
    assert json.loads(s.raw_line(1)) == messages[0]
    assert s.title() == "Greeting" and s.usage() == {"input": 3, "output": 1, "cacheRead": 0}
    assert [c["role"] for c in s.context()["messages"]] == ["user", "model"]
    assert s.leaf_name() == "000003-gemini" and s.malformed_lines == 0
    file.write_text(file.read_text().replace('"hi"', '"hi again"'))
    os.utime(file, ns=(1, 1))
    assert s.catch_up() and s.reread
    assert s.context()["messages"][1]["parts"] == [{"text": "hi again"}]


def test_half_written_or_too_big_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = gc.write_document(tmp_path / "session-torn.json", [gc.user("u1", "hello", 1)])
    file.write_bytes(file.read_bytes()[:-20])
    torn = GeminiDocumentSession(file)
    assert len(torn) == 0 and torn.malformed_lines == 1
    assert torn.header()["unreadable"].startswith("not JSON")
    assert torn.context() == {"messages": [], "model": None} and torn.stats()["entries"] == 0
    monkeypatch.setattr(gemini_module, "DOCUMENT_LIMIT", 10)
    big = GeminiDocumentSession(gc.write_document(tmp_path / "session-big.json", []))
    assert len(big) == 0 and "not parsed" in big.header()["unreadable"]


def test_a_document_costs_no_more_than_it_counts(tmp_path: Path) -> None:
    """What an older document's reader holds (tracemalloc) is within its
    `memory_cost`, which the session cache budgets by: each record's bytes in a
    buffer of their length (orjson's own held 4 KiB each: ~4,500 bytes a record held,
    870 counted) and `GeminiDocumentSession.LINE_INDEX_BYTES` a record besides."""
    messages = []
    for i in range(2000):
        messages.append(gc.user(f"u{i}", f"prompt {i}", i))
        messages.append(gc.gemini(f"g{i}", f"answer {i}", i, tokens=gc.tokens(3, 1)))
    file = gc.write_document(tmp_path / "session-old.json", messages)
    document, held, _ = traced(lambda: GeminiDocumentSession(file))
    assert len(document) == len(messages) + 1
    assert held <= document.memory_cost(), (held / len(document), document.memory_cost())


def test_listing_projects_documents_and_sub_agents(tmp_path: Path) -> None:
    chats = gc.gemini_home(tmp_path)
    gc.write_document(chats / "session-1.json", [gc.user("u1", "converted", 1)])
    gc.write_jsonl(chats / "session-1.jsonl", [gc.header(0)])  # the .json's successor
    gc.write_document(chats / "session-2.json", [gc.user("u1", "old", 1)], sessionId="s2")
    sub_header = gc.header(0, session_id="sub-7", kind="subagent")
    gc.write_jsonl(chats / gc.SESSION_ID / "sub-7.jsonl", [sub_header])
    (chats / "notes.txt").write_text("not a session")
    listed = [
        (s.project, s.stem, s.path.name, s.header) for s in list_sessions(tmp_path / ".gemini")
    ]
    assert listed == [
        (gc.PROJECT, "session-1", "session-1.jsonl", {"id": gc.SESSION_ID}),
        (gc.PROJECT, "session-1/sub-7", "sub-7.jsonl", {"id": "sub-7"}),
        (gc.PROJECT, "session-2", "session-2.json", {"id": "s2"}),
    ]
    assert open_gemini_session(chats / gc.SESSION_ID / "sub-7.jsonl").header()["cwd"] == gc.CWD


def test_hostile_session_ids_name_no_sub_agent_dir(tmp_path: Path) -> None:
    chats = gc.gemini_home(tmp_path)
    for number, session_id in enumerate(["a\u0000b", "..", "../../etc", "."]):
        gc.write_jsonl(chats / f"session-{number}.jsonl", [gc.header(0, session_id=session_id)])
    (chats / ".." / "x.jsonl").write_text("{}\n")
    listed = [s.stem for s in list_sessions(tmp_path / ".gemini")]
    assert listed == ["session-0", "session-1", "session-2", "session-3"]


def test_where_the_dir_is_and_the_registration(tmp_path: Path) -> None:
    assert gemini_dir({"HOME": str(tmp_path)}) == tmp_path / ".gemini"
    assert gemini_dir({"HOME": "/x", "GEMINI_CLI_HOME": str(tmp_path)}) == tmp_path / ".gemini"
    connector = AGENT_FORMATS["gemini"]
    assert connector.dir_option == "--gemini-dir" and connector.search is GEMINI_SEARCH


def test_search_rows_are_named_as_entries(tmp_path: Path) -> None:
    chats = gc.gemini_home(tmp_path)
    file = gc.write_jsonl(chats / "session-a.jsonl", _session_records())
    sub = gc.write_jsonl(chats / gc.SESSION_ID / "sub-7.jsonl", [gc.user("x", "sub says", 1)])
    root = tmp_path / ".gemini"
    keys = sorted(GEMINI_SEARCH.file_keys(str(root)))
    assert keys == sorted([tuple(file.relative_to(root).parts), tuple(sub.relative_to(root).parts)])
    found = {row.entry_id: (row.role, row.text) for row in _rows_of(file)}
    s = GeminiSession(file)
    assert set(found) <= {s.entry_name(i) for i in range(len(s))}
    assert found["000005-gemini"][0] == "assistant" and "a.txt" in found["000005-gemini"][1]
    assert found["000009-user"] == ("user", "now delete it")  # rewound, still searchable
    assert GEMINI_SEARCH.line_text(gc.set_(lastUpdated="x")) is None


def _rows_of(file: Path) -> list[Row]:
    fd = os.open(file, os.O_RDONLY)
    try:
        lines = ChunkedLines.of_file(fd, 0, file.stat().st_size)
        _, rows = GEMINI_SEARCH.of_file(os.fsencode(file.name)).whole_file_rows(lines)
        return list(rows)
    finally:
        os.close(fd)


def test_older_documents_are_searched_message_by_message(tmp_path: Path) -> None:
    chats = gc.gemini_home(tmp_path)
    messages = [
        gc.user("u1", 'a "quoted" {brace} question', 1),
        {"not": "a message"},
        gc.gemini("g1", "an answer with ] and [ inside", 2, toolCalls=[CALL]),
    ]
    file = gc.write_document(chats / "session-old.json", messages)
    rows = _rows_of(file)
    document = GeminiDocumentSession(file)
    assert [r.entry_id for r in rows] == ["000002-user", "000004-gemini"]
    assert {r.entry_id for r in rows} <= {document.entry_name(i) for i in range(len(document))}
    data = file.read_bytes()
    for row in rows:  # read back as a hit's snippet is: the message's own bytes
        obj = json.loads(data[row.offset : row.offset + row.length])
        assert GEMINI_SEARCH.line_text(obj) == row.text
    assert "a.txt" in rows[1].text and '"quoted"' in rows[0].text
    assert ("tmp", gc.PROJECT, "chats", "session-old.json") in set(
        GEMINI_SEARCH.file_keys(str(tmp_path / ".gemini"))
    )
    file.write_bytes(data[: rows[1].offset + 10])  # torn inside the second message
    assert [r.entry_id for r in _rows_of(file)] == ["000002-user"]
