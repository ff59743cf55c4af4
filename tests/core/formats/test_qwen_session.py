"""Qwen Code sessions read the way Qwen resumes them: the ``parentUuid`` chain from
the last conversation record (a rewind is a branch), fragments of one uuid joined,
``chat_compression`` replacing the history, a mid-turn message joined to the user
message before it, titles, usage, an older Qwen's Gemini-format files, junk lines,
the listing and the search rows."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support import gemini_cli as gc
from support import qwen_code as qc

from core.formats.qwen import QwenSession
from core.formats.qwen_agent import QWEN_SEARCH
from core.formats.qwen_dirs import list_sessions, open_qwen_session, qwen_dir
from core.search_index import SearchIndex
from core.search_index.rows import MODE_APPENDABLE, MODE_LEGACY, ChunkedLines

CALL = {"functionCall": {"id": "call_1", "name": "read_file", "args": {"path": "a.txt"}}}


def _records() -> list[qc.Record | bytes]:
    return [
        qc.user("u1", None, "read a.txt", 1),
        qc.system("s1", "u1", "ui_telemetry", 1, uiEvent={"event.name": "api_response"}),
        qc.assistant("a1", "s1", [{"text": "reading", "thought": True}], 2),
        qc.assistant("a1", "s1", [CALL], 2),  # a second fragment of a1
        qc.tool_result("t1", "a1", "call_1", "read_file", "hello from a.txt", 3),
        qc.assistant("a2", "t1", [{"text": "it says hello"}], 4),
        b"junk line\n",
        qc.user("u2", "a2", "delete it", 5),
        qc.assistant("a3", "u2", [{"text": "deleted"}], 6),
        qc.user("u3", "a2", "no, rename it", 7),  # rewound: a branch from a2
        qc.user("m1", "u3", "to b.txt", 7, subtype="mid_turn_user_message"),
        qc.assistant("a4", "m1", [{"text": "renamed"}], 8),
        qc.system("s2", "a4", "custom_title", 9, customTitle="Rename a.txt"),
        qc.system("s3", "s2", "session_artifact_event", 9),  # not conversation
    ]


def test_entries_tree_and_leaf(tmp_path: Path) -> None:
    s = QwenSession(qc.write_jsonl(tmp_path / f"{qc.SESSION_ID}.jsonl", _records()))
    names = [s.entry_name(i) for i in range(len(s))]
    assert names == ["u1", "s1", "a1", "a1.2", "t1", "a2", "u2", "a3", "u3", "m1", "a4", "s2", "s3"]
    assert s.malformed_lines == 1
    assert s.parent_index(names.index("a1.2")) == names.index("a1")  # under the first
    assert s.parent_index(names.index("u3")) == names.index("a2")  # the rewind's branch
    assert s.leaf_name() == "s2"  # the artifact record is never the leaf
    path = [names[i] for i in s.path_indexes()]
    assert path == ["u1", "s1", "a1", "t1", "a2", "u3", "m1", "a4", "s2"]
    assert s.title() == "Rename a.txt"
    assert s.header()["agent"] == "qwen" and s.header()["cwd"] == qc.CWD
    assert s.usage() == {"input": 40, "output": 8, "cacheRead": 4}
    assert s.stats()["byType"]["system-custom_title"] == 1


def test_context_and_transcript(tmp_path: Path) -> None:
    s = QwenSession(qc.write_jsonl(tmp_path / f"{qc.SESSION_ID}.jsonl", _records()))
    context = s.context()
    assert context["model"] == qc.MODEL
    assert [(c["role"], len(c["parts"])) for c in context["messages"]] == [
        ("user", 1), ("model", 2), ("user", 1), ("model", 1), ("user", 2), ("model", 1),
    ]  # fmt: skip
    assert context["messages"][1]["parts"][1] == CALL  # the fragments joined
    assert context["messages"][4]["parts"] == [{"text": "no, rename it"}, {"text": "to b.txt"}]
    roles = [(t.entry_name, t.message["role"]) for t in s.transcript_messages()]
    assert roles == [
        ("u1", "user"), ("a1", "assistant"), ("t1", "toolResult"), ("a2", "assistant"),
        ("u3", "user"), ("m1", "user"), ("a4", "assistant"),
    ]  # fmt: skip
    blocks = s.transcript_messages()[1].message["content"]
    assert [b["type"] for b in blocks] == ["thinking", "toolCall"]


def test_chat_compression_replaces_the_history(tmp_path: Path) -> None:
    summary = [{"role": "user", "parts": [{"text": "summary of before"}]}]
    records: list[qc.Record | bytes] = [
        qc.user("u1", None, "long ago", 1),
        qc.system("c1", "u1", "chat_compression", 2, compressedHistory=summary),
        qc.user("u2", "c1", "and now", 3),
    ]
    s = QwenSession(qc.write_jsonl(tmp_path / f"{qc.SESSION_ID}.jsonl", records))
    assert s.context()["messages"] == [*summary, {"role": "user", "parts": [{"text": "and now"}]}]


def test_listing_archive_and_an_older_qwen(tmp_path: Path) -> None:
    root = tmp_path / ".qwen"
    chats = root / "projects" / qc.ENC / "chats"
    qc.write_jsonl(chats / f"{qc.SESSION_ID}.jsonl", _records()[:1])
    archived = "ffffffff-1111-4222-8333-444455556666"
    qc.write_jsonl(chats / "archive" / f"{archived}.jsonl", _records()[:1])
    qc.write_jsonl(chats / f"{qc.SESSION_ID}.ledger.jsonl", [{"x": 1}])  # a sidecar
    old = root / "tmp" / ("c" * 64) / "chats" / "session-2025-08-01T10-00-abcd1234.json"
    qwen_message = {"id": "q1", "timestamp": gc.ts(2), "type": "qwen", "content": "old answer"}
    gc.write_document(old, [gc.user("u1", "old question", 1), qwen_message])
    listed = [(s.project, s.stem) for s in list_sessions(root)]
    assert listed == [
        (qc.ENC, qc.SESSION_ID), (qc.ENC, archived), ("c" * 64, old.name.removesuffix(".json")),
    ]  # fmt: skip
    legacy = open_qwen_session(old)
    assert legacy.agent == "qwen" and legacy.header()["agent"] == "qwen"
    assert [c["role"] for c in legacy.context()["messages"]] == ["user", "model"]
    assert legacy.stats()["byRole"] == {"assistant": 1, "user": 1}


def test_where_the_dir_is(tmp_path: Path) -> None:
    assert qwen_dir({"HOME": str(tmp_path)}) == tmp_path / ".qwen"
    assert qwen_dir({"HOME": "/x", "QWEN_HOME": str(tmp_path / "q")}) == tmp_path / "q"
    runtime = {"QWEN_HOME": "/x", "QWEN_RUNTIME_DIR": str(tmp_path / "r")}
    assert qwen_dir(runtime) == tmp_path / "r"


def test_search_rows_are_named_by_uuid(tmp_path: Path) -> None:
    root = tmp_path / ".qwen"
    file = qc.write_jsonl(
        root / "projects" / qc.ENC / "chats" / f"{qc.SESSION_ID}.jsonl", _records()
    )
    assert list(QWEN_SEARCH.file_keys(str(root))) == [tuple(file.relative_to(root).parts)]
    fd = os.open(file, os.O_RDONLY)
    try:
        mode, rows = QWEN_SEARCH.whole_file_rows(ChunkedLines.of_file(fd, 0, file.stat().st_size))
        found = [(row.entry_id, row.role, row.text) for row in rows]
        assert mode == MODE_APPENDABLE  # named by uuid: appended lines are read as they come
    finally:
        os.close(fd)
    assert ("t1", "toolResult") in [(e, r) for e, r, _ in found]
    assert ("a1", "assistant", "call_1\nread_file\na.txt") in found  # the call's fragment
    assert all(e != "s1" for e, _, _ in found)  # telemetry is not conversation


def test_an_older_qwen_is_searched_as_gemini(tmp_path: Path) -> None:
    root = tmp_path / ".qwen"
    chats = root / "tmp" / ("c" * 64) / "chats"
    qwen_message = {"id": "q1", "timestamp": gc.ts(2), "type": "qwen", "content": "old answer"}
    old = gc.write_document(
        chats / "session-old.json", [gc.user("u1", "old question", 1), qwen_message]
    )
    records = gc.write_jsonl(chats / "session-new.jsonl", [gc.header(0), qwen_message])
    keys = {tuple(path.relative_to(root).parts) for path in (old, records)}
    assert set(QWEN_SEARCH.file_keys(str(root))) == keys
    for file, names in ((old, ["000002-user", "000003-qwen"]), (records, ["000002-qwen"])):
        fd = os.open(file, os.O_RDONLY)
        try:
            key = os.fsencode(file.relative_to(root))  # what the index passes
            mode, rows = QWEN_SEARCH.of_file(key).whole_file_rows(
                ChunkedLines.of_file(fd, 0, file.stat().st_size)
            )
            assert mode == MODE_LEGACY  # line-numbered names: read whole on change
            assert [(r.entry_id, r.role) for r in rows] == [
                (name, "assistant" if name.endswith("qwen") else "user") for name in names
            ]
        finally:
            os.close(fd)
        source = open_qwen_session(file)
        assert set(names) <= {source.entry_name(i) for i in range(len(source))}
    assert QWEN_SEARCH.line_text(qwen_message) == "old answer"


def test_where_a_file_is_decides_how_search_reads_it_as_for_the_mount(tmp_path: Path) -> None:
    """A 0.24 session whose first line looks like an older version's (a line that is
    not JSON but starts like a document), and an older chat whose first line is no
    record Gemini knows: search reads each as the mount does, by its directory
    (`core.formats.qwen_dirs.is_older_chat`), so its hits are entries the mount shows."""
    root = tmp_path / ".qwen"
    current = qc.write_jsonl(
        root / "projects" / qc.ENC / "chats" / f"{qc.SESSION_ID}.jsonl",
        [b"{ torn\n", qc.user("u1", None, "quokka question", 1), *_records()[2:4]],
    )
    said = {"id": "q1", "timestamp": gc.ts(2), "type": "qwen", "content": "quokka answer"}
    older = gc.write_jsonl(
        root / "tmp" / ("c" * 64) / "chats" / "session-2025-08-01T10-00-abcd1234.jsonl",
        [qc.user("x1", None, "a newer-looking first line", 1), gc.user("g1", "quokka", 2), said],
    )
    with SearchIndex(tmp_path / "db", file_format=QWEN_SEARCH) as index:
        index.update(str(root))
        hits = [
            (root / hit.project / f"{hit.stem}.jsonl", hit.entry_id)
            for hit in index.search("quokka")
        ]
    assert sorted((path.name, entry) for path, entry in hits) == sorted(
        [(current.name, "u1"), (older.name, "000002-user"), (older.name, "000003-qwen")]
    )
    for path, entry in hits:
        source = open_qwen_session(path)  # the mount's reader of that file
        assert entry in {source.entry_name(i) for i in range(len(source))}


def test_sub_agents_beside_their_session(tmp_path: Path) -> None:
    root = tmp_path / ".qwen"
    project = root / "projects" / qc.ENC
    qc.write_jsonl(project / "chats" / f"{qc.SESSION_ID}.jsonl", _records()[:1])
    subagents = project / "subagents" / qc.SESSION_ID
    sub = qc.write_jsonl(subagents / "agent-explore-c1.jsonl", [qc.user("s1", None, "look", 1)])
    meta = {"agentId": "explore-c1", "agentType": "explore", "description": "look around",
            "toolUseId": "c1", "parentSessionId": qc.SESSION_ID}  # fmt: skip
    (subagents / "agent-explore-c1.meta.json").write_text(json.dumps(meta))
    (subagents / "notes.txt").write_text("not an agent")
    listed = [(s.stem, s.path) for s in list_sessions(root)]
    assert listed == [
        (qc.SESSION_ID, project / "chats" / f"{qc.SESSION_ID}.jsonl"),
        (f"{qc.SESSION_ID}/agent-explore-c1", sub),
    ]
    header = open_qwen_session(sub).header()
    assert header["agentType"] == "explore" and header["toolUseId"] == "c1"
    key = tuple(sub.relative_to(root).parts)
    assert key in set(QWEN_SEARCH.file_keys(str(root)))
    parent = QWEN_SEARCH.parent_key("/".join(key).encode())
    assert parent == f"projects/{qc.ENC}/chats/{qc.SESSION_ID}.jsonl".encode()
