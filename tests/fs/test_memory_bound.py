"""Acceptance: the daemon's memory stays bounded by ``--cache-mb`` however many sessions
are read through a real mount (the estimate-based LRU plus the real-RSS bound,
`sessionfs.view.rss_bound`), and evicted sessions read back the same."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from support.mount import MountFactory
from support.process_status import status_mb

pytestmark = pytest.mark.fuse

SESSIONS = 60
ENTRIES = 400
CACHE_MB = 16
#: What the daemon may hold above its RSS right after mounting besides the cache: the
#: bound's slack (32 MB) and a load's transient peak, with room for allocator noise.
MARGIN_MB = 80


def write_session(path: Path, n: int) -> None:
    header = {"type": "session", "version": 3, "id": f"s{n:03}", "timestamp": "t", "cwd": "/"}
    lines = [orjson.dumps(header)]
    for i in range(ENTRIES):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"session {n} message {i} " + "lorem ipsum dolor sit amet " * 40
        entry = {
            "type": "message",
            "id": f"{n:04x}{i:04x}",
            "parentId": f"{n:04x}{i - 1:04x}" if i else None,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": role, "content": [{"type": "text", "text": text}]},
        }
        lines.append(orjson.dumps(entry))
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_reading_many_sessions_keeps_the_daemon_under_its_cache_budget(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    project = tmp_path / "agent" / "sessions" / "--work--"
    project.mkdir(parents=True)
    for n in range(SESSIONS):
        write_session(project / f"s{n:03}.jsonl", n)
    corpus_mb = sum(f.stat().st_size for f in project.iterdir()) / 2**20
    assert corpus_mb * 4 > CACHE_MB + MARGIN_MB  # all of them parsed would not fit
    mount = mount_factory(tmp_path / "agent", "--cache-mb", str(CACHE_MB))
    pid = mount.process.pid
    sessions = sorted((mount.path / "sessions" / "--work--").iterdir())
    assert len(sessions) == SESSIONS
    start_mb = status_mb(pid, "VmRSS")
    first = {}
    for session in sessions:
        first[session.name] = (session / "context.json").read_bytes()
        assert (session / "transcript.html").read_bytes().endswith(b"</html>\n")
        entries = os.listdir(session / "entries")
        assert len(entries) == ENTRIES
        assert (session / "entries" / sorted(entries)[-1]).read_bytes()
    again = sessions[0] / "context.json"  # long evicted: parsed again, same bytes
    assert again.read_bytes() == first[sessions[0].name]
    peak_mb = status_mb(pid, "VmHWM")
    assert peak_mb <= start_mb + CACHE_MB + MARGIN_MB, (start_mb, peak_mb, corpus_mb)
