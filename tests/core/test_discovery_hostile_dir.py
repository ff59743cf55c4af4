"""Discovery's listings skip ``*.jsonl`` names that are not session files: a symlink
loop, a FIFO (reading one would block for ever), a directory, a socket."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import orjson
import pytest

from core import discovery

HEADER = {"type": "session", "version": 3, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    project = agent / "sessions" / "--w--"
    project.mkdir(parents=True)
    entry = {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "hi", "timestamp": 0},
    }
    (project / "good.jsonl").write_bytes(
        orjson.dumps({**HEADER, "id": "good"}) + b"\n" + orjson.dumps(entry) + b"\n"
    )
    (project / "loop.jsonl").symlink_to("loop.jsonl")
    os.mkfifo(project / "fifo.jsonl")
    (project / "fifo-link.jsonl").symlink_to("fifo.jsonl")
    (project / "dir.jsonl").mkdir()
    here = os.getcwd()
    os.chdir(project)  # socket paths are short: bind by relative name
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock.jsonl")
    finally:
        os.chdir(here)
    return agent


@pytest.mark.timeout(20)  # a FIFO opened for reading would block: fail, do not hang
def test_listings_skip_what_is_not_a_session_file(agent_dir: Path) -> None:
    project = agent_dir / "sessions" / "--w--"
    good = str(project / "good.jsonl")
    assert [i.path for i in discovery.list_sessions("/w", project)] == [good]
    assert [i.path for i in discovery.list_all(agent_dir)] == [good]
    assert [r.path for r in discovery.get_recent_sessions(project, 10)] == [good]
    assert discovery.find_most_recent_session(project) == good
