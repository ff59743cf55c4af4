"""Acceptance: the command line — errors, background start, unmount, signals, writes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mount import (
    COMMAND_TIMEOUT,
    REPO,
    Mount,
    MountFactory,
    background_mount,
    sessionfs,
    start_mount,
)

pytestmark = pytest.mark.fuse


def one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessionfs: "), result.stderr
    for word in words:
        assert word in lines[0]


def test_clear_errors_exit_2(tmp_path: Path, demo_agent: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(sessionfs("mount", empty, "--agent-dir", tmp_path / "nope"), "agent dir")
    one_line_error(sessionfs("mount", tmp_path / "missing", "--agent-dir", demo_agent), "mkdir")
    one_line_error(sessionfs("mount", demo_agent, "--agent-dir", demo_agent), "not empty")
    one_line_error(sessionfs("umount", empty), "not mounted")
    mount = start_mount(demo_agent, tmp_path / "mnt")
    try:
        one_line_error(sessionfs("mount", mount.path, "--agent-dir", demo_agent), "busy")
    finally:
        mount.unmount()


def daemons_for(mountpoint: Path) -> list[int]:
    """Processes whose command line mounts ``mountpoint`` (read from /proc)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sessionfs" in cmdline and os.fsencode(mountpoint) in cmdline:
            found.append(int(pid))
    return found


def test_background_mount_returns_when_ready_and_umount_leaves_nothing(
    tmp_path: Path, demo_agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with background_mount(demo_agent, tmp_path, monkeypatch) as (mnt, result):
        assert result.returncode == 0, result.stderr
        assert os.path.ismount(mnt)
        assert "sessions" in os.listdir(mnt)  # ready: no waiting needed
        assert daemons_for(mnt)
        assert list((tmp_path / "state").rglob("*.log"))
        assert sessionfs("umount", mnt).returncode == 0
        deadline = time.monotonic() + 10
        while daemons_for(mnt) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not daemons_for(mnt)
        assert not os.path.ismount(mnt)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_unmounts_cleanly(tmp_path: Path, demo_agent: Path, signum: int) -> None:
    mount = start_mount(demo_agent, tmp_path / "mnt")
    try:
        os.listdir(mount.path / "sessions")
        mount.process.send_signal(signum)
        assert mount.process.wait(timeout=COMMAND_TIMEOUT) == 0
        assert not os.path.ismount(mount.path)
    finally:
        mount.unmount()


def test_python_dash_m_and_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sessionfs", "mount", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0
    for flag in (
        "--agent-dir",
        "--foreground",
        "--read-only",
        "--cache-mb",
        "--debug",
        "--allow-other",
    ):
        assert flag in result.stdout


def write_errors(mount: Mount) -> dict[str, int]:
    """errno of each data-changing attempt (0 = it worked, which it must not)."""
    d = mount.path / "recent" / "1"
    attempts = {
        "write entry": lambda: open(next((d / "entries").iterdir()), "w").close(),
        "create in entries": lambda: open(d / "entries" / "new.json", "w").close(),
        "mkdir": lambda: os.mkdir(mount.path / "sessions" / "newproject"),
        "rm session": lambda: os.rmdir(d.resolve()),
        "chmod": lambda: os.chmod(d / "header.json", 0o777),
        "truncate": lambda: os.truncate(d / "context.json", 0),
        "hard link": lambda: os.link(d / "header.json", d / "h2"),
        "unlink blob": lambda: os.unlink(next((mount.path / "blobs").iterdir())),
    }
    codes = {}
    for what, attempt in attempts.items():
        try:
            attempt()
            codes[what] = 0
        except OSError as exc:
            codes[what] = exc.errno or -1
    return codes


def test_writes_are_refused_and_the_data_stays(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    before = {p: p.read_bytes() for p in demo_agent.rglob("*.jsonl")}
    mount = mount_factory(demo_agent)
    codes = write_errors(mount)
    assert all(code in (errno.EPERM, errno.EACCES) for code in codes.values()), codes
    assert mount.alive()
    assert {p: p.read_bytes() for p in demo_agent.rglob("*.jsonl")} == before


def test_read_only_mount_answers_erofs(demo_agent: Path, mount_factory: MountFactory) -> None:
    mount = mount_factory(demo_agent, "--read-only")
    codes = write_errors(mount)
    assert all(code == errno.EROFS for code in codes.values()), codes
    assert (mount.path / "recent" / "1" / "context.json").read_bytes()
    assert os.stat(mount.path / "recent" / "1" / "title").st_mode & 0o222 == 0


def test_a_killed_daemon_leaves_a_stale_mount_that_is_named_and_cleared(
    tmp_path: Path, demo_agent: Path
) -> None:
    """SIGKILL the daemon: the next `mount` says "stale mount" (one line, exit 2) instead
    of a traceback, `umount` clears it, and mounting again works."""
    mount = start_mount(demo_agent, tmp_path / "mnt")
    try:
        mount.process.kill()
        mount.process.wait(timeout=COMMAND_TIMEOUT)
        with pytest.raises(OSError) as stale:
            os.listdir(mount.path)
        assert stale.value.errno == errno.ENOTCONN
        one_line_error(sessionfs("mount", mount.path, "--agent-dir", demo_agent), "stale mount")
        result = sessionfs("umount", mount.path)
        assert result.returncode == 0, result.stderr
        assert os.listdir(mount.path) == []
        again = start_mount(demo_agent, mount.path)
        try:
            assert "sessions" in os.listdir(again.path)
        finally:
            again.unmount()
    finally:
        mount.unmount()
