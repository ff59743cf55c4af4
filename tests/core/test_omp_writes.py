"""Writing oh-my-pi 18's files the way omp does: a rename appends ``title_change`` and
overwrites the 256-byte slot in place (and upserts ``session_titles``), new files get a
slot only where the agent dir's sessions have one, and a guest (the mount) never
appends to a file another process holds open for writing, and takes omp's lock file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.omp_files import (
    SLOT_BYTES,
    conversation,
    held_open,
    line,
    omp_header,
    slot_line,
    write_omp_session,
)

from core import SessionManager, session_files
from core.publish_lock import (
    PublishLockBusy,
    is_locked,
    lock_path_for,
    omp_has_published,
    publish_lock,
)
from core.rewrite import SessionBusyError
from core.title_slot import split_title_slot
from sessionfs.fs.inotify import IN_CREATE, Inotify

PROJECT = "-work-app"


def omp_file(agent: Path, title: str = "Listing files") -> Path:
    path = agent / "sessions" / PROJECT / "2026-11-20T10-00-00-000Z_omp.jsonl"
    return write_omp_session(path, conversation(), title=title, source="auto")


def titles_db(agent: Path) -> Path:
    db = agent / "history.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE session_titles (session_id TEXT PRIMARY KEY, title TEXT NOT NULL,"
            " updated_at INTEGER NOT NULL DEFAULT 0)"
        )
    return db


def test_a_rename_appends_title_change_and_overwrites_only_the_slot(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    path = omp_file(agent)
    db = titles_db(agent)
    before = path.read_bytes()
    inode = path.stat().st_ino
    manager = SessionManager.open(path)
    assert manager.set_session_name("Find  big\tfiles", "user") is True
    after = path.read_bytes()
    assert path.stat().st_ino == inode  # in place: no rewrite
    tail = after[len(before) :]
    assert after[SLOT_BYTES : len(before)] == before[SLOT_BYTES:]  # nothing else moved
    assert tail.count(b"\n") == 1
    change = json.loads(tail)
    assert list(change) == [
        "type", "id", "parentId", "timestamp", "title", "source", "previousTitle"
    ]  # fmt: skip
    assert (change["type"], change["title"], change["source"], change["previousTitle"]) == (
        "title_change", "Find big files", "user", "Listing files"
    )  # fmt: skip
    assert change["parentId"] == "e0000009" and manager.get_leaf_id() == change["id"]
    assert after[:SLOT_BYTES] == slot_line("Find big files", "user", change["timestamp"])
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT session_id, title FROM session_titles").fetchall()
    assert rows == [(manager.get_session_id(), "Find big files")]
    again = SessionManager.open(path, browse=True)
    assert again.get_session_name() == "Find big files"


def test_a_long_title_is_cut_in_the_slot_only(tmp_path: Path) -> None:
    path = omp_file(tmp_path / "agent")
    manager = SessionManager.open(path)
    long_title = "x" * 400
    manager.set_session_name(long_title, "user")
    data = path.read_bytes()
    slot, body = split_title_slot(data)
    assert body == SLOT_BYTES and slot is not None and long_title.startswith(slot["title"])
    assert json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[1])["title"] == long_title
    assert manager.get_session_name() == long_title


def test_without_a_titles_table_history_db_is_left_alone(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    path = omp_file(agent)
    db = agent / "history.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE other (x)")
    before = db.read_bytes()
    SessionManager.open(path).set_session_name("New", "user")
    assert db.read_bytes() == before


def test_a_file_without_a_slot_keeps_the_header_title_rewrite(tmp_path: Path) -> None:
    manager = SessionManager.create("/work/app", tmp_path / "p")
    manager.ensure_on_disk()
    path = Path(str(manager.get_session_file()))
    manager.set_session_name("Plain", "user")
    data = path.read_bytes()
    assert split_title_slot(data) == (None, 0)
    assert json.loads(data.split(b"\n", 1)[0])["title"] == "Plain"
    assert b"title_change" not in data


def test_new_files_have_a_slot_only_when_asked_and_copies_follow_their_source(
    tmp_path: Path,
) -> None:
    slotted = SessionManager.create("/work/app", tmp_path / "a", title_slot=True)
    slotted.set_session_name("Fresh", "user")
    slotted.ensure_on_disk()
    file = Path(str(slotted.get_session_file()))
    slot, body = split_title_slot(file.read_bytes())
    assert slot is not None and slot["title"] == "Fresh" and body == SLOT_BYTES
    first = slotted.append_message({"role": "user", "content": "q", "timestamp": 0})
    plain = SessionManager.create("/work/app", tmp_path / "b")
    plain_first = plain.append_message({"role": "user", "content": "q", "timestamp": 0})
    plain.ensure_on_disk()
    for manager, entry_id, has_slot in ((slotted, first, True), (plain, plain_first, False)):
        for copy in (
            manager.fork(switch=False),
            manager.create_branched_session(entry_id, switch=False),
        ):
            assert copy is not None
            assert (split_title_slot(Path(copy).read_bytes())[0] is not None) is has_slot


def test_the_agent_dirs_sessions_decide_about_slots(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    other_project = agent / "sessions" / "-work-new"
    other_project.mkdir(parents=True)
    assert session_files.uses_title_slots(str(other_project)) is False  # no evidence
    omp_file(agent)
    assert session_files.uses_title_slots(str(other_project)) is True
    pi_agent = tmp_path / "pi"
    pi = SessionManager.create("/work/app", pi_agent / "sessions" / "--work-app--")
    pi.ensure_on_disk()
    assert session_files.uses_title_slots(str(pi_agent / "sessions" / "--work-x--")) is False
    # No session yet: the model configuration tells whose agent dir it is.
    fresh = tmp_path / "fresh"
    (fresh / "sessions").mkdir(parents=True)
    (fresh / "models.json").write_text("{}")
    assert session_files.uses_title_slots(str(fresh / "sessions" / "-p")) is False
    (fresh / "models.yml").write_text("providers: {}\n")
    assert session_files.uses_title_slots(str(fresh / "sessions" / "-p")) is True


# --- a guest never writes into a file another process holds open ----------------------


def test_a_guest_append_to_a_file_held_open_is_busy_and_changes_nothing(tmp_path: Path) -> None:
    path = omp_file(tmp_path / "agent")
    before = path.read_bytes()
    manager = SessionManager.open(path, guest=True)
    entries = manager.entry_count()
    with held_open(path) as proc:
        with pytest.raises(SessionBusyError) as caught, manager.batch():
            manager.append_message({"role": "user", "content": "x", "timestamp": 0})
        assert caught.value.pids == (proc.pid,) and str(proc.pid) in str(caught.value)
        with pytest.raises(SessionBusyError):
            manager.append_label_change("e0000003", "mark")
        with pytest.raises(SessionBusyError):
            manager.set_session_name("Renamed", "user")
    assert path.read_bytes() == before
    assert manager.entry_count() == entries and manager.get_session_name() == "Listing files"
    assert manager.persist_error is None  # refused, not latched: it works once free
    manager.append_message({"role": "user", "content": "now", "timestamp": 0})
    assert path.read_bytes().startswith(before) and b'"now"' in path.read_bytes()


def test_the_guests_own_descriptor_does_not_count(tmp_path: Path) -> None:
    path = omp_file(tmp_path / "agent")
    manager = SessionManager.open(path, guest=True)
    own = os.open(path, os.O_WRONLY | os.O_APPEND)  # this process: not another one
    try:
        manager.append_message({"role": "user", "content": "mine", "timestamp": 0})
    finally:
        os.close(own)
    assert b'"mine"' in path.read_bytes()


def test_a_guest_append_waits_for_omps_lock_and_gives_up_after_it(tmp_path: Path) -> None:
    path = omp_file(tmp_path / "agent")
    lock = Path(lock_path_for(str(path)))
    manager = SessionManager.open(path, guest=True)
    # Held by a live process (this one, as omp would hold it) for the whole wait.
    lock.write_text(f"{os.getpid()}:{int(time.time() * 1000)}\n")
    start = time.monotonic()
    with pytest.raises(PublishLockBusy) as caught:
        manager.append_message({"role": "user", "content": "x", "timestamp": 0})
    assert time.monotonic() - start >= 0.45 and caught.value.pids == (os.getpid(),)
    assert lock.exists()  # someone else's lock is never removed
    # Released within the wait: the append goes through, and its own lock is gone.
    threading.Timer(0.1, lock.unlink).start()
    manager.append_message({"role": "user", "content": "after", "timestamp": 0})
    assert b'"after"' in path.read_bytes() and not lock.exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    path = omp_file(tmp_path / "agent")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, check=True)  # fmt: skip
    lock = Path(lock_path_for(str(path)))
    lock.write_text(f"{int(dead.stdout)}:1\n")
    SessionManager.open(path, guest=True).append_message(
        {"role": "user", "content": "x", "timestamp": 0}
    )
    assert not lock.exists()


def files_created_by_an_append(path: Path) -> list[str]:
    """The names created beside ``path`` (inotify) while a guest appends to it."""
    watcher = Inotify()
    try:
        watcher.add_watch(path.parent, IN_CREATE)
        SessionManager.open(path, guest=True).append_message(
            {"role": "user", "content": "guest", "timestamp": 0}
        )
        return [event.name for event in watcher.read_events()]
    finally:
        watcher.close()


@pytest.mark.parametrize("omps", ["title slot", "agent dir", "lock sidecar", "none"])
def test_a_guest_takes_omps_lock_only_for_a_file_omp_may_publish(tmp_path: Path, omps: str) -> None:
    """The lock file costs more than the append: a pi file (no slot, no sign of omp)
    gets none; a file with omp's slot, in omp's agent dir, or with omp's lock sidecar
    beside it (omp 18.2 leaves ``.<name>.lock.os`` where its OS lock is a file lock) gets it."""
    agent = tmp_path / "agent"
    path = agent / "sessions" / PROJECT / "s.jsonl"
    if omps == "title slot":
        write_omp_session(path, conversation())
    else:
        path.parent.mkdir(parents=True)
        path.write_bytes(line(omp_header()) + b"".join(line(e) for e in conversation()))
    if omps == "agent dir":
        (agent / session_files.OMP_MODELS_FILE).write_text("providers: {}\n")
    if omps == "lock sidecar":
        Path(f"{lock_path_for(str(path))}.os").touch()
    created = files_created_by_an_append(path)
    lock = os.path.basename(lock_path_for(str(path)))
    assert (lock in created) == (omps != "none"), created
    assert b'"guest"' in path.read_bytes() and not os.path.exists(lock_path_for(str(path)))


def test_omps_lock_and_sidecar_are_seen_as_names_even_dangling(tmp_path: Path) -> None:
    # Checked before every guest append, without following links (as lexists does): a
    # lock or sidecar that is a dangling symlink still says omp publishes the file.
    path = str(tmp_path / "s.jsonl")
    lock = lock_path_for(path)
    assert not omp_has_published(path) and not is_locked(path)
    os.symlink(tmp_path / "gone", f"{lock}.os")
    assert omp_has_published(path) and not is_locked(path)
    os.symlink(tmp_path / "gone", lock)
    assert is_locked(path)
    os.unlink(lock)
    os.unlink(f"{lock}.os")
    assert not omp_has_published(path) and not is_locked(path)


def test_the_lock_file_holds_our_pid_while_held(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_text("")
    with publish_lock(str(target)):
        content = Path(lock_path_for(str(target))).read_text()
        pid, ms = content.rstrip("\n").split(":")
        assert int(pid) == os.getpid() and abs(int(ms) - time.time() * 1000) < 60_000
        assert oct(os.stat(lock_path_for(str(target))).st_mode & 0o777) == "0o600"
    assert not os.path.exists(lock_path_for(str(target)))


def test_omps_own_dir_gets_slots_before_its_first_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("PI_CONFIG_DIR", "PI_CODING_AGENT_DIR", "OMP_PROFILE", "PI_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    project = tmp_path / ".omp" / "agent" / "sessions" / "-app"
    project.mkdir(parents=True)
    assert session_files.uses_title_slots(str(project)) is True
    xcsh_project = tmp_path / ".xcsh" / "agent" / "sessions" / "-app"
    xcsh_project.mkdir(parents=True)
    assert session_files.uses_title_slots(str(xcsh_project)) is False
