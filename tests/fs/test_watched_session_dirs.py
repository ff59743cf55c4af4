"""Acceptance: ``sessions/<project>/<stem>/`` is cached by the kernel for long (a warm
``ls -l`` of a project asks the daemon nothing per session), yet a change another
process makes to the session file (append, chmod, rename, delete) shows at once,
because the daemon watches the project dirs with inotify (`sessionfs.fs.session_watch`).
A sub-agent's session dir and one whose file is a symlink raise no event there: they
keep the short timeouts."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mount import Mount, MountFactory, run
from support.watched import (
    APPEND,
    PAST_SHORT_TIMEOUTS,
    asked_about,
    requests_during,
    stat_or_none,
    within,
)

from sessionfs.fs.session_watch import REPEAT_AFTER

pytestmark = pytest.mark.fuse


def a_session(mount: Mount) -> tuple[Path, Path]:
    """The mount's ``sessions/<project>/<stem>/`` of a demo session in the project of
    the most sessions, and its file."""
    projects = (mount.agent_dir / "sessions").iterdir()
    file = min(max((sorted(p.glob("*.jsonl")) for p in projects), key=len))
    return mount.path / "sessions" / file.parent.name / file.stem, file


def settled(agent: Path) -> Path:
    """``agent`` with its project dirs last changed a minute ago, as a user's are: their
    listings are reused (`AgentIndex.listing_of`), so without the watch a warm
    ``ls -l`` would see listing stats too old to be cached and ask again for each.
    Its session files are made readable by all (a chmod to 0600 then shows)."""
    minute_ago = time.time_ns() - 60 * 10**9
    for project in (agent / "sessions").iterdir():
        for file in project.glob("*.jsonl"):
            file.chmod(0o644)
        os.utime(project, ns=(minute_ago, minute_ago))
    return agent


def kept_stat(mount: Mount, path: Path) -> os.stat_result:
    """``stat`` of ``path``, which the kernel must answer from what it keeps (past the
    short timeouts): no getattr or lookup of it reaches the daemon."""
    time.sleep(PAST_SHORT_TIMEOUTS)
    seen: list[os.stat_result] = []
    requests = requests_during(mount, lambda: seen.append(os.stat(path)))
    asked = asked_about(requests, seen[0].st_ino, path.name)
    assert asked == [], f"the kernel asked about {path.name} again: {asked}"
    return seen[0]


def past_the_repeat(path: Path) -> None:
    """Wait out the watch's second drop of a change (`REPEAT_AFTER`), then ``stat``
    ``path`` once: that one asks the daemon, and what it gets the kernel keeps."""
    time.sleep(REPEAT_AFTER + 0.2)
    os.stat(path)


def listed_long(project: Path) -> dict[str, str]:
    """``ls -l`` of a project dir: each session's line by its name."""
    lines = run("ls", "-l", "--time-style=+%s.%N", project).splitlines()[1:]  # not "total"
    return {line.split()[-1]: line for line in lines}


@pytest.fixture
def watched_mount(demo_agent: Path, mount_factory: MountFactory) -> Mount:
    return mount_factory(settled(demo_agent), "--debug")


def test_a_warm_ls_l_of_a_project_asks_the_daemon_nothing_per_session(
    watched_mount: Mount,
) -> None:
    session, _file = a_session(watched_mount)
    project = session.parent
    first = listed_long(project)
    assert len(first) >= 2 and session.name in first
    inodes = {name: os.lstat(project / name).st_ino for name in first}
    time.sleep(PAST_SHORT_TIMEOUTS)
    again: dict[str, str] = {}
    requests = requests_during(watched_mount, lambda: again.update(listed_long(project)))
    assert again == first
    asked = {name: asked_about(requests, inode, name) for name, inode in inodes.items()}
    assert not any(asked.values()), f"the kernel asked again: {asked}"
    assert "DEBUG readdir(" in requests  # the log does show requests


def test_an_append_by_another_process_shows_in_the_session_dirs_mtime_at_once(
    watched_mount: Mount,
) -> None:
    session, file = a_session(watched_mount)
    listed_long(session.parent)
    before = kept_stat(watched_mount, session).st_mtime_ns
    assert before == os.stat(file).st_mtime_ns
    subprocess.run([sys.executable, "-c", APPEND, file, "zugzwang"], check=True, timeout=30)
    after = os.stat(file).st_mtime_ns
    assert after != before
    within(lambda: os.stat(session).st_mtime_ns == after, "the session dir's new mtime")
    shown = listed_long(session.parent)[session.name].split()[5]
    assert shown == f"{after // 10**9}.{after % 10**9:09d}"
    past_the_repeat(session)
    assert kept_stat(watched_mount, session).st_mtime_ns == after


def test_a_chmod_of_the_session_file_shows_in_the_session_dirs_mode_at_once(
    watched_mount: Mount,
) -> None:
    session, file = a_session(watched_mount)
    os.stat(session)  # looked up by name (no listing): the lookup's node is watched too
    assert stat.S_IMODE(kept_stat(watched_mount, session).st_mode) == 0o755
    file.chmod(0o600)
    within(lambda: stat.S_IMODE(os.stat(session).st_mode) == 0o700, "group/other bits gone")
    past_the_repeat(session)
    listed_long(session.parent)
    assert stat.S_IMODE(kept_stat(watched_mount, session).st_mode) == 0o700
    file.chmod(0o640)
    within(lambda: stat.S_IMODE(os.stat(session).st_mode) == 0o750, "the group's bits back")
    assert listed_long(session.parent)[session.name].startswith("drwxr-x---")


def test_a_renamed_or_removed_session_file_moves_its_dir_at_once(watched_mount: Mount) -> None:
    session, file = a_session(watched_mount)
    listed_long(session.parent)
    kept_stat(watched_mount, session)
    moved = file.with_name("renamed-session.jsonl")
    file.rename(moved)
    renamed = session.with_name("renamed-session")
    within(lambda: stat_or_none(session) is None, "the old name gone")
    names = listed_long(session.parent)
    assert renamed.name in names and session.name not in names
    past_the_repeat(renamed)
    kept_stat(watched_mount, renamed)
    moved.unlink()
    within(lambda: stat_or_none(renamed) is None, "the removed session's dir gone")
    assert renamed.name not in run("ls", session.parent).split()


def test_a_file_replaced_by_a_rename_leaves_a_shell_inside_its_dir_where_it_is(
    watched_mount: Mount,
) -> None:
    session, file = a_session(watched_mount)
    listed_long(session.parent)
    shell = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; sys.stdin.readline(); print(os.getcwd())"],
        cwd=session,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        replacement = file.with_name(".replacement")
        replacement.write_bytes(file.read_bytes())
        os.utime(replacement, ns=(0, 0))
        replacement.rename(file)
        within(lambda: os.stat(session).st_mtime_ns == 0, "the replaced file's mtime")
        time.sleep(REPEAT_AFTER + 0.2)  # and the watch's second drop
        out, _ = shell.communicate("\n", timeout=30)
    finally:
        shell.kill()
        shell.wait(timeout=30)
    assert shell.returncode == 0 and out.strip() == str(session)


def test_a_leaf_moved_through_the_mount_changes_none_of_the_session_dirs_attributes(
    watched_mount: Mount,
) -> None:
    """A leaf move is held in memory, the file unwritten: the dir's mtime and mode
    (the file's) stay, so what the kernel keeps of it stays right with no drop."""
    session, file = a_session(watched_mount)
    listed_long(session.parent)
    before, on_disk = kept_stat(watched_mount, session), os.stat(file)
    leaf = os.readlink(session / "leaf")
    # Any entry but the leaf: entry ids are random, so the smallest name is the leaf
    # now and then (1 demo in 27), and a move to where it is already moves nothing.
    other = min(e for e in os.listdir(session / "entries") if f"entries/{e}" != leaf)
    run("ln", "-sfn", f"entries/{other}", "leaf", cwd=session)
    assert os.readlink(session / "leaf") == f"entries/{other}"
    assert os.stat(file).st_mtime_ns == on_disk.st_mtime_ns  # held in memory only
    listed_long(session.parent)
    after = kept_stat(watched_mount, session)
    assert (after.st_mtime_ns, after.st_mode) == (before.st_mtime_ns, before.st_mode)
    assert after.st_mtime_ns == on_disk.st_mtime_ns


def test_a_sub_agents_and_a_symlinked_sessions_dirs_keep_short_timeouts(
    demo_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    (sub_agent_file,) = (demo_agent / "sessions").glob("*/*/*.jsonl")  # the demo's one
    parent = sub_agent_file.parent.with_suffix(".jsonl")
    elsewhere = tmp_path / "elsewhere.jsonl"
    shutil.copy2(parent, elsewhere)
    elsewhere.chmod(0o644)
    (parent.parent / "linked.jsonl").symlink_to(elsewhere)
    mount = mount_factory(demo_agent, "--debug")
    project = mount.path / "sessions" / parent.parent.name
    watched, linked = project / parent.stem, project / "linked"
    sub_agent = watched / "subagents" / sub_agent_file.stem
    listed_long(project)
    listed_long(sub_agent.parent)
    inodes = {path: os.lstat(path).st_ino for path in (sub_agent, linked, watched)}
    time.sleep(PAST_SHORT_TIMEOUTS)
    requests = requests_during(mount, lambda: [os.lstat(path) for path in inodes])
    asked = {path.name: asked_about(requests, inode, path.name) for path, inode in inodes.items()}
    assert asked[watched.name] == [], f"the watched one was asked about: {asked}"
    assert asked[sub_agent.name] and asked[linked.name], f"kept for long: {asked}"
    # A change of the link's target raises no event: it shows within the short timeouts.
    assert stat.S_IMODE(os.stat(linked).st_mode) == 0o755
    elsewhere.chmod(0o600)
    time.sleep(PAST_SHORT_TIMEOUTS)
    assert stat.S_IMODE(os.stat(linked).st_mode) == 0o700
