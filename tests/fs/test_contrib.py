"""contrib/ exercised for real: the systemd unit, the shell helpers (bash, and zsh when
installed) and the example scripts, each against a real mount of the demo agent dir."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mount import guard_mount, is_mounted

from core import SessionManager, build_session_context

pytestmark = pytest.mark.fuse

REPO = Path(__file__).resolve().parents[2]
CONTRIB = REPO / "contrib"
HELPERS = CONTRIB / "shell" / "sessionfs.sh"
SHELLS = [
    pytest.param(name, marks=pytest.mark.skipif(not shutil.which(name), reason=f"no {name}"))
    for name in ("bash", "zsh")
]


def shell(name: str, script: str, mount: Path, cwd: Path | None = None) -> str:
    """Run ``script`` in ``name`` with the helpers sourced; fail loudly on error."""
    result = subprocess.run(
        [name, "-c", f". {HELPERS}\n{script}"],
        cwd=cwd or mount,
        env={**os.environ, "SESSIONFS_MOUNT": str(mount)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{name}: {script!r} -> {result.returncode}: {result.stderr}"
    return result.stdout


def session_dirs(mount: Path) -> list[Path]:
    return sorted(p for p in (mount / "sessions").glob("*/*") if p.is_dir())


def webapp_dir(mount: Path) -> Path:
    return next(p for p in session_dirs(mount) if "redirect" in (p / "title").read_text())


def file_of(session: Path) -> Path:
    ctl = dict(line.split(": ", 1) for line in (session / "ctl").read_text().splitlines())
    return Path(ctl["file"])


# --- systemd -------------------------------------------------------------------------


def render_unit(tmp_path: Path, mountpoint: Path) -> Path:
    unit_dir = tmp_path / "units"
    env = {
        **os.environ,
        "SESSIONFS_BIN": str(Path(sys.executable).parent / "sessionfs"),
        "UNIT_DIR": str(unit_dir),
    }
    subprocess.run(
        [CONTRIB / "systemd" / "install.sh", str(mountpoint)],
        env=env,
        check=True,
        capture_output=True,
        timeout=30,
    )
    return unit_dir / "sessionfs.service"


def unit_value(unit: Path, key: str) -> str:
    return next(
        line.split("=", 1)[1]
        for line in unit.read_text().splitlines()
        if line.startswith(key + "=")
    )


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_unit_verifies(tmp_path):
    unit = render_unit(tmp_path, tmp_path / "mnt")
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "@" not in unit_value(unit, "ExecStart")  # every placeholder filled in


def test_systemd_unit_commands_mount_and_unmount(tmp_path, demo_agent):
    """Run the unit's own ExecStartPre/ExecStart, then stop it the way systemd does
    (SIGTERM): the mount comes up at the configured place and is gone afterwards."""
    mountpoint = tmp_path / "agent-sessions"
    unit = render_unit(tmp_path, mountpoint)
    subprocess.run(unit_value(unit, "ExecStartPre").split(), check=True, timeout=30)
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(demo_agent)}
    daemon = subprocess.Popen(
        unit_value(unit, "ExecStart").split(), env=env, stderr=subprocess.PIPE
    )
    guard = guard_mount(mountpoint, daemon.pid)
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mountpoint):
            assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
            assert time.monotonic() < deadline, "the unit's ExecStart never mounted"
            time.sleep(0.05)
        assert len(session_dirs(mountpoint)) == 4
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=20)
        assert not os.path.ismount(mountpoint)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], timeout=30)
        guard.release()


# --- shell helpers -------------------------------------------------------------------


@pytest.mark.parametrize("sh", SHELLS)
def test_shell_newest_and_grep(sh, demo_mount):
    mount = demo_mount.path
    out = shell(sh, "sfs_newest && pwd", mount).splitlines()
    assert out[0] == "Fix the login redirect loop"
    assert Path(out[1]) == webapp_dir(mount).resolve()
    found = shell(sh, "sfs_grep 'redirect loop'", mount).split()
    expected = [
        str(p) for p in session_dirs(mount) if "redirect loop" in (p / "transcript.md").read_text()
    ]
    assert sorted(found) == sorted(expected) and found


@pytest.mark.parametrize("sh", SHELLS)
def test_shell_branch_note_label(sh, demo_mount):
    mount = demo_mount.path
    session = webapp_dir(mount)
    plan = os.readlink(session / "labels" / "plan").split("/")[-1].removesuffix(".json")
    assert shell(sh, f"sfs_branch {plan}", mount, cwd=session).strip() == f"entries/{plan}.json"
    leaf = shell(sh, "sfs_note 'ship it on Friday'", mount, cwd=session).strip()
    new_id = leaf.removeprefix("entries/").removesuffix(".json")
    shell(sh, "sfs_label shipped", mount, cwd=session)
    # The file on disk, read by core: the note is a user message child of the plan entry,
    # and the label points at it.
    manager = SessionManager.open(file_of(session), browse=True)
    note = manager.get_entry(new_id)
    assert note["parentId"] == plan
    assert note["message"]["role"] == "user"
    assert "ship it on Friday" in json.dumps(note["message"]["content"])
    assert manager.get_label(new_id) == "shipped"
    context = build_session_context(manager.get_entries(), new_id)
    assert context["messages"][-1] == note["message"]


@pytest.mark.parametrize("sh", SHELLS)
def test_shell_helpers_refuse_outside_a_session(sh, demo_mount, tmp_path):
    result = subprocess.run(
        [sh, "-c", f". {HELPERS}\nsfs_branch deadbeef"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2 and "not a session directory" in result.stderr


# --- example scripts -----------------------------------------------------------------


def run_example(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_replay_branch_walks_the_path(demo_mount):
    session = webapp_dir(demo_mount.path)
    result = run_example(CONTRIB / "examples" / "replay_branch.py", session)
    assert result.returncode == 0, result.stderr
    steps = sorted(os.listdir(session / "path"))
    headings = [line for line in result.stdout.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert len(headings) == len(steps)
    assert headings[-1].startswith(f"[{len(steps)}/{len(steps)}]")
    assert "Write a regression test for the redirect loop." in result.stdout


def test_export_branch_markdown(demo_mount, tmp_path):
    session = webapp_dir(demo_mount.path)
    out = tmp_path / "export.md"
    subprocess.run(
        [CONTRIB / "examples" / "export_branch_markdown.sh", session, out], check=True, timeout=60
    )
    text = out.read_text()
    assert text.startswith("# Fix the login redirect loop\n")
    assert text.endswith((session / "transcript.md").read_text())
    assert f"- leaf: `{os.readlink(session / 'leaf')}`" in text


def test_sessions_touching_file(demo_mount):
    script = CONTRIB / "examples" / "sessions_touching_file.py"
    result = run_example(script, "src/auth.ts", "--mount", demo_mount.path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [f"{webapp_dir(demo_mount.path)}\tread,edit"]
    missing = run_example(script, "no/such/file.py", "--mount", demo_mount.path)
    assert missing.returncode == 1 and missing.stdout == ""
