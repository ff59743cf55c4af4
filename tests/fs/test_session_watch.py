"""`SessionWatch` on a real directory with real inotify: which mount keys it reports
stale for each change to an agent dir's sessions root (no FUSE involved)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import trio

from sessionfs.fs import session_watch
from sessionfs.fs.foreground import Foreground
from sessionfs.fs.inotify import IN_Q_OVERFLOW, Event
from sessionfs.fs.nodes.base import DirNode, MountContext
from sessionfs.fs.nodes.session import project_key
from sessionfs.fs.nodes.transcripts import transcript_key, transcripts_key
from sessionfs.fs.ops import Invalidator, SessionFsOperations
from sessionfs.fs.session_watch import SessionWatch
from sessionfs.view.session_keys import mount_parts


class Recorder:
    def __init__(self) -> None:
        self.keys: list[tuple[tuple[str, ...], bool]] = []
        self.subtrees: list[tuple[str, ...]] = []
        #: prefix -> which names below it keep their names (None: none)
        self.keep: dict[tuple[str, ...], Callable[[str], bool] | None] = {}

    def key_changed(self, key: tuple[str, ...], name_too: bool) -> None:
        self.keys.append((key, name_too))

    def subtree_changed(
        self, prefix: tuple[str, ...], keep_name: Callable[[str], bool] | None = None
    ) -> None:
        self.subtrees.append(prefix)
        self.keep[prefix] = keep_name


async def _settle() -> None:
    await trio.sleep(0.2)  # the events are queued by the time the write returns


def sessions_root(tmp_path: Path, *stems: str) -> Path:
    """A sessions root whose project ``p`` holds a one-line file per stem."""
    root = tmp_path / "sessions"
    (root / "p").mkdir(parents=True)
    for stem in stems:
        (root / "p" / f"{stem}.jsonl").write_bytes(b"{}\n")
    return root


def started_watch(root: Path) -> tuple[SessionWatch, Recorder]:
    """A watch of ``root`` started (not run yet), and what it reports to."""
    sink = Recorder()
    watch = SessionWatch(root, sink)
    assert watch.start()
    return watch, sink


def _both(project: str, stem: str, name_too: bool) -> dict[tuple[str, ...], bool]:
    """A session file's change as reported: its transcript, its session dir and the
    session dir's transcript.md (whose name stays while the dir does)."""
    return {
        transcript_key(project, stem): name_too,
        mount_parts(project, stem): name_too,
        (*mount_parts(project, stem), "transcript.md"): False,
    }


def test_changes_to_session_files_are_reported_as_transcript_and_session_dir_keys(
    tmp_path: Path,
) -> None:
    root = sessions_root(tmp_path, "s")
    watch, sink = started_watch(root)
    assert watch.covers("p") and not watch.covers("q")

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            with open(root / "p" / "s.jsonl", "ab") as f:
                f.write(b"{}\n")
            await _settle()
            assert sink.keys == list(_both("p", "s", False).items())
            sink.keys.clear()
            os.chmod(root / "p" / "s.jsonl", 0o600)
            (root / "p" / "s.jsonl").rename(root / "p" / "t.jsonl")
            (root / "p" / "notes.txt").write_text("not a session")
            await _settle()
            # the session dir of a file that is there keeps its name (its inode is
            # its path's); the one whose file is gone loses it
            renamed = _both("p", "s", True) | _both("p", "t", True)
            renamed[mount_parts("p", "t")] = False
            assert dict(sink.keys) == renamed
            sink.keys.clear()
            await trio.sleep(1.2)  # each change is dropped once more a moment later
            assert dict(sink.keys) == renamed
            (root / "q").mkdir()
            await _settle()
            assert watch.covers("q")
            (root / "q" / "u.jsonl").write_bytes(b"{}\n")
            (root / "p" / "t.jsonl").unlink()
            (root / "p" / "notes.txt").unlink()
            (root / "p").rmdir()
            await _settle()
            assert (transcript_key("q", "u"), True) in sink.keys
            assert (mount_parts("q", "u"), False) in sink.keys
            assert (mount_parts("p", "t"), True) in sink.keys
            assert transcripts_key("p") in sink.subtrees
            assert project_key("p") in sink.subtrees
            assert not watch.covers("p") and watch.covers("q")
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_while_the_mount_takes_writes_a_burst_of_changes_is_read_less_often(
    tmp_path: Path,
) -> None:
    """A script filling ``append/`` changes the session file twice per entry: while the
    mount takes writes (`Foreground.writing`) the events gather `GATHER_WHILE_WRITING`
    instead of `GATHER_SECONDS` (each wake-up of the watch costs the daemon's CPU), and
    every change still reaches the sink."""
    root = sessions_root(tmp_path, "s")
    foreground = Foreground()
    sink = Recorder()
    watch = SessionWatch(root, sink, foreground)
    assert watch.start()
    assert watch._gather_seconds() == session_watch.GATHER_SECONDS
    session_dir = mount_parts("p", "s")
    appends = 40

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            started = trio.current_time()
            for _ in range(appends):  # as the mount's writes would, 10 ms apart
                foreground.wrote()
                assert watch._gather_seconds() == session_watch.GATHER_WHILE_WRITING
                with open(root / "p" / "s.jsonl", "ab") as f:
                    f.write(b"{}\n")
                await trio.sleep(0.01)
            took = trio.current_time() - started
            await trio.sleep(session_watch.GATHER_WHILE_WRITING + 0.2)
            reads = [key for key, _ in sink.keys].count(session_dir)
            # one read at the first change, then one per gathering at most (a loaded
            # machine only makes the writes slower: fewer reads per second, not more)
            assert 1 <= reads <= 2 + took / session_watch.GATHER_WHILE_WRITING
            assert reads < appends / 4
            assert watch._gather_seconds() == session_watch.GATHER_SECONDS  # writes over
            sink.keys.clear()
            with open(root / "p" / "s.jsonl", "ab") as f:  # another process's change
                f.write(b"{}\n")
            await _settle()
            assert sink.keys == list(_both("p", "s", False).items())
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_no_sessions_root_means_no_watch(tmp_path: Path) -> None:
    watch = SessionWatch(tmp_path / "missing", Recorder())
    assert not watch.start()
    assert not watch.covers("p")


def test_the_newest_sessions_follow_appends_touches_and_removals(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    for project, stem, mtime in (("a", "old", 1), ("a", "mid", 2), ("b", "new", 3)):
        (root / project).mkdir(parents=True, exist_ok=True)
        (root / project / f"{stem}.jsonl").write_bytes(b"{}\n")
        os.utime(root / project / f"{stem}.jsonl", ns=(mtime * 10**9, mtime * 10**9))
    watch, _ = started_watch(root)
    assert watch.newest_sessions() == [("b", "new"), ("a", "mid"), ("a", "old")]

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            with open(root / "a" / "old.jsonl", "ab") as f:  # now the newest
                f.write(b"{}\n")
            os.utime(root / "b" / "new.jsonl", ns=(0, 0))  # touched back to 1970
            await _settle()
            assert watch.newest_sessions() == [("a", "old"), ("a", "mid"), ("b", "new")]
            (root / "a" / "mid.jsonl").unlink()
            (root / "c").mkdir()
            (root / "c" / "made.jsonl").write_bytes(b"{}\n")
            await _settle()
            assert watch.newest_sessions() == [("c", "made"), ("a", "old"), ("b", "new")]
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_a_stat_is_vouched_for_until_the_watch_reads_a_change_of_its_file(
    tmp_path: Path,
) -> None:
    root = sessions_root(tmp_path, "s", "other")
    before_watch = time.monotonic()
    watch, _ = started_watch(root)

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            taken = time.monotonic()
            # a stat taken before the watch started may miss a change: never vouched for
            assert not watch.unchanged_since("p", "s", before_watch)
            assert watch.unchanged_since("p", "s", taken)
            assert not watch.unchanged_since("q", "s", taken)  # not watched
            with open(root / "p" / "s.jsonl", "ab") as f:
                f.write(b"{}\n")
            await _settle()
            assert not watch.unchanged_since("p", "s", taken)
            assert watch.unchanged_since("p", "other", taken)  # only the changed file
            assert watch.unchanged_since("p", "s", time.monotonic())  # a new stat is
            os.chmod(root / "p" / "other.jsonl", 0o600)
            await _settle()
            assert not watch.unchanged_since("p", "other", taken)
            taken = time.monotonic()
            (root / "p").rename(root / "moved")
            await _settle()
            assert not watch.unchanged_since("p", "s", taken)  # no longer watched
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_after_lost_events_session_dirs_whose_file_is_there_keep_their_names(
    tmp_path: Path,
) -> None:
    # Events overflowed: everything below the project may have changed unseen and is
    # dropped, but the name of a session dir whose file is still there stays (a shell
    # whose cwd it is would otherwise fail getcwd); a removed project keeps no name.
    root = sessions_root(tmp_path, "s")
    watch, sink = started_watch(root)
    watch._handle(Event(-1, IN_Q_OVERFLOW, ""))
    assert sink.subtrees == [transcripts_key("p"), project_key("p")]
    for prefix in sink.subtrees:
        keep = sink.keep[prefix]
        assert keep is not None and keep("s")
        assert not keep("gone") and not keep("s.md") and not keep("..")
    sink.subtrees.clear()
    (root / "p" / "s.jsonl").unlink()
    (root / "p").rmdir()

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            await _settle()
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    assert project_key("p") in sink.subtrees and sink.keep[project_key("p")] is None


class RecordingInvalidator:
    closing = False

    def __init__(self) -> None:
        self.inodes: list[int] = []
        self.names: list[tuple[int, bytes]] = []

    def invalidate(self, inode: int, attr_only: bool) -> None:
        self.inodes.append(inode)

    def invalidate_name(self, parent_inode: int, name: bytes) -> None:
        self.names.append((parent_inode, name))


def test_a_subtree_dropped_keeps_the_names_it_is_told_to() -> None:
    ops = SessionFsOperations(DirNode(cast(MountContext, None), ()), read_only=True)
    invalidator = RecordingInvalidator()
    ops.invalidator = cast(Invalidator, invalidator)
    keys = {
        ("sessions", "p"): 10,
        ("sessions", "p", "s"): 11,
        ("sessions", "p", "s", "entries"): 12,
        ("sessions", "p", "gone"): 13,
        ("sessions", "q", "s"): 14,
    }
    ops.table.by_key.update(keys)
    ops.subtree_changed(("sessions", "p"), keep_name=lambda name: name == "s")
    assert sorted(invalidator.inodes) == [11, 12, 13]  # everything below goes stale
    # names: the session dir kept, its children and the gone session's dropped
    assert sorted(invalidator.names) == [(10, b"gone"), (11, b"entries")]


def test_what_the_watch_remembers_of_changes_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sessions made and removed for as long as the daemon lives: past CHANGES_KEPT
    # files, what was remembered goes, and so does the word for stats taken before.
    monkeypatch.setattr(session_watch, "CHANGES_KEPT", 4)
    root = sessions_root(tmp_path, "kept")
    watch, _ = started_watch(root)

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            taken = time.monotonic()
            assert watch.unchanged_since("p", "kept", taken)
            for n in range(3):  # made and removed: remembered, within the bound
                (root / "p" / f"s{n}.jsonl").write_bytes(b"{}\n")
                (root / "p" / f"s{n}.jsonl").unlink()
                await _settle()
            assert watch.unchanged_since("p", "kept", taken)
            assert not watch.unchanged_since("p", "s0", taken)
            for n in range(3, 6):
                (root / "p" / f"s{n}.jsonl").write_bytes(b"{}\n")
                await _settle()
            assert len(watch._changed_at) <= 4
            # a stat from before the forgetting is no longer vouched for, a new one is
            assert not watch.unchanged_since("p", "kept", taken)
            assert not watch.unchanged_since("p", "s0", taken)
            assert watch.unchanged_since("p", "kept", time.monotonic())
            nursery.cancel_scope.cancel()

    trio.run(scenario)


def test_projects_never_looked_at_are_scanned_off_the_event_loop(tmp_path: Path) -> None:
    # The first `recent/` lookup stats every session file of every project (0.2 s at
    # 10,000 sessions): in a worker thread, while the event loop serves on.
    root = tmp_path / "sessions"
    (root / "--p--").mkdir(parents=True)
    (root / "--p--" / "a.jsonl").write_text('{"type":"session"}\n')
    watch = SessionWatch(root, Recorder())
    watch.mtimes.add_project("--p--")
    scan = watch.mtimes.scan
    # The scan cannot end before the event loop has gone round ten times: run on the
    # loop it would wait in vain and fail. (Counting the loop's turns during a fixed
    # sleep instead failed whenever a loaded machine left this process unscheduled.)
    loop_turned = threading.Event()

    def scan_waiting_for_the_loop(projects: list[str]) -> object:
        assert loop_turned.wait(timeout=10), "the event loop did not run during the scan"
        return scan(projects)

    watch.mtimes.scan = scan_waiting_for_the_loop  # type: ignore[method-assign,assignment]

    async def main() -> None:
        async def turn_the_loop() -> None:
            for _ in range(10):
                await trio.sleep(0.01)
            loop_turned.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn_the_loop)
            await watch.scan_new_projects()

    trio.run(main)
    assert watch.mtimes.unscanned() == []
    assert watch.mtimes.newest_first() == [("--p--", "a")]
