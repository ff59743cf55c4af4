"""session_writer on real session files in tmp dirs: every write path, checked on disk."""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.agent_messages import assistant, file_objects, make_session
from support.write_helpers import (
    FailingStorage,
    append_raw_line,
    fixture_path,
    v1_session,
)

from core import SessionManager, load_entries_from_file
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes import session_writer as writer
from sessionfs.writes.append_parse import parse_append


def browse(path: Path, **kwargs: Any) -> SessionManager:
    return SessionManager.open(path, browse=True, **kwargs)


def ops(data: str, name: str = "drop.jsonl") -> list[Any]:
    return parse_append(name, data.encode())


def rejected_errno(call: Any, *args: Any, **kwargs: Any) -> WriteRejected:
    with pytest.raises(WriteRejected) as info:
        call(*args, **kwargs)
    return info.value


# ---------------------------------------------------------------- appends


def test_append_chains_ops_under_the_leaf_and_is_on_disk(session_path: Path) -> None:
    manager = browse(session_path)
    leaf_before = manager.get_leaf_id()
    result = writer.append_ops(
        manager,
        ops('{"role":"user","content":"q"}\n{"type":"custom","customType":"ext","data":1}\n'),
    )
    assert manager.get_leaf_id() == result.leaf_id == result.new_ids[-1]
    on_disk = file_objects(session_path)
    first, second = on_disk[-2:]
    assert first["id"] == result.new_ids[0] and first["parentId"] == leaf_before
    assert second["parentId"] == first["id"]
    assert second == {**second, "type": "custom", "customType": "ext", "data": 1}
    # A fresh load agrees with the writer's memory.
    assert [e["id"] for e in browse(session_path).get_entries()] == [
        e["id"] for e in manager.get_entries()
    ]


def test_append_is_fsynced_before_returning(
    session_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = browse(session_path)
    synced: list[int] = []

    def spying(real_sync: Callable[[int], None]) -> Callable[[int], None]:
        def spy(fd: int) -> None:
            synced.append(os.fstat(fd).st_ino)
            real_sync(fd)

        return spy

    # Appends use fdatasync (the size is data there); either one makes them durable.
    monkeypatch.setattr(os, "fsync", spying(os.fsync))
    monkeypatch.setattr(os, "fdatasync", spying(os.fdatasync))
    writer.append_ops(manager, ops('{"role":"user","content":"durable"}'))
    assert os.stat(session_path).st_ino in synced


def test_unknown_reference_is_enoent_and_nothing_is_appended(session_path: Path) -> None:
    manager = browse(session_path)
    before = session_path.read_bytes()
    error = rejected_errno(
        writer.append_ops,
        manager,
        ops('{"role":"user","content":"ok"}\n{"type":"label","targetId":"ffffffff","label":"x"}'),
    )
    assert error.errno == errno.ENOENT and "ffffffff" in error.reason
    assert not error.reload_session
    assert session_path.read_bytes() == before
    assert manager.entry_count() == len(browse(session_path).get_entries())


def test_references_to_existing_entries_work(session_path: Path) -> None:
    manager = browse(session_path)
    first = manager.get_entries()[0]["id"]
    result = writer.append_ops(
        manager,
        ops(
            f'{{"type":"branch_summary","fromId":"{first}","summary":"back to start"}}\n'
            f'{{"type":"label","targetId":"{first}","label":"start"}}\n'
        ),
    )
    summary, label = file_objects(session_path)[-2:]
    assert summary["parentId"] == first and summary["fromId"] == first
    assert label["parentId"] == summary["id"] == result.new_ids[0]
    assert browse(session_path).get_labels()[first] == "start"


def test_branch_summary_from_root_starts_a_new_root(session_path: Path) -> None:
    manager = browse(session_path)
    writer.append_ops(manager, ops('{"type":"branch_summary","fromId":"root","summary":"s"}'))
    last = file_objects(session_path)[-1]
    assert last["parentId"] is None and last["fromId"] == "root"


def test_unknown_entry_type_is_appended_verbatim(session_path: Path) -> None:
    manager = browse(session_path)
    writer.append_ops(manager, ops('{"type":"service_tier_change","tier":"flex","x":[1]}'))
    last = file_objects(session_path)[-1]
    assert last["type"] == "service_tier_change" and last["tier"] == "flex" and last["x"] == [1]
    assert set(last) == {"type", "id", "parentId", "timestamp", "tier", "x"}


def test_append_catches_up_with_an_agent_writing_the_same_file(session_path: Path) -> None:
    manager = browse(session_path)
    agent = browse(session_path)
    agent_leaf = agent.get_leaf_id()
    # The agent appends on its own (another process: raw O_APPEND line).
    append_raw_line(
        session_path,
        {
            "type": "message",
            "id": "agent001",
            "parentId": agent_leaf,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": assistant("from the agent"),
        },
    )
    writer.append_ops(manager, ops('{"role":"user","content":"after the agent"}'))
    last = file_objects(session_path)[-1]
    assert last["parentId"] == "agent001"
    assert [e["id"] for e in load_entries_from_file(session_path)[1:]].count("agent001") == 1


def test_reference_to_an_entry_the_agent_just_wrote_resolves(session_path: Path) -> None:
    manager = browse(session_path)
    append_raw_line(
        session_path,
        {
            "type": "custom",
            "id": "fresh001",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:00Z",
            "customType": "x",
        },
    )
    writer.append_ops(manager, ops('{"type":"label","targetId":"fresh001","label":"new"}'))
    assert browse(session_path).get_labels()["fresh001"] == "new"


def test_append_after_torn_last_line_starts_on_a_new_line(session_path: Path) -> None:
    manager = browse(session_path)
    with open(session_path, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn0001","par')
    writer.append_ops(manager, ops('{"role":"user","content":"after crash"}'))
    lines = session_path.read_bytes().split(b"\n")
    assert lines[-2].startswith(b'{"type":"message"') and b"after crash" in lines[-2]
    assert lines[-3].endswith(b'"par')
    assert file_objects(session_path)[-1]["message"]["content"] == "after crash"


# ---------------------------------------------------------------- migration


def test_first_write_migrates_a_v1_file_with_the_ids_the_view_showed(agent_dir: Path) -> None:
    path = v1_session(agent_dir)
    original = path.read_bytes()
    view = browse(path)
    shown = [e["id"] for e in view.get_entries()]
    # Browsing and moving the leaf never touch the file.
    writer.set_leaf_from_link(view, shown[0])
    writer.reset_leaf(view)
    assert path.read_bytes() == original
    writer.set_leaf_from_link(view, shown[-1])
    result = writer.append_ops(view, ops('{"role":"user","content":"first write"}'))
    objects = file_objects(path)
    assert objects[0]["version"] == 3
    assert [o["id"] for o in objects[1:]] == [*shown, result.leaf_id]
    assert objects[-1]["parentId"] == shown[-1]
    assert objects[3]["message"]["role"] == "custom"  # hookMessage migrated (v2 -> v3)
    assert "firstKeptEntryIndex" not in objects[4]
    assert not [n for n in os.listdir(path.parent) if n.endswith(".tmp")]
    # A second load sees a v3 file that needs no rewrite.
    assert not browse(path).needs_rewrite


def test_real_fixture_migrates_on_first_write_keeping_ids(agent_dir: Path) -> None:
    source = fixture_path("pi-v1-before-compaction.jsonl")
    path = agent_dir / "sessions" / "--fixture--" / source.name
    path.parent.mkdir(parents=True)
    shutil.copyfile(source, path)
    view = browse(path)
    shown = [e["id"] for e in view.get_entries()]
    assert view.needs_rewrite
    writer.append_ops(view, ops("continue", name="p.txt"))
    reloaded = browse(path)
    assert not reloaded.needs_rewrite
    assert [e["id"] for e in reloaded.get_entries()][:-1] == shown


def test_title_write_migrates_too(agent_dir: Path) -> None:
    path = v1_session(agent_dir)
    view = browse(path)
    shown = [e["id"] for e in view.get_entries()]
    writer.set_title(view, "Old work")
    objects = file_objects(path)
    assert objects[0]["version"] == 3 and objects[0]["title"] == "Old work"
    assert [o["id"] for o in objects[1:]] == shown


# ---------------------------------------------------------------- leaf


def test_branch_then_append_goes_under_the_chosen_entry(session_path: Path) -> None:
    manager = browse(session_path)
    first = manager.get_entries()[0]["id"]
    before = session_path.read_bytes()
    assert writer.set_leaf_from_link(manager, f"entries/{first}.json") == first
    assert session_path.read_bytes() == before  # the leaf is not stored in the file
    result = writer.append_ops(manager, ops("branch here", name="x.txt"))
    assert file_objects(session_path)[-1]["parentId"] == first
    assert manager.get_leaf_id() == result.leaf_id


def test_branch_errors(session_path: Path) -> None:
    manager = browse(session_path)
    leaf = manager.get_leaf_id()
    assert rejected_errno(writer.set_leaf_from_link, manager, "ffffffff").errno == errno.ENOENT
    assert (
        rejected_errno(writer.set_leaf_from_link, manager, "../../../etc/passwd").errno
        == errno.EINVAL
    )
    assert manager.get_leaf_id() == leaf


def test_reset_then_append_makes_a_new_root(session_path: Path) -> None:
    manager = browse(session_path)
    writer.reset_leaf(manager)
    assert manager.get_leaf_id() is None
    writer.append_ops(manager, ops('{"role":"user","content":"fresh start"}'))
    assert file_objects(session_path)[-1]["parentId"] is None


# ---------------------------------------------------------------- labels


def test_label_round_trip_replace_rename_and_clear(session_path: Path) -> None:
    manager = browse(session_path)
    a, b = (e["id"] for e in manager.get_entries()[:2])
    writer.set_label_from_link(manager, "good", f"../entries/{a}.json")
    assert browse(session_path).get_labels() == {a: "good"}
    # ln -sfn: the name now stands for b, a loses it (one batch).
    result = writer.set_label_from_link(manager, "good", b)
    assert result is not None and len(result.new_ids) == 2
    assert browse(session_path).get_labels() == {b: "good"}
    # Same label again: nothing to do, nothing written.
    before = session_path.read_bytes()
    assert writer.set_label(manager, b, "good") is None
    assert session_path.read_bytes() == before
    # mv labels/good labels/best
    writer.set_label(manager, b, "best")
    assert browse(session_path).get_labels() == {b: "best"}
    # rm labels/best
    writer.clear_label(manager, b)
    assert browse(session_path).get_labels() == {}
    assert file_objects(session_path)[-1] == {
        **file_objects(session_path)[-1],
        "type": "label",
        "targetId": b,
    }
    assert "label" not in file_objects(session_path)[-1]


def test_label_errors(session_path: Path) -> None:
    manager = browse(session_path)
    a = manager.get_entries()[0]["id"]
    before = session_path.read_bytes()
    assert rejected_errno(writer.clear_label, manager, a).errno == errno.ENOENT
    assert rejected_errno(writer.set_label, manager, "ffffffff", "x").errno == errno.ENOENT
    assert rejected_errno(writer.set_label, manager, a, " ").errno == errno.EINVAL
    assert (
        rejected_errno(writer.set_label_from_link, manager, "x", "/etc/passwd").errno
        == errno.EINVAL
    )
    assert (
        rejected_errno(writer.set_label_from_link, manager, "x", f"entries/{a}.json").errno
        == errno.EINVAL
    )
    assert session_path.read_bytes() == before


# ---------------------------------------------------------------- title, flush


def test_title_rewrite_keeps_every_entry(session_path: Path) -> None:
    manager = browse(session_path)
    entries_before = file_objects(session_path)[1:]
    assert writer.set_title(manager, "  My\ttitle\n") == "My title"
    header, *entries = file_objects(session_path)
    assert header["title"] == "My title" and header["titleSource"] == "user"
    assert entries == entries_before


def test_empty_title_is_einval_and_changes_nothing(session_path: Path) -> None:
    manager = browse(session_path)
    before = session_path.read_bytes()
    assert rejected_errno(writer.set_title, manager, " \n\x01").errno == errno.EINVAL
    assert session_path.read_bytes() == before


def test_title_rewrite_keeps_lines_an_agent_appended(session_path: Path) -> None:
    manager = browse(session_path)
    append_raw_line(
        session_path,
        {
            "type": "custom",
            "id": "agent002",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:00Z",
            "customType": "x",
        },
    )
    writer.set_title(manager, "t")
    assert "agent002" in [o.get("id") for o in file_objects(session_path)]


def test_flush_works_with_and_without_pending_writes(session_path: Path) -> None:
    manager = browse(session_path)
    before = session_path.read_bytes()
    writer.flush_session(manager)  # nothing pending: the file is left as it was
    assert session_path.read_bytes() == before
    writer.append_ops(manager, ops("x", name="a.txt"))
    writer.flush_session(manager)
    after = session_path.read_bytes()
    assert after.startswith(before)  # one new line after the old bytes, nothing rewritten
    assert after.count(b"\n") == before.count(b"\n") + 1
    assert file_objects(session_path)[-1] == manager.get_entry(manager.get_leaf_id() or "")
    assert manager.persist_error is None


# ---------------------------------------------------------------- new files


def test_fork_creates_a_copy_and_leaves_the_mounted_session_alone(session_path: Path) -> None:
    manager = browse(session_path)
    writer.set_title(manager, "Forked title")
    path = writer.fork_session(manager)
    assert manager.get_session_file() == str(session_path)
    assert Path(path).parent == session_path.parent
    header, *entries = file_objects(path)
    assert header["title"] == "Forked title"
    assert header["parentSession"] == manager.get_session_id()
    assert entries == file_objects(session_path)[1:]


def test_extract_writes_the_path_only(session_path: Path) -> None:
    manager = browse(session_path)
    entries = manager.get_entries()
    second = entries[1]["id"]
    writer.set_label(manager, entries[0]["id"], "root-label")
    leaf_before = manager.get_leaf_id()
    path = writer.extract_session(manager, second)
    assert manager.get_session_file() == str(session_path)
    assert manager.get_leaf_id() == leaf_before
    extracted = browse(Path(path))
    kept = [e for e in extracted.get_entries() if e["type"] != "label"]
    assert [e["id"] for e in kept] == [entries[0]["id"], second]
    assert extracted.get_labels() == {entries[0]["id"]: "root-label"}
    assert extracted.get_header()["parentSession"] == str(session_path)
    assert rejected_errno(writer.extract_session, manager, "ffffffff").errno == errno.ENOENT


def test_create_session_is_on_disk_at_once(agent_dir: Path) -> None:
    path = Path(writer.create_session(agent_dir, "/srv/new project/", "Hello; $(x)"))
    assert path.parent == agent_dir / "sessions" / "--srv-new project--"
    (header,) = file_objects(path)
    assert header["cwd"] == "/srv/new project"
    assert header["title"] == "Hello; $(x)" and header["titleSource"] == "user"
    untitled = Path(writer.create_session(agent_dir, "/srv/x", None))
    assert "title" not in file_objects(untitled)[0]


def test_create_session_needs_an_absolute_cwd(agent_dir: Path) -> None:
    assert rejected_errno(writer.create_session, agent_dir, "rel/dir", None).errno == errno.EINVAL


# ---------------------------------------------------------------- disk full


def test_disk_full_is_enospc_nothing_appended_then_a_reload_works(agent_dir: Path) -> None:
    storage = FailingStorage()
    path = make_session(agent_dir, storage=storage)
    manager = browse(path, storage=storage)
    before = path.read_bytes()
    count = manager.entry_count()
    storage.fail_errno = errno.ENOSPC
    error = rejected_errno(writer.append_ops, manager, ops("lost", name="a.txt"))
    assert error.errno == errno.ENOSPC and error.reload_session
    assert "No space left" in error.reason
    assert path.read_bytes() == before
    assert manager.entry_count() == count  # the batch was rolled back in memory
    # Space is freed, but this manager latched the error: it keeps refusing (EIO or
    # ENOSPC), which is why the caller drops it.
    storage.fail_errno = None
    again = rejected_errno(writer.append_ops, manager, ops("still refused", name="a.txt"))
    assert again.reload_session
    fresh = browse(path, storage=storage)
    writer.append_ops(fresh, ops("works again", name="a.txt"))
    assert file_objects(path)[-1]["message"]["content"][0]["text"] == "works again"


def test_disk_full_during_title_rewrite_keeps_the_file(agent_dir: Path) -> None:
    storage = FailingStorage()
    path = make_session(agent_dir, storage=storage)
    manager = browse(path, storage=storage)
    before = path.read_bytes()
    storage.fail_errno = errno.ENOSPC
    error = rejected_errno(writer.set_title, manager, "never")
    assert error.errno == errno.ENOSPC and error.reload_session
    assert path.read_bytes() == before
    assert not [n for n in os.listdir(path.parent) if n.endswith(".tmp")]


def test_other_persistence_errors_are_eio(agent_dir: Path) -> None:
    storage = FailingStorage()
    path = make_session(agent_dir, storage=storage)
    manager = browse(path, storage=storage)
    storage.fail_errno = errno.EIO
    error = rejected_errno(writer.append_ops, manager, ops("x", name="a.txt"))
    assert error.errno == errno.EIO and error.reload_session
    assert "Input/output error" in error.reason


def test_large_images_go_to_the_blob_store_like_the_agents_do(
    session_path: Path, agent_dir: Path
) -> None:
    picture = bytes(range(256)) * 8
    data = base64.b64encode(picture).decode()
    body = (
        '{"role":"user","content":[{"type":"text","text":"see"},'
        f'{{"type":"image","data":"{data}","mimeType":"image/png"}}]}}'
    )
    writer.append_ops(browse(session_path), ops(body, name="img.json"))
    stored = file_objects(session_path)[-1]["message"]["content"][1]["data"]
    sha = hashlib.sha256(picture).hexdigest()
    assert stored == f"blob:sha256:{sha}"
    assert (agent_dir / "blobs" / sha).read_bytes() == picture
