"""Issue 17, point 2: everything the daemon creates is private on disk (``0600`` files,
``0700`` dirs) whatever the umask: the cache dir and all in it (renders, the search
index and its ``-wal``/``-shm``), the log file and its dirs, and the session files and
dirs that writes through the mount make (fork, extract, ``new``, a rewrite)."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mount import run, sessionfs
from support.waiting import search_ready
from support.write_setup import make_agent, read_ctl

pytestmark = pytest.mark.fuse

READY_TIMEOUT = 60


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, which makes new files 0644 and dirs 0755 unless told otherwise;
    the daemon started from this process inherits it."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def shared_bits(root: Path, since: dict[str, int] | None = None) -> dict[str, str]:
    """Every path below ``root`` (``root`` too) whose mode has group or other bits, as
    ``path -> octal mode``; with ``since``, only paths new or changed since then."""
    found = {}
    for path in [root, *root.rglob("*")]:
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue  # a temp file or -journal gone meanwhile
        if stat.S_ISLNK(st.st_mode):
            continue
        key = str(path)
        if since is not None and since.get(key) == st.st_ino:
            continue
        if st.st_mode & 0o077:
            found[key] = oct(stat.S_IMODE(st.st_mode))
    return found


def inodes(root: Path) -> dict[str, int]:
    return {str(p): p.lstat().st_ino for p in [root, *root.rglob("*")]}


def test_what_the_daemon_creates_is_private_under_umask_022(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: None
) -> None:
    agent, session = make_agent(tmp_path)
    session.chmod(0o600)  # a private session: its rewrites and forks stay private
    before = inodes(agent)
    # The default cache and log dirs, not there yet: the daemon makes every dir on the way.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    result = sessionfs("mount", mountpoint, "--agent-dir", agent)  # detaches; logs to a file
    assert result.returncode == 0, result.stderr
    try:
        s = mountpoint / "sessions" / session.parent.name / session.stem
        run("grep", "-rl", "question", mountpoint / "transcripts")  # renders in the cache dir
        search_ready(mountpoint, within=READY_TIMEOUT)
        assert "question" in run("cat", mountpoint / "search" / "question")
        run("sh", "-c", f"echo 'private title' > '{s}/title'")  # a rewrite of the file
        run("sh", "-c", f"echo 'more' > '{s}/append/m.txt'")
        run("sh", "-c", f"echo fork > '{s}/ctl'")
        leaf = os.path.basename(os.readlink(s / "leaf")).removesuffix(".json")
        run("sh", "-c", f"echo 'extract {leaf}' > '{s}/ctl'")
        assert read_ctl(s)["last_error"] == "", read_ctl(s)
        run("sh", "-c", f"echo 'new /work/elsewhere fresh' > '{mountpoint}/ctl'")
        assert read_ctl(mountpoint)["last_error"] == ""
        made = [p for p in agent.rglob("*.jsonl") if str(p) not in before]
        assert len(made) == 3  # the fork, the extract, the new session
        assert (tmp_path / "xdg-cache" / "sessionfs").is_dir()
        assert list((tmp_path / "xdg-cache").rglob("search.db-wal"))
        assert list((tmp_path / "xdg-state").rglob("sessionfs.log"))
        assert list((tmp_path / "xdg-cache").rglob("renders/*"))
        found = {
            **shared_bits(tmp_path / "xdg-cache"),
            **shared_bits(tmp_path / "xdg-state"),
            **shared_bits(agent, since=before),
        }
        assert stat.S_IMODE(session.stat().st_mode) == 0o600  # rewritten, still private
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], timeout=60, check=False)
    assert found == {}
