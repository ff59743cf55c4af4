"""oh-my-pi 18's session files, read by core: the title slot before the header, the
entry types omp adds, and omp's context rules. The files are written by hand in omp's
format (tests/support/omp_files.py), never by core."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.omp_files import (
    OMP_SESSION_ID,
    SLOT_BYTES,
    assistant_msg,
    conversation,
    entry,
    line,
    omp_header,
    slot_line,
    user_msg,
    write_omp_session,
)

from core import SessionManager, discovery
from core.check import check_file, fix_file
from core.context import build_session_context
from core.entry_text import describe_entry
from core.jsonl import load_entries_from_file
from core.search_index import SearchIndex
from core.title_slot import parse_title_slot, serialize_title_slot, split_title_slot

PROJECT = "-work-app"


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


def omp_file(agent: Path, entries: list[dict[str, Any]] | None = None, **kw: Any) -> Path:
    path = agent / "sessions" / PROJECT / f"2026-11-20T10-00-00-000Z_{OMP_SESSION_ID}.jsonl"
    return write_omp_session(path, conversation() if entries is None else entries, **kw)


# --- the slot itself ----------------------------------------------------------------------


def test_core_writes_the_slot_omp_writes_byte_for_byte() -> None:
    for title, source in (("", None), ("Listing files", "auto"), ('quo"te \\ é 漢字', "user")):
        assert serialize_title_slot(title, source, "2026-11-20T10:00:00.000Z") == slot_line(
            title, source
        )


def test_a_long_title_is_cut_to_the_longest_code_point_prefix_that_fits() -> None:
    slot = serialize_title_slot("é" * 300, "user", "2026-11-20T10:00:00.000Z")
    title = parse_title_slot(slot)["title"]  # type: ignore[index]
    assert set(title) == {"é"} and 0 < len(title) < 300
    assert slot == slot_line(title, "user")  # exactly what omp writes for the cut title
    with pytest.raises(AssertionError):  # one more code point would not fit
        slot_line(title + "é", "user")


@pytest.mark.parametrize(
    "first",
    [
        b'{"type":"title","v":2,"title":"x","updatedAt":"t","pad":""}\n',
        b'{"type":"title","v":true,"title":"x","updatedAt":"t","pad":""}\n',
        b'{"type":"title","v":1,"title":3,"updatedAt":"t","pad":""}\n',
        b'{"type":"title","v":1,"title":"x","updatedAt":"t"}\n',
        b'{"type":"title","v":1,"title":"x","source":"bot","updatedAt":"t","pad":""}\n',
    ],
)
def test_only_a_valid_slot_is_a_slot(first: bytes, tmp_path: Path) -> None:
    assert split_title_slot(first + line(omp_header())) == (None, 0)
    path = tmp_path / "s.jsonl"
    path.write_bytes(first + line(omp_header()))
    assert load_entries_from_file(path) == []  # as omp: a title entry, then no header


# --- loading ------------------------------------------------------------------------------


def test_the_slot_is_not_an_entry_and_its_title_wins(agent: Path) -> None:
    path = omp_file(
        agent,
        title="Listing files",
        source="auto",
        header=omp_header(title="old header title", titleSource="user"),
    )
    objects = load_entries_from_file(path)
    assert objects[0]["type"] == "session"
    assert objects[0]["title"] == "Listing files" and objects[0]["titleSource"] == "auto"
    assert [o["type"] for o in objects[1:]] == [e["type"] for e in conversation()]

    manager = SessionManager.open(path, browse=True)
    assert manager.get_session_name() == "Listing files"
    assert manager.get_leaf_id() == "e0000009"  # the title_change, last line of the file
    assert len(manager.get_entries()) == 9


def test_an_empty_slot_title_means_no_title(agent: Path) -> None:
    path = omp_file(agent, header=omp_header(title="stale", titleSource="auto"))
    header = load_entries_from_file(path)[0]
    assert "title" not in header and "titleSource" not in header
    assert SessionManager.open(path, browse=True).get_session_name() is None


def test_discovery_lists_finds_and_names_slot_files(agent: Path) -> None:
    path = omp_file(agent, title="Listing files", source="auto")
    infos = discovery.list_all(agent)
    assert [(i.path, i.title, i.id) for i in infos] == [
        (str(path), "Listing files", OMP_SESSION_ID)
    ]
    recent = discovery.get_recent_sessions(path.parent)
    assert [(r.path, r.name) for r in recent] == [(str(path), "Listing files")]
    assert discovery.resolve_session("019a0000", "/elsewhere", agent_dir=agent) == str(path)
    assert discovery.find_most_recent_session(path.parent) == str(path)


def test_a_header_longer_than_the_prefix_after_a_slot_is_still_found(agent: Path) -> None:
    path = omp_file(agent, header=omp_header(additionalDirectories=["/x" * 5000]))
    assert discovery.find_most_recent_session(path.parent) == str(path)


def test_a_fork_of_a_slot_file_reads_its_entries(agent: Path, tmp_path: Path) -> None:
    path = omp_file(agent, title="Listing files", source="user")
    fork = SessionManager.fork_from(path, "/work/app", tmp_path / "forks")
    assert fork.get_session_name() == "Listing files"
    assert [e["id"] for e in fork.get_entries()] == [e["id"] for e in conversation()]


# --- context ------------------------------------------------------------------------------


def texts(context: dict[str, Any]) -> list[str]:
    out = []
    for message in context["messages"]:
        content = message.get("content", message.get("summary"))
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content)
        out.append(f"{message['role']}:{content}")
    return out


def test_new_entry_types_are_state_not_messages() -> None:
    entries = conversation()
    context = build_session_context(entries)
    assert texts(context) == ["user:How do I list files?", "assistant:Use ls."]
    assert context["mode"] == "plan" and context["injectedTtsrRules"] == ["no-rm-rf"]


def test_a_model_usage_entry_off_the_leaf_is_never_in_the_context() -> None:
    entries = conversation()
    # The side call's entry hangs off the user turn; the leaf is elsewhere.
    assert [e["id"] for e in entries if e["type"] == "model_usage"] == ["e0000004"]
    assert "model_usage" not in {m["role"] for m in build_session_context(entries)["messages"]}
    # At the usage entry itself, the context is the path to it: the question only.
    assert texts(build_session_context(entries, "e0000004")) == ["user:How do I list files?"]


def test_the_context_starts_after_the_latest_reset_boundary() -> None:
    entries = [
        user_msg("u1", None, 1, "before"),
        assistant_msg("a1", "u1", 2, "old answer"),
        entry("reset_boundary", "r1", "a1", 3),
        user_msg("u2", "r1", 4, "middle"),
        entry("reset_boundary", "r2", "u2", 5),
        user_msg("u3", "r2", 6, "after"),
    ]
    assert texts(build_session_context(entries)) == ["user:after"]
    assert texts(build_session_context(entries, "u2")) == ["user:middle"]


def compaction(cid: str, parent: str, second: int, first_kept: str, **extra: Any) -> dict:
    return entry(
        "compaction",
        cid,
        parent,
        second,
        summary="S",
        firstKeptEntryId=first_kept,
        tokensBefore=100,
        **extra,
    )


def test_a_compaction_after_a_reset_wins_and_one_before_it_is_elided() -> None:
    base = [
        user_msg("u1", None, 1, "one"),
        assistant_msg("a1", "u1", 2, "two"),
        entry("reset_boundary", "r1", "a1", 3),
        user_msg("u2", "r1", 4, "three"),
    ]
    later = [*base, compaction("c1", "u2", 5, "u2"), user_msg("u3", "c1", 6, "four")]
    assert texts(build_session_context(later)) == ["compactionSummary:S", "user:three", "user:four"]
    earlier = [
        user_msg("u1", None, 1, "one"),
        compaction("c1", "u1", 2, "u1"),
        entry("reset_boundary", "r1", "c1", 3),
        user_msg("u2", "r1", 4, "two"),
    ]
    assert texts(build_session_context(earlier)) == ["user:two"]


def test_compaction_method_metadata_reaches_the_summary_message() -> None:
    entries = [
        user_msg("u1", None, 1, "one"),
        compaction("c1", "u1", 2, "u1", tokensAfter=20, method="handoff", warning="tight"),
    ]
    summary = build_session_context(entries)["messages"][0]
    assert summary["role"] == "compactionSummary"
    assert (summary["tokensAfter"], summary["method"], summary["warning"]) == (
        20,
        "handoff",
        "tight",
    )
    plain = build_session_context([user_msg("u1", None, 1, "x"), compaction("c1", "u1", 2, "u1")])
    assert not {"tokensAfter", "method", "warning"} & set(plain["messages"][0])


def test_remote_replay_covers_the_tail_up_to_provider_replay_through() -> None:
    remote = {"openaiRemoteCompaction": {"provider": "openai", "replacementHistory": [{}]}}
    entries = [
        user_msg("u1", None, 1, "one"),
        assistant_msg("a1", "u1", 2, "two"),
        user_msg("u2", "a1", 3, "three"),
        compaction(
            "c1",
            "u2",
            4,
            "u1",
            method="remote",
            preserveData=remote,
            providerReplayThroughEntryId="a1",
        ),
        user_msg("u3", "c1", 5, "four"),
    ]
    assert texts(build_session_context(entries)) == [
        "compactionSummary:S",
        "user:three",
        "user:four",
    ]
    entries[3].pop("providerReplayThroughEntryId")
    assert texts(build_session_context(entries)) == ["compactionSummary:S", "user:four"]


def test_a_notes_rollover_recovers_the_latest_user_request() -> None:
    entries = [
        user_msg("u1", None, 1, "the request"),
        assistant_msg("a1", "u1", 2, "work"),
        assistant_msg("a2", "a1", 3, "more work"),
        compaction("c1", "a2", 4, "a2", details={"kind": "experimental-context-rollover"}),
    ]
    assert texts(build_session_context(entries)) == [
        "compactionSummary:S",
        "user:the request",
        "assistant:more work",
    ]


def test_the_latest_context_notes_on_the_path_come_first() -> None:
    notes = {"version": 1, "text": "- task: list files"}
    entries = [
        entry(
            "custom",
            "n1",
            None,
            1,
            customType="experimental_context_notes",
            data={"version": 1, "text": "old"},
        ),
        user_msg("u1", "n1", 2, "hi"),
        entry("custom", "n2", "u1", 3, customType="experimental_context_notes", data=notes),
        entry(
            "custom",
            "n3",
            "n2",
            4,
            customType="experimental_context_notes",
            data={"version": 1, "text": "bad", "extra": 1},
        ),
    ]
    messages = build_session_context(entries)["messages"]
    first = messages[0]
    assert (first["role"], first["customType"], first["display"]) == (
        "custom",
        "experimental_context_notes",
        False,
    )
    assert first["content"].startswith("<experimental-context-notes>\n")
    assert first["content"].endswith(
        "Latest notebook revision:\n- task: list files\n</experimental-context-notes>"
    )
    assert [m["role"] for m in messages] == ["custom", "user"]
    cleared = [*entries, entry("reset_boundary", "r1", "n3", 5)]
    assert build_session_context(cleared)["messages"] == []


# --- check --------------------------------------------------------------------------------


def test_check_finds_a_slot_file_clean(agent: Path) -> None:
    report = check_file(omp_file(agent, title="Listing files", source="auto"))
    assert report.clean, report.findings
    assert report.entries == 9


def test_check_reports_a_slot_of_the_wrong_size_and_fix_keeps_it(agent: Path) -> None:
    path = omp_file(agent)
    data = path.read_bytes()
    short = slot_line("x", "auto")[:-4] + b'"}\n'  # one pad space less: 255 bytes
    path.write_bytes(short + data[SLOT_BYTES:] + b'{"type":"mess')  # and a torn tail
    report = fix_file(path)
    assert [f.code for f in report.findings] == ["title-slot-size", "torn-last-line"]
    assert path.read_bytes() == short + data[SLOT_BYTES:]  # the tail went, the slot stayed
    assert [f.code for f in report.remaining or []] == ["title-slot-size"]


def test_check_reports_an_invalid_slot(agent: Path) -> None:
    path = omp_file(agent)
    bad = b'{"type":"title","v":2,"title":"x","updatedAt":"t","pad":""}\n'
    path.write_bytes(bad + path.read_bytes()[SLOT_BYTES:])
    report = fix_file(path)
    assert "title-slot-invalid" in [f.code for f in report.findings]
    assert path.read_bytes().startswith(bad)


# --- writes that keep the slot ------------------------------------------------------------


def test_a_rewrite_of_a_slot_file_keeps_the_slot_and_every_other_line(agent: Path) -> None:
    path = omp_file(agent, title="Listing files", source="auto")
    before = path.read_bytes()
    manager = SessionManager.open(path)
    manager.get_entry("e0000003")["message"]["content"][0]["text"] = "How do I list all files?"
    manager.rewrite_entries()
    after = path.read_bytes()
    assert after[:SLOT_BYTES] == before[:SLOT_BYTES]
    old_lines, new_lines = before.split(b"\n"), after.split(b"\n")
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert changed == [4]  # slot, header, model_change, thinking change, then the edit
    assert SessionManager.open(path, browse=True).get_session_name() == "Listing files"


def test_appends_after_a_slot_land_after_it(agent: Path) -> None:
    path = omp_file(agent, title="Listing files", source="auto")
    before = path.read_bytes()
    with SessionManager.open(path) as manager:
        manager.append_message({"role": "user", "content": "next", "timestamp": 0})
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1


def test_another_process_renaming_in_place_is_caught_up(agent: Path) -> None:
    path = omp_file(agent, title="Listing files", source="auto")
    manager = SessionManager.open(path)
    with open(path, "r+b") as f:
        f.write(slot_line("Renamed", "user", "2026-11-20T11:00:00.000Z"))
    assert manager.catch_up() == -1
    assert manager.get_session_name() == "Renamed"
    assert manager.get_header()["titleSource"] == "user"


# --- search -------------------------------------------------------------------------------


def test_the_search_index_reads_slot_files(agent: Path, tmp_path: Path) -> None:
    omp_file(agent)
    with SearchIndex(tmp_path / "search.db") as index:
        index.update(agent / "sessions")
        hits = index.search("list files")
    assert [hit.entry_id for hit in hits] == ["e0000003"]
    assert os.path.exists(tmp_path / "search.db")


def test_side_calls_count_in_the_usage_totals(agent: Path) -> None:
    # omp counts a model_usage entry's usage with the assistant messages' own.
    usage = SessionManager.open(omp_file(agent), browse=True).get_usage_statistics()
    assert (usage["input"], usage["output"], usage["cost"]) == (10, 2, 0)


def test_check_says_when_nothing_follows_the_slot(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(slot_line("only a slot"))
    (finding,) = check_file(path).findings
    assert finding.code == "header-missing" and "nothing follows the title slot" in finding.message


def test_new_entry_types_have_words_in_the_tree() -> None:
    words = {e["type"]: describe_entry(e) for e in conversation()}
    assert words["title_change"] == "Listing files"
    assert words["model_usage"] == "title fake/fake-model"
    assert words["credential_pin"] == "fake"
    assert words["ttsr_injection"] == "no-rm-rf"
    init = entry("session_init", "s1", None, 1, systemPrompt="p", task="look around", tools=[])
    assert describe_entry(init) == "look around"
