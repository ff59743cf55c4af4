"""contrib/systemd: the archive timer and its service render, are valid units
(``systemd-analyze verify`` where it is installed, else parsed), and the service's
ExecStart really archives."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

from archive_helpers import default_archive, mirror_of, tree_bytes, user_env
from support.systemd_units import install_units


def _render(tmp_path: Path, archive_args: str) -> Path:
    return install_units(tmp_path, SESSIONFS_ARCHIVE_ARGS=archive_args)


def _parsed(unit: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit.read_text())
    return parser


def test_the_archive_timer_and_service_are_valid_units(tmp_path: Path) -> None:
    units = _render(tmp_path, "--machine box")
    service, timer = units / "sessionfs-archive.service", units / "sessionfs-archive.timer"
    if shutil.which("systemd-analyze"):
        checked = subprocess.run(
            ["systemd-analyze", "verify", str(service), str(timer)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert checked.returncode == 0, checked.stderr
    parsed_service, parsed_timer = _parsed(service), _parsed(timer)
    assert parsed_service["Service"]["Type"] == "oneshot"
    command = shlex.split(parsed_service["Service"]["ExecStart"])
    assert command[1:] == ["sync", "--once", "--machine", "box"]
    assert not any("@" in part for part in command)  # every placeholder filled in
    assert parsed_timer["Timer"]["Unit"] == service.name
    assert parsed_timer["Timer"]["Persistent"] == "true"
    assert parsed_timer["Install"]["WantedBy"] == "timers.target"


def test_the_archive_service_exec_start_archives(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = home / "agent" / "sessions" / "--p--" / "2026-01-01T00-00-00-000Z_a.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(b'{"type":"session","id":"a"}\n')
    units = _render(tmp_path, "--machine box")
    line = _parsed(units / "sessionfs-archive.service")["Service"]["ExecStart"]
    done = subprocess.run(shlex.split(line), env=user_env(home), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    mirrored = tree_bytes(mirror_of(default_archive(home), tmp_path / "c").machine_dir("box"))
    assert mirrored == {
        f"sessions/{session.relative_to(home / 'agent' / 'sessions')}": session.read_bytes()
    }
