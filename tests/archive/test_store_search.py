"""Root ``search/<words>`` of a team store mount (``mount --store file://DIR``): two
machines shipped with the real ``sessionfs sync``, read with ``cat`` through a real
mount. The machines' indexes are merged by time as ``search/`` merges agents: the 100
newest hits of both, newest first; hits of one millisecond by machine name, then
session file, then entry id. Their sessions share their times, so the 100th hit's
millisecond has more hits than fit and the rule decides which are shown."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from archive_helpers import sync, user_env
from support.mount import MountFactory, run

from core.paths import ms_to_iso

pytestmark = pytest.mark.fuse

WORD = "zebrafinch"
MACHINES = ("beta", "alpha")  # shipped in this order; hits of one ms come alpha first
PROJECT = "--work--"
SESSIONS = 3
ENTRIES = 60
START_MS = 1_767_225_600_000
READY_WITHIN = 60.0


def _write_sessions(agent: Path, machine: str) -> list[tuple[int, str, str, str]]:
    """Sessions of plain messages, entry n of every session (on both machines) at the
    same second; every third entry lacks the word. Returns each hit as it sorts:
    (-time, machine, session file, entry id)."""
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True)
    hits = []
    for number in range(SESSIONS):
        session_id = f"{machine}-{number}"
        name = f"2026-01-01T00-00-00-000Z_{session_id}.jsonl"
        lines = [{"type": "session", "version": 3, "id": session_id, "timestamp": ms_to_iso(0)}]
        parent = None
        for n in range(ENTRIES):
            ms = START_MS + n * 1000
            entry_id = f"e{n:03d}"
            text = f"step {n} of {session_id}" + ("" if n % 3 == 0 else f" {WORD}")
            lines.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": ms_to_iso(ms),
                    "message": {"role": "user", "content": [{"type": "text", "text": text}]},
                }
            )
            parent = entry_id
            if n % 3:
                hits.append((-ms, machine, name, entry_id))
        (project / name).write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return hits


def _ctl(root: Path) -> dict[str, str]:
    lines = run("cat", root / "ctl").splitlines()
    return dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in lines)


def test_root_search_merges_the_machines_by_time_and_the_tie_rule(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    store = f"file://{tmp_path / 'team-store'}"
    hits = []
    for machine in MACHINES:
        home = tmp_path / machine
        hits += _write_sessions(home / "agent", machine)
        done = sync(home, "--store", store, "--machine", machine, "--no-agents")
        assert done.returncode == 0, done.stderr
    home = tmp_path / MACHINES[0]
    mount = mount_factory(home / "agent", "--store", store, name="store", env=user_env(home))
    deadline = time.monotonic() + READY_WITHIN
    while not all(_ctl(mount.path).get(f"search_{m}", "").startswith("ready") for m in MACHINES):
        assert time.monotonic() < deadline, _ctl(mount.path)
        time.sleep(0.2)

    lines = [line.split("\t") for line in run("cat", mount.path / "search" / WORD).splitlines()]

    hits.sort()
    expected = [
        (
            ms_to_iso(-minus_ms),
            f"machines/{machine}/sessions/{PROJECT}/{name.removesuffix('.jsonl')}"
            f"/entries/{entry_id}.json",
        )
        for minus_ms, machine, name, entry_id in hits[:100]
    ]
    assert [(when, path) for when, path, _role, _snippet in lines] == expected
    last = expected[-1][0]
    shown_last = sum(when == last for when, _ in expected)
    assert shown_last < 2 * SESSIONS  # the last millisecond shown has more hits than fit
    assert {path.split("/")[1] for _, path in expected} == set(MACHINES)
    for _, path, role, snippet in lines[:3]:
        assert role == "user" and WORD in snippet
        assert WORD in (mount.path / path).read_text()  # the entry file it names
