"""contrib/systemd: the sync user unit renders, verifies, and its ExecStart really syncs."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from store_helpers import S3Server, make_agent_dir, mirrored_files, shipped_files
from support.systemd_units import install_units


def _render(tmp_path: Path, store: str, sync_args: str) -> Path:
    units = install_units(tmp_path, SESSIONFS_STORE=store, SESSIONFS_SYNC_ARGS=sync_args)
    return units / "sessionfs-sync.service"


def _exec_start(unit: Path) -> list[str]:
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.split("=", 1)[1])


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_sync_unit_verifies(tmp_path: Path) -> None:
    unit = _render(tmp_path, "s3://team-sessions/agents", "--endpoint-url http://127.0.0.1:1")
    result = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "@" not in " ".join(_exec_start(unit))


def test_sync_unit_exec_start_ships_the_agent_dir(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = make_agent_dir(
        tmp_path, fixture="pi-v1-before-compaction.jsonl", project="--p--", shared_blob=b"b"
    )
    args = (
        f"--endpoint-url {s3_server.endpoint} --machine desk --agent-dir {agent} "
        f"--state-dir {tmp_path / 'state'} --no-agents"
    )
    unit = _render(tmp_path, s3_server.store_url(store_prefix), args)
    done = subprocess.run(
        [*_exec_start(unit), "--once"], env=s3_server.env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    assert mirrored_files(mirror, "desk") == shipped_files(agent)
