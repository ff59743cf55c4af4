"""Acceptance: a project dir's listing is reused while the dir does not change, and
what it shows stays true (issue 19, big listings): new and deleted sessions show at
once, and a session's own attributes (mtime after an append, mode after a chmod) are
never served from the reused listing."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import orjson
import pytest
from support.agent_messages import user_entry, write_header_session
from support.mount import MountFactory, run

from sessionfs.view.loaded_session import FRESH_INTERVAL
from sessionfs.view.session_ids import RACY_NS

pytestmark = pytest.mark.fuse

PROJECT = "--work-p--"


def settle(directory: Path) -> None:
    old = time.time_ns() - 2 * RACY_NS
    os.utime(directory, ns=(old, old))


def test_a_reused_listing_shows_changes_at_once(tmp_path: Path, mount_factory: MountFactory):
    agent = tmp_path / "agent"
    project = agent / "sessions" / PROJECT
    files = [write_header_session(project, f"s{n}", f"id-{n}") for n in range(3)]
    settle(project)
    mount = mount_factory(agent)
    listed = mount.path / "sessions" / PROJECT
    assert run("ls", listed).split() == ["s0", "s1", "s2"]

    with files[1].open("ab") as fh:
        fh.write(orjson.dumps(user_entry("e1", None, "appended")) + b"\n")
    files[2].chmod(0o600)
    time.sleep(FRESH_INTERVAL * 2)
    assert run("ls", listed).split() == ["s0", "s1", "s2"]  # the dir did not change
    assert os.stat(listed / "s1").st_mtime_ns == files[1].stat().st_mtime_ns
    assert stat.S_IMODE(os.stat(listed / "s2").st_mode) & 0o077 == 0

    write_header_session(project, "s3", "id-3")
    files[0].unlink()
    assert run("ls", listed).split() == ["s1", "s2", "s3"]


def test_a_reused_transcripts_listing_shows_subagents_and_sessions_at_once(
    tmp_path: Path, mount_factory: MountFactory
):
    agent = tmp_path / "agent"
    project = agent / "sessions" / PROJECT
    for n in range(3):
        write_header_session(project, f"s{n}", f"id-{n}")
    (project / "s1").mkdir()  # an artifacts dir with no sub-agent session in it yet
    settle(project)
    mount = mount_factory(agent)
    listed = mount.path / "transcripts" / PROJECT
    assert run("ls", listed).split() == ["s0.md", "s1.md", "s2.md"]
    assert run("ls", listed).split() == ["s0.md", "s1.md", "s2.md"]  # the reused listing

    settled = project.stat().st_mtime_ns
    write_header_session(project / "s1", "0-Explore", "id-sub")
    assert project.stat().st_mtime_ns == settled  # only the artifacts dir changed
    assert run("ls", listed).split() == ["s0.md", "s1", "s1.md", "s2.md"]
    assert run("ls", listed / "s1").split() == ["0-Explore.md"]

    write_header_session(project, "s3", "id-3")
    (project / "s0.jsonl").unlink()
    assert run("ls", listed).split() == ["s1", "s1.md", "s2.md", "s3.md"]


def test_the_reused_projects_show_new_and_removed_projects_at_once(
    tmp_path: Path, mount_factory: MountFactory
):
    agent = tmp_path / "agent"
    root = agent / "sessions"
    for name in ("--a--", "--b--"):
        write_header_session(root / name, "s0", "id-0")
    settle(root)  # so the projects' listing is reused while the root is unchanged
    mount = mount_factory(agent)
    for tree in ("sessions", "transcripts"):
        assert run("ls", mount.path / tree).split() == ["--a--", "--b--"]
        assert run("ls", mount.path / tree).split() == ["--a--", "--b--"]  # reused

    write_header_session(root / "--c--", "s0", "id-0")
    for tree in ("sessions", "transcripts"):
        assert run("ls", mount.path / tree).split() == ["--a--", "--b--", "--c--"]
    settle(root)
    assert run("ls", mount.path / "transcripts").split() == ["--a--", "--b--", "--c--"]
    (root / "--a--" / "s0.jsonl").unlink()
    (root / "--a--").rmdir()
    for tree in ("sessions", "transcripts"):
        assert run("ls", mount.path / tree).split() == ["--b--", "--c--"]
    found = run("find", mount.path / "transcripts", "-name", "*.md").split()
    assert sorted(Path(f).parent.name for f in found) == ["--b--", "--c--"]


@pytest.mark.parametrize("tree", ["sessions", "transcripts"])
def test_the_projects_are_listed_when_read_not_when_opened(
    tmp_path: Path, mount_factory: MountFactory, tree: str
):
    """``sessions/`` and ``transcripts/`` take their listing at the first read of an
    open dir (``grep -r transcripts/`` opens it once without reading): a project made
    between the open and the read shows, and the listing holds still while read."""
    agent = tmp_path / "agent"
    write_header_session(agent / "sessions" / PROJECT, "s0", "id-0")
    mount = mount_factory(agent)
    fd = os.open(mount.path / tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_header_session(agent / "sessions" / "--work-q--", "s1", "id-1")
        with os.scandir(fd) as entries:
            assert sorted(e.name for e in entries) == [PROJECT, "--work-q--"]
        os.lseek(fd, 0, os.SEEK_SET)  # rewinddir: the snapshot taken at the first read
        write_header_session(agent / "sessions" / "--work-r--", "s2", "id-2")
        with os.scandir(fd) as entries:
            assert sorted(e.name for e in entries) == [PROJECT, "--work-q--"]
    finally:
        os.close(fd)
    assert run("ls", mount.path / tree).split() == [PROJECT, "--work-q--", "--work-r--"]
