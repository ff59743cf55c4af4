"""`SessionMtimes`: the order of ``recent/`` from the watch's events. A change is only
noted when its event comes (an append through the mount raises events of its own) and
looked at when the order is next asked for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessionfs.fs.session_mtimes import SessionMtimes


def session_file(root: Path, project: str, stem: str, mtime_s: int) -> Path:
    path = root / project / f"{stem}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"type":"session"}\n')
    os.utime(path, (mtime_s, mtime_s))
    return path


def test_changes_are_looked_at_when_the_order_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = session_file(tmp_path, "--p--", "a", 1_000)
    b = session_file(tmp_path, "--p--", "b", 2_000)
    mtimes = SessionMtimes(tmp_path)
    mtimes.add_project("--p--")
    assert mtimes.newest_first() == [("--p--", "b"), ("--p--", "a")]

    os.utime(a, (3_000, 3_000))
    looked: list[str] = []
    real_lstat = os.lstat

    def counting_lstat(path: str, *args: object, **kw: object) -> os.stat_result:
        looked.append(os.fspath(path))
        return real_lstat(path)

    monkeypatch.setattr(os, "lstat", counting_lstat)
    for _ in range(3):  # a burst of events for one file
        mtimes.file_changed("--p--", "a")
    assert looked == []  # nothing on the event's path
    assert mtimes.newest_first() == [("--p--", "a"), ("--p--", "b")]
    assert looked == [str(a)]  # one look for the burst

    b.unlink()
    mtimes.file_changed("--p--", "b")
    assert mtimes.newest_first() == [("--p--", "a")]


def test_a_symlinked_session_follows_its_target_and_a_removed_project_is_dropped(
    tmp_path: Path,
) -> None:
    target = session_file(tmp_path / "elsewhere", "--x--", "t", 1_000)
    session_file(tmp_path, "--p--", "a", 2_000)
    (tmp_path / "--p--" / "l.jsonl").symlink_to(target)
    mtimes = SessionMtimes(tmp_path)
    mtimes.add_project("--p--")
    mtimes.file_changed("--p--", "l")
    assert mtimes.newest_first() == [("--p--", "a"), ("--p--", "l")]
    os.utime(target, (3_000, 3_000))  # no event: the link is looked at every time
    assert mtimes.newest_first() == [("--p--", "l"), ("--p--", "a")]

    mtimes.file_changed("--p--", "a")
    mtimes.remove_project("--p--")
    assert mtimes.newest_first() == []


def test_a_scan_made_in_a_thread_keeps_only_what_is_still_wanted(tmp_path: Path) -> None:
    # `SessionWatch.scan_new_projects` scans in a worker thread while the event loop
    # goes on: a project removed meanwhile stays gone, a file changed meanwhile is
    # looked at again.
    a = session_file(tmp_path, "--p--", "a", 1_000)
    session_file(tmp_path, "--p--", "b", 2_000)
    session_file(tmp_path, "--q--", "c", 5_000)
    mtimes = SessionMtimes(tmp_path)
    mtimes.add_project("--p--")
    mtimes.add_project("--q--")
    scanned = mtimes.scan(sorted(mtimes.unscanned()))  # what the thread does
    os.utime(a, (3_000, 3_000))  # meanwhile, on the event loop: events
    mtimes.file_changed("--p--", "a")
    mtimes.remove_project("--q--")
    mtimes.take_scan(scanned)
    assert mtimes.unscanned() == []
    assert mtimes.newest_first() == [("--p--", "a"), ("--p--", "b")]
