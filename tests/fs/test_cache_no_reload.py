"""Acceptance (issue 26): a cold read of every ``entries/*.json`` of a corpus that fits
``--cache-mb`` loads each session once, whether a script collects every path first
and then reads them (the cache's least recently used sessions are then exactly the ones
read next) or reads session by session. The root ``ctl`` counts the cache's loads,
evictions and reloads right after an eviction.

Small entries are the shape that exposed it: orjson's output buffers held 4 KiB or more
per cached entry file of a few hundred bytes, the daemon's RSS went past its bound while
the cache's accounting was far under its budget, and the RSS bound evicted the sessions
about to be read."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory
from support.write_setup import read_ctl

pytestmark = pytest.mark.fuse

SESSIONS = 60
ENTRIES = 200
CACHE_MB = 24


def write_corpus(agent: Path) -> dict[str, bytes]:
    """``SESSIONS`` sessions of ``ENTRIES`` short messages; returns each entry's id and
    its stored line."""
    lines_by_id = {}
    for n in range(SESSIONS):
        project = agent / "sessions" / f"--work-p{n % 3}--"
        project.mkdir(parents=True, exist_ok=True)
        header = {"type": "session", "version": 3, "id": f"s{n:03}", "timestamp": "t", "cwd": "/"}
        lines = [orjson.dumps(header)]
        for i in range(ENTRIES):
            entry = {
                "type": "message",
                "id": f"{n:04x}{i:04x}",
                "parentId": f"{n:04x}{i - 1:04x}" if i else None,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": f"session {n} message {i} " + "ok " * 30},
            }
            line = orjson.dumps(entry)
            lines_by_id[entry["id"]] = line
            lines.append(line)
        (project / f"s{n:03}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return lines_by_id


def entry_dirs(mount_path: Path) -> list[Path]:
    sessions = mount_path / "sessions"
    return sorted(s / "entries" for p in sessions.iterdir() for s in p.iterdir())


def check_read(path: Path, lines_by_id: dict[str, bytes]) -> None:
    """The entry file shows the stored entry (same JSON), under its id's name."""
    shown = orjson.loads(path.read_bytes())
    assert shown["id"] == path.name.removesuffix(".json")
    assert shown == orjson.loads(lines_by_id[shown["id"]])


def mount_corpus(
    tmp_path: Path, mount_factory: MountFactory, cache_mb: int
) -> tuple[Mount, dict[str, bytes], list[Path]]:
    """`write_corpus` mounted read-only with ``--cache-mb cache_mb``: the mount, each
    entry's stored line by id, and every session's ``entries/`` in the mount."""
    agent = tmp_path / "agent"
    lines_by_id = write_corpus(agent)
    mount = mount_factory(agent, "--cache-mb", str(cache_mb), "--read-only")
    dirs = entry_dirs(mount.path)
    assert len(dirs) == SESSIONS
    return mount, lines_by_id, dirs


@pytest.mark.parametrize("order", ["all paths first", "session by session"])
def test_reading_every_entry_file_loads_each_session_once(
    tmp_path: Path, mount_factory: MountFactory, order: str
) -> None:
    mount, lines_by_id, dirs = mount_corpus(tmp_path, mount_factory, CACHE_MB)
    read = 0
    if order == "all paths first":
        paths = [d / name for d in dirs for name in os.listdir(d)]
        for path in paths:
            check_read(path, lines_by_id)
            read += 1
    else:
        for d in dirs:
            for name in os.listdir(d):
                check_read(d / name, lines_by_id)
                read += 1
    assert read == SESSIONS * ENTRIES
    status = read_ctl(mount.path)
    held = status["cache"]  # "<n> sessions loaded, <held> of <budget> MB"
    held_mb = float(held.split(", ")[1].split()[0])
    assert held_mb < CACHE_MB, held  # the corpus fits: nothing had to go
    assert status["cache_loads"] == str(SESSIONS), status
    assert status["cache_evictions"] == "0", status
    assert status["cache_reloads_after_eviction"] == "0", status
