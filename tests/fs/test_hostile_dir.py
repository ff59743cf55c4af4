"""Acceptance: a project dir holding ``*.jsonl`` names that are not session files
(symlink loops, a FIFO, a directory, a socket) lists, and its sessions read, as if
they were not there. Every command runs under a timeout, so a blocked worker thread
fails the test instead of hanging it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory, run

pytestmark = pytest.mark.fuse

PROJECT = "--hostile-dir--"
GOOD_BLOB = "a" * 64
LOOP_BLOB = "b" * 64


def session_lines(session_id: str, text: str) -> bytes:
    header = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/x",
    }
    entry = {
        "type": "message",
        "id": f"{session_id}-e1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 0},
    }
    return orjson.dumps(header) + b"\n" + orjson.dumps(entry) + b"\n"


def hostile_dir_agent(root: Path) -> Path:
    agent = root / "agent"
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True)
    (project / "a.jsonl").write_bytes(session_lines("sess-a", "hello from a"))
    (project / "z.jsonl").write_bytes(session_lines("sess-z", "hello from z"))
    (project / "loop.jsonl").symlink_to("loop.jsonl")  # ELOOP on every stat
    (project / "ping.jsonl").symlink_to("pong.jsonl")  # a two-link loop
    (project / "pong.jsonl").symlink_to("ping.jsonl")
    os.mkfifo(project / "fifo.jsonl")  # an open() without O_NONBLOCK blocks for ever
    (project / "fifo-link.jsonl").symlink_to("fifo.jsonl")
    (project / "dir.jsonl").mkdir()
    bind_socket(project / "sock.jsonl")
    blobs = agent / "blobs"
    blobs.mkdir()
    (blobs / GOOD_BLOB).write_bytes(b"blob")
    (blobs / LOOP_BLOB).symlink_to(LOOP_BLOB)
    return agent


def bind_socket(path: Path) -> None:
    """A unix socket at ``path`` (bound from its dir: socket paths are short)."""
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(path.name)
    finally:
        os.chdir(here)


def test_hostile_names_are_skipped_everywhere(tmp_path: Path, mount_factory: MountFactory) -> None:
    mount: Mount = mount_factory(hostile_dir_agent(tmp_path))
    project = mount.path / "sessions" / PROJECT
    assert run("ls", project).split() == ["a", "z"]
    assert sorted(run("ls", mount.path / "by-id").split()) == ["sess-a", "sess-z"]
    assert sorted(run("ls", mount.path / "recent").split()) == ["1", "2"]
    context = orjson.loads(run("cat", project / "a" / "context.json"))
    assert context["messages"][0]["content"] == "hello from a"
    assert "hello from z" in run("cat", mount.path / "by-id" / "sess-z" / "transcript.md")
    for name in ("loop", "ping", "fifo", "fifo-link", "dir", "sock"):
        assert not os.path.exists(project / name), name
    assert run("ls", mount.path / "blobs").split() == [GOOD_BLOB]
    run("ls", "-l", project)  # a second listing: every name is skipped again, logged once
    assert mount.alive()
    log = mount.log.read_text(errors="replace")
    for name in ("loop", "ping", "pong", "fifo", "fifo-link", "dir", "sock"):
        assert log.count(f"skipping {mount.agent_dir}/sessions/{PROJECT}/{name}.jsonl") == 1, name
