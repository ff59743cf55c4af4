"""SessionManager: appends, tree moves, labels, whole-session operations."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest
from support.session_helpers import assistant, file_objects, temp_files, user

import core
from core import (
    EntryNotFoundError,
    MemorySessionStorage,
    NotASessionError,
    SessionManager,
)
from core.errors import GuestWriteWouldWait

HEX8 = re.compile(r"[0-9a-f]{8}")


def agent_session_dir(tmp_path: Path, project: str = "--work-demo--") -> Path:
    directory = tmp_path / "agent" / "sessions" / project
    directory.mkdir(parents=True)
    return directory


# ---------------------------------------------------------------------------- appends


def test_every_append_method_chains_on_the_leaf() -> None:
    m = SessionManager.in_memory("/w")
    ids = [
        m.append_message(user("hi")),
        m.append_thinking_level_change("high"),
        m.append_model_change("openai/gpt-5", role="smol"),
        m.append_custom_entry("ext", {"k": 1}),
        m.append_custom_message_entry("note", "text", True, details={"d": 1}),
        m.append_ttsr_injection(["r1", "r2"]),
        m.append_session_init("sys", "task", [{"name": "read"}], output_schema={"type": "x"}),
        m.append_mode_change("plan", {"step": 1}),
        m.append_compaction("sum", "short", None, 1234, details={"a": 1}, preserve_data={"p": 1}),
        m.append_message(assistant("ok")),
    ]
    ids.append(m.append_label_change(ids[0], "start"))
    entries = m.get_entries()
    assert [e["id"] for e in entries] == ids
    assert len(set(ids)) == len(ids)
    assert all(HEX8.fullmatch(i) for i in ids)
    assert entries[0]["parentId"] is None
    for previous, entry in itertools.pairwise(entries):
        assert entry["parentId"] == previous["id"]
    assert m.get_leaf_id() == ids[-1]
    by_type = {e["type"]: e for e in entries}
    assert by_type["model_change"]["model"] == "openai/gpt-5"
    assert by_type["model_change"]["role"] == "smol"
    assert by_type["thinking_level_change"]["thinkingLevel"] == "high"
    assert by_type["custom_message"]["attribution"] == "agent"
    assert by_type["custom_message"]["display"] is True
    assert by_type["ttsr_injection"]["injectedRules"] == ["r1", "r2"]
    assert by_type["session_init"]["outputSchema"] == {"type": "x"}
    assert by_type["mode_change"]["data"] == {"step": 1}
    comp = by_type["compaction"]
    assert (comp["shortSummary"], comp["tokensBefore"], comp["preserveData"]) == (
        "short",
        1234,
        {"p": 1},
    )
    assert "fromExtension" not in comp
    assert by_type["label"]["targetId"] == ids[0]
    assert m.get_label(ids[0]) == "start"
    assert all(isinstance(e["timestamp"], str) and e["timestamp"].endswith("Z") for e in entries)


def test_model_change_without_role_has_no_role_field() -> None:
    m = SessionManager.in_memory()
    m.append_model_change("a/b")
    assert "role" not in m.get_entries()[0]


def test_append_entry_accepts_unknown_types_and_assigns_base_fields() -> None:
    m = SessionManager.in_memory()
    first = m.append_message(user("x"))
    new = m.append_entry({"type": "service_tier_change", "tier": "flex", "id": "ignored"})
    entry = m.get_entry(new)
    assert entry is not None
    assert entry["tier"] == "flex" and entry["parentId"] == first and entry["id"] == new
    with pytest.raises(ValueError):
        m.append_entry({"type": "session"})
    with pytest.raises(EntryNotFoundError):
        m.append_entry({"type": "label", "targetId": "nope", "label": "x"})


# ---------------------------------------------------------------------------- tree moves


def test_branch_reset_and_unknown_ids() -> None:
    m = SessionManager.in_memory()
    a = m.append_message(user("a"))
    b = m.append_message(assistant("b"))
    m.branch(a)
    assert m.get_leaf_id() == a
    c = m.append_message(user("c"))
    assert m.get_entry(c)["parentId"] == a  # type: ignore[index]
    assert [e["id"] for e in m.get_children(a)] == [b, c]
    with pytest.raises(EntryNotFoundError, match="Entry zzz not found"):
        m.branch("zzz")
    assert m.get_leaf_id() == c
    m.reset_leaf()
    assert m.get_leaf_id() is None
    assert m.build_session_context()["messages"] == []
    root2 = m.append_message(user("new root"))
    assert m.get_entry(root2)["parentId"] is None  # type: ignore[index]


def test_branch_with_summary_from_id_and_from_root() -> None:
    m = SessionManager.in_memory()
    a = m.append_message(user("a"))
    m.append_message(assistant("b"))
    s1 = m.branch_with_summary(a, "tried b", details={"x": 1}, from_extension=True)
    e1 = m.get_entry(s1)
    assert e1 is not None
    assert (e1["type"], e1["parentId"], e1["fromId"], e1["fromExtension"]) == (
        "branch_summary",
        a,
        a,
        True,
    )
    s2 = m.branch_with_summary(None, "from the start")
    e2 = m.get_entry(s2)
    assert e2 is not None
    assert e2["parentId"] is None and e2["fromId"] == "root"
    ctx = m.build_session_context()
    assert ctx["messages"][-1]["role"] == "branchSummary"
    with pytest.raises(EntryNotFoundError):
        m.branch_with_summary("missing", "x")


def test_labels_set_replace_clear_and_unknown_target() -> None:
    m = SessionManager.in_memory()
    a = m.append_message(user("a"))
    m.append_label_change(a, "one")
    m.append_label_change(a, "two")
    assert m.get_labels() == {a: "two"}
    m.append_label_change(a, "")
    assert m.get_label(a) is None
    m.append_label_change(a, "three")
    m.append_label_change(a, None)
    assert m.get_labels() == {}
    with pytest.raises(EntryNotFoundError):
        m.append_label_change("nothere", "x")
    # label entries add nothing to the context
    assert len(m.build_session_context()["messages"]) == 1


def test_get_branch_and_tree_roots_orphans_and_order() -> None:
    storage = MemorySessionStorage()
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00.000Z"},
        {
            "type": "message",
            "id": "r",
            "parentId": None,
            "timestamp": "2025-01-01T00:00:01.000Z",
            "message": user("r"),
        },
        {
            "type": "message",
            "id": "late",
            "parentId": "r",
            "timestamp": "2025-01-01T00:00:09.000Z",
            "message": user("late"),
        },
        {
            "type": "message",
            "id": "early",
            "parentId": "r",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "message": user("early"),
        },
        {
            "type": "message",
            "id": "self",
            "parentId": "self",
            "timestamp": "2025-01-01T00:00:03.000Z",
            "message": user("self"),
        },
        {
            "type": "message",
            "id": "orph",
            "parentId": "gone",
            "timestamp": "2025-01-01T00:00:04.000Z",
            "message": user("orphan"),
        },
        {
            "type": "label",
            "id": "lab",
            "parentId": "early",
            "timestamp": "2025-01-01T00:00:05.000Z",
            "targetId": "r",
            "label": "root!",
        },
    ]
    storage.write_bytes("/s/f.jsonl", b"".join(core.dumps_line(o) for o in lines))
    m = SessionManager.open("/s/f.jsonl", storage=storage, browse=True)
    tree = m.get_tree()
    assert [n["entry"]["id"] for n in tree] == ["r", "self", "orph"]
    assert tree[0]["label"] == "root!"
    assert [c["entry"]["id"] for c in tree[0]["children"]] == ["early", "late"]
    assert [e["id"] for e in m.get_branch()] == ["r", "early", "lab"]
    assert [e["id"] for e in m.get_branch("late")] == ["r", "late"]
    assert m.get_branch("unknown") == []


def test_get_tree_and_branch_on_a_100k_deep_chain() -> None:
    m = SessionManager.in_memory()
    with m.batch():
        for i in range(100_000):
            m.append_custom_entry("x", i)
    tree = m.get_tree()
    depth, node = 0, tree[0]
    while node["children"]:
        node = node["children"][0]
        depth += 1
    assert depth == 99_999
    assert len(m.get_branch()) == 100_000
    assert m.build_session_context()["messages"] == []


def test_usage_statistics_sum_assistant_usage() -> None:
    m = SessionManager.in_memory()
    usage = {"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 1, "cost": {"total": 0.5}}
    m.append_message(user("q"))
    m.append_message(assistant("a", usage=usage))
    first = m.get_usage_statistics()
    m.append_message(assistant("b", usage=usage))
    m.append_message(assistant("c", usage="garbage"))
    stats = m.get_usage_statistics()
    assert first["input"] == 10
    assert (stats["input"], stats["output"], stats["cacheRead"], stats["cacheWrite"]) == (
        20,
        10,
        4,
        2,
    )
    assert stats["cost"] == pytest.approx(1.0)
    stats["input"] = -1  # each call's dict is the caller's own (ManagerSource keeps it)
    assert m.get_usage_statistics()["input"] == 20


# ---------------------------------------------------------------------------- naming


def test_set_session_name_sanitises_and_respects_user_names(tmp_path: Path) -> None:
    m = SessionManager.create("/w", agent_session_dir(tmp_path))
    with pytest.raises(ValueError):
        m.set_session_name(" \x00\t ")
    assert m.set_session_name("  hello\x07\x85 \n world  ")
    assert m.get_header()["title"] == "hello world"
    assert m.get_header()["titleSource"] == "auto"
    assert m.set_session_name("mine", "user")
    assert m.set_session_name("auto again") is False
    assert m.get_header()["title"] == "mine"
    # not on disk yet: nothing was written
    assert m.session_file is not None and not os.path.exists(m.session_file)
    m.ensure_on_disk()
    assert m.set_session_name("renamed", "user")
    assert file_objects(m.session_file)[0]["title"] == "renamed"
    assert temp_files(os.path.dirname(m.session_file)) == []


# ---------------------------------------------------------------------------- new files


def test_create_branched_session_keeps_path_and_labels(tmp_path: Path) -> None:
    directory = agent_session_dir(tmp_path)
    m = SessionManager.create("/w", directory)
    a = m.append_message(user("a"))
    b = m.append_message(assistant("b"))
    m.append_label_change(a, "start")  # a label entry on the path
    c = m.append_message(user("c"))
    m.branch(b)
    other = m.append_message(user("other branch"))
    m.append_label_change(other, "elsewhere")
    old_file = m.session_file
    new_file = m.create_branched_session(c)
    assert new_file is not None and new_file != old_file
    assert m.session_file == new_file
    objects = file_objects(new_file)
    header, entries = objects[0], objects[1:]
    assert header["parentSession"] == old_file
    assert [e["id"] for e in entries[:3]] == [a, b, c]
    assert entries[2]["parentId"] == b  # re-chained over the dropped label entry
    labels = [e for e in entries if e["type"] == "label"]
    assert [(e["targetId"], e["label"]) for e in labels] == [(a, "start")]
    assert labels[0]["parentId"] == c
    assert m.get_labels() == {a: "start"}
    assert m.get_leaf_id() == labels[0]["id"]
    with pytest.raises(EntryNotFoundError):
        m.create_branched_session("nope")


def test_create_branched_session_without_switch_leaves_manager(tmp_path: Path) -> None:
    m = SessionManager.create("/w", agent_session_dir(tmp_path))
    a = m.append_message(user("a"))
    m.append_message(user("b"))
    before = m.session_file
    new_file = m.create_branched_session(a, switch=False)
    assert m.session_file == before and m.entry_count() == 2
    assert new_file is not None
    assert [e["id"] for e in file_objects(new_file)[1:]] == [a]


def test_create_branched_session_in_memory_returns_none() -> None:
    m = SessionManager.in_memory()
    a = m.append_message(user("a"))
    assert m.create_branched_session(a) is None
    assert [e["id"] for e in m.get_entries()] == [a]


def test_fork_copies_everything_with_new_id(tmp_path: Path) -> None:
    directory = agent_session_dir(tmp_path)
    m = SessionManager.create("/w", directory)
    m.append_message(user("a"))
    m.set_session_name("titled", "user")
    old_id, old_entries = m.get_session_id(), m.get_entries()
    new_file = m.fork()
    assert new_file is not None and os.path.dirname(new_file) == str(directory)
    header = file_objects(new_file)[0]
    assert header["id"] != old_id and header["parentSession"] == old_id
    assert (header["title"], header["titleSource"]) == ("titled", "user")
    assert file_objects(new_file)[1:] == old_entries
    assert m.get_session_id() == header["id"]


def test_fork_from_other_file_migrates_copy_not_source(tmp_path: Path) -> None:
    source = tmp_path / "old.jsonl"
    source.write_text(
        '{"type":"session","id":"src","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/a",'
        '"title":"t"}\n{"type":"message","timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}\n'
    )
    before = source.read_bytes()
    target_dir = agent_session_dir(tmp_path)
    m = SessionManager.fork_from(source, "/b", target_dir)
    assert source.read_bytes() == before
    assert m.session_file is not None
    objects = file_objects(m.session_file)
    assert objects[0]["cwd"] == "/b" and objects[0]["parentSession"] == str(source)
    assert objects[0]["title"] == "t" and objects[0]["version"] == 3
    assert HEX8.fullmatch(objects[1]["id"])
    with pytest.raises(NotASessionError):
        SessionManager.fork_from(tmp_path / "missing.jsonl", "/b", target_dir)


def test_move_to_moves_file_and_artifacts(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    m = SessionManager.create("/old/place", core.session_dir_for_cwd("/old/place", agent))
    m.append_message(user("q"))
    m.append_message(assistant("a"))
    old_file = m.session_file
    assert old_file is not None
    artifacts = Path(old_file[: -len(".jsonl")])
    artifacts.mkdir()
    (artifacts / "out.txt").write_text("artifact")
    new_file = m.move_to("/new/place")
    assert new_file == str(
        core.session_dir_for_cwd("/new/place", agent) / os.path.basename(old_file)
    )
    assert not os.path.exists(old_file) and not artifacts.exists()
    assert (Path(new_file[: -len(".jsonl")]) / "out.txt").read_text() == "artifact"
    assert file_objects(new_file)[0]["cwd"] == "/new/place"
    m.append_message(user("after move"))
    assert file_objects(new_file)[-1]["message"]["content"][0]["text"] == "after move"


class _RenameFailsForDirs(core.FileSessionStorage):
    def rename(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if os.path.isdir(src):
            raise OSError("simulated rename failure")
        super().rename(src, dst)


def test_move_to_rolls_back_when_a_step_fails(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    storage = _RenameFailsForDirs()
    m = SessionManager.create("/old", core.session_dir_for_cwd("/old", agent), storage)
    m.append_message(assistant("a"))
    old_file = m.session_file
    assert old_file is not None
    Path(old_file[: -len(".jsonl")]).mkdir()
    before = Path(old_file).read_bytes()
    with pytest.raises(OSError, match="simulated"):
        m.move_to("/new")
    assert Path(old_file).read_bytes() == before
    assert m.session_file == old_file and m.get_cwd() == "/old"
    assert m.get_header()["cwd"] == "/old"
    m.append_message(user("still works"))
    assert file_objects(old_file)[-1]["message"]["role"] == "user"


# ---------------------------------------------------------------------------- loading


def test_open_missing_file_initialises_a_session_there(tmp_path: Path) -> None:
    path = tmp_path / "fresh.jsonl"
    m = SessionManager.open(path)
    assert m.session_file == str(path)
    objects = file_objects(path)
    assert len(objects) == 1 and objects[0]["type"] == "session"
    assert objects[0]["id"] == m.get_session_id()


def test_browse_open_never_writes_and_rejects_non_sessions(tmp_path: Path) -> None:
    with pytest.raises(NotASessionError):
        SessionManager.open(tmp_path / "missing.jsonl", browse=True)
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"not json\n")
    with pytest.raises(NotASessionError):
        SessionManager.open(junk, browse=True)
    assert junk.read_bytes() == b"not json\n"
    assert not (tmp_path / "missing.jsonl").exists()


def test_browse_keeps_migration_in_memory_until_next_persist(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    v1 = (
        '{"type":"session","id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/x"}\n'
        '{"type":"message","timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}\n'
    )
    path.write_text(v1)
    m = SessionManager.open(path, browse=True)
    assert m.needs_rewrite and m.version == 3
    assert path.read_text() == v1
    first_id = m.get_entries()[0]["id"]
    assert SessionManager.open(path, browse=True).get_entries()[0]["id"] == first_id
    m.append_message(user("more"))  # the next persist is a full atomic rewrite
    assert not m.needs_rewrite
    objects = file_objects(path)
    assert objects[0]["version"] == 3 and objects[1]["id"] == first_id
    assert len(objects) == 3


def test_open_rewrites_a_migrated_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    path.write_text(
        '{"type":"session","id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/x"}\n'
        '{"type":"message","timestamp":"2025-01-01T00:00:01.000Z",'
        '"message":{"role":"hookMessage","content":"hi","timestamp":1}}\n'
    )
    m = SessionManager.open(path)
    assert not m.needs_rewrite
    objects = file_objects(path)
    assert objects[0]["version"] == 3
    assert objects[1]["message"]["role"] == "custom"
    assert objects[1]["id"] == m.get_entries()[0]["id"]


def test_unknown_types_and_fields_survive_a_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "s",
            "timestamp": "2025-01-01T00:00:00.000Z",
            "cwd": "/x",
            "futureHeader": {"a": [1, 2]},
        },
        {
            "type": "context_change",
            "id": "aaaaaaaa",
            "parentId": None,
            "timestamp": "2025-01-01T00:00:01.000Z",
            "weird": [None, True, 1.5, "ü"],
        },
        {
            "type": "message",
            "id": "bbbbbbbb",
            "parentId": "aaaaaaaa",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "extra": 1,
            "message": {"role": "assistant", "content": [], "unknownKey": "v"},
        },
    ]
    path.write_bytes(b"".join(core.dumps_line(o) for o in lines))
    m = SessionManager.open(path)
    m.rewrite_entries()
    assert file_objects(path) == lines
    m.append_message(user("x"))
    assert file_objects(path)[:3] == lines


def append_foreign_line(path: str, entry_id: str, parent: str) -> None:
    """A message line another process (an agent) appends to the file."""
    foreign = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:00.000Z",
        "message": user("from agent"),
    }
    with open(path, "ab") as fh:
        fh.write(core.dumps_line(foreign))


def test_catch_up_reads_lines_appended_by_another_writer(tmp_path: Path) -> None:
    m = SessionManager.create("/w", agent_session_dir(tmp_path))
    a = m.append_message(assistant("a"))
    m.flush()
    assert m.catch_up() == 0
    path = m.session_file
    assert path is not None
    append_foreign_line(path, "f0f0f0f0", a)
    with open(path, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn"')  # half a line: waits
    assert m.catch_up() == 1
    assert m.get_leaf_id() == "f0f0f0f0"
    assert m.catch_up() == 0
    # our next append is not glued onto the torn line, and chains onto the foreign one
    mine = m.append_message(user("mine"))
    objects = file_objects(path)
    assert objects[-1]["id"] == mine and objects[-1]["parentId"] == "f0f0f0f0"
    # the file was replaced: full reload
    other = SessionManager.open(path, browse=True)
    other.set_session_name("replaced", "user")
    assert m.catch_up() == -1
    assert m.get_header()["title"] == "replaced"


def test_a_catch_up_refusing_waits_stops_at_a_changed_file_before_reading(
    tmp_path: Path,
) -> None:
    # An event loop's inline write (`refusing_waits`) must not read what another
    # process wrote (any size) nor parse a replaced file: the catch-up's stat finds the
    # change and raises before anything is read; outside the block it catches up.
    m = SessionManager.create("/w", agent_session_dir(tmp_path))
    a = m.append_message(assistant("a"))
    m.flush()
    path = m.session_file
    assert path is not None
    with m.refusing_waits():
        assert m.catch_up() == 0  # unchanged: one stat, nothing refused
    append_foreign_line(path, "f1f1f1f1", a)
    with m.refusing_waits(), pytest.raises(GuestWriteWouldWait):
        m.catch_up()
    with m.refusing_waits(), pytest.raises(GuestWriteWouldWait), m.batch():
        m.append_message(user("not now"))  # a batch catches up first
    assert m.get_entry("f1f1f1f1") is None and m.get_leaf_id() == a
    assert file_objects(path)[-1]["id"] == "f1f1f1f1"  # nothing of ours was written
    assert m.catch_up() == 1 and m.get_leaf_id() == "f1f1f1f1"
    with m.refusing_waits(), m.batch():
        mine = m.append_message(user("now"))
    objects = file_objects(path)
    assert objects[-1]["id"] == mine and objects[-1]["parentId"] == "f1f1f1f1"


def test_batch_is_one_write_and_all_or_nothing(tmp_path: Path) -> None:
    m = SessionManager.create("/w", agent_session_dir(tmp_path))
    m.append_message(assistant("first"))
    path = m.session_file
    assert path is not None
    size = os.path.getsize(path)
    leaf = m.get_leaf_id()
    with pytest.raises(RuntimeError), m.batch():
        m.append_message(user("one"))
        m.append_label_change(leaf, "lbl")  # type: ignore[arg-type]
        raise RuntimeError("abort")
    assert os.path.getsize(path) == size
    assert m.get_leaf_id() == leaf and m.entry_count() == 1 and m.get_labels() == {}
    with m.batch():
        x = m.append_message(user("one"))
        y = m.append_message(assistant("two"))
        assert os.path.getsize(path) == size  # nothing written inside the block
    assert [o["id"] for o in file_objects(path)[-2:]] == [x, y]
    assert m.get_leaf_id() == y


def test_in_memory_sessions_never_touch_storage() -> None:
    storage = MemorySessionStorage()
    m = SessionManager.in_memory("/w", storage)
    m.append_message(user("a"))
    m.append_message(assistant("b"))
    m.ensure_on_disk()
    m.flush()
    m.close()
    assert m.session_file is None
    assert storage.list_files("/", "*") == []
    assert not m.is_persisted


def test_build_session_context_method_uses_current_leaf() -> None:
    m = SessionManager.in_memory()
    a = m.append_message(user("a"))
    m.append_message(assistant("b"))
    assert len(m.build_session_context()["messages"]) == 2
    assert len(m.build_session_context(a)["messages"]) == 1
    assert m.build_session_context(None)["messages"] == []


def test_public_surface_of_core() -> None:
    names = [
        "SessionManager",
        "build_session_context",
        "load_entries_from_file",
        "parse_jsonl_lenient",
        "migrate_session_entries",
        "CURRENT_SESSION_VERSION",
        "BlobStore",
        "FileSessionStorage",
        "MemorySessionStorage",
        "get_recent_sessions",
        "find_most_recent_session",
        "list_sessions",
        "list_all",
        "resolve_session",
        "HistoryStorage",
        "encode_cwd",
        "default_agent_dir",
        "NotASessionError",
        "PersistenceError",
    ]
    missing = [n for n in names if not hasattr(core, n)]
    assert missing == []
    for method in [
        "create",
        "open",
        "continue_recent",
        "fork_from",
        "in_memory",
        "append_message",
        "append_thinking_level_change",
        "append_model_change",
        "append_compaction",
        "append_custom_entry",
        "append_custom_message_entry",
        "append_label_change",
        "append_ttsr_injection",
        "append_session_init",
        "append_mode_change",
        "branch",
        "reset_leaf",
        "branch_with_summary",
        "get_entries",
        "get_entry",
        "get_children",
        "get_label",
        "get_leaf_id",
        "get_branch",
        "get_tree",
        "create_branched_session",
        "fork",
        "move_to",
        "set_session_name",
        "get_header",
        "get_session_file",
        "get_session_id",
        "get_usage_statistics",
        "flush",
        "close",
        "ensure_on_disk",
        "rewrite_entries",
        "build_session_context",
        "catch_up",
        "batch",
        "get_labels",
        "set_session_file",
    ]:
        assert callable(getattr(SessionManager, method)), method


def test_whole_file_rewrites_keep_lines_appended_by_others(tmp_path: Path) -> None:
    m = SessionManager.create("/w", agent_session_dir(tmp_path))
    a = m.append_message(assistant("a"))
    path = m.session_file
    assert path is not None
    foreign = {
        "type": "message",
        "id": "0f0f0f0f",
        "parentId": a,
        "timestamp": "2025-01-01T00:00:00.000Z",
        "message": user("written by the agent meanwhile"),
    }
    with open(path, "ab") as fh:
        fh.write(core.dumps_line(foreign))
    m.set_session_name("renamed", "user")
    objects = file_objects(path)
    assert objects[0]["title"] == "renamed"
    assert objects[-1]["id"] == "0f0f0f0f"
