"""A team store keeps every agent's sessions too: a machine's Claude Code and Codex
sessions shipped with the real ``sessionfs sync`` show under
``machines/<m>/agents/<agent>/`` of ``mount --store``, rendered byte for byte as the
machine's own mount renders them, read-only."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from store_helpers import SYNC_TIMEOUT, S3Server, sync_command
from support.mount import MountFactory, fuse_available, run, start_mount
from support.other_agents import CLAUDE_PROJECT, fake_home, home_env

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.skipif(not fuse_available(), reason="FUSE is not available"),
]


def _transcripts(root: Path) -> dict[str, bytes]:
    found = run("find", root / "sessions", "-name", "transcript.md").splitlines()
    return {str(Path(line).relative_to(root)): Path(line).read_bytes() for line in sorted(found)}


def test_a_machines_claude_and_codex_sessions_show_in_the_store_mount(
    s3_server: S3Server, store_prefix: str, tmp_path: Path, mount_factory: MountFactory
) -> None:
    trees = fake_home(tmp_path)
    agent = trees.home / "agent"
    (agent / "sessions").mkdir(parents=True)
    command = sync_command(s3_server, store_prefix, agent, "desk", tmp_path / "state")
    command.remove("--no-agents")
    command += ["--claude-dir", str(trees.claude), "--codex-dir", str(trees.codex)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=SYNC_TIMEOUT, env=s3_server.env
    )
    assert done.returncode == 0, done.stderr
    local = mount_factory(agent, "--no-archive", name="local", env=home_env(trees.home))
    expected = {name: _transcripts(local.path / "agents" / name) for name in ("claude", "codex")}
    assert expected["claude"] and expected["codex"]
    store = start_mount(
        tmp_path / "unused-agent",
        tmp_path / "store",
        *("--store", s3_server.store_url(store_prefix), "--endpoint-url", s3_server.endpoint),
    )
    try:
        machine = store.path / "machines" / "desk"
        assert "agents" in run("ls", machine).split()
        for name in ("claude", "codex"):
            assert _transcripts(machine / "agents" / name) == expected[name]
        session = machine / "agents" / "claude" / "sessions" / CLAUDE_PROJECT
        assert run("ls", session)
        title = next(session.iterdir()) / "title"
        refused = subprocess.run(
            ["sh", "-c", f"echo x > '{title}'"], capture_output=True, timeout=60
        )
        assert refused.returncode != 0
    finally:
        store.unmount()
