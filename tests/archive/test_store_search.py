"""Root ``search/<words>`` of a team store mount (``mount --store file://DIR``): two
machines shipped with the real ``sessionfs sync``, read with ``cat`` through a real
mount. The machines' indexes are merged by time as ``search/`` merges agents: the 100
newest hits of both, newest first; hits of one millisecond by machine name, then
session file, then entry id. Their sessions share their times, so the 100th hit's
millisecond has more hits than fit and the rule decides which are shown. A machine's
synced Claude Code sessions (``machines/<m>/agents/claude/``) are searched too."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from archive_helpers import sync, user_env
from support.mount import MountFactory, run
from support.other_agents import load_demo_agents

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


def _newest(hits: list[tuple[int, str, str, str]]) -> list[tuple[str, str]]:
    """(time, entry path) of the 100 hits root ``search/`` shows, in its order."""
    return [
        (
            ms_to_iso(-minus_ms),
            f"machines/{machine}/sessions/{PROJECT}/{name.removesuffix('.jsonl')}"
            f"/entries/{entry_id}.json",
        )
        for minus_ms, machine, name, entry_id in sorted(hits)[:100]
    ]


def _ship(tmp_path: Path, store: str) -> list[tuple[int, str, str, str]]:
    """`MACHINES` synced to ``store``, each with `_write_sessions`'s; their hits."""
    hits = []
    for machine in MACHINES:
        home = tmp_path / machine
        hits += _write_sessions(home / "agent", machine)
        done = sync(home, "--store", store, "--machine", machine, "--no-agents")
        assert done.returncode == 0, done.stderr
    return hits


def _ctl(root: Path) -> dict[str, str]:
    lines = run("cat", root / "ctl").splitlines()
    return dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in lines)


def test_root_search_merges_the_machines_by_time_and_the_tie_rule(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    store = f"file://{tmp_path / 'team-store'}"
    hits = _ship(tmp_path, store)
    home = tmp_path / MACHINES[0]
    mount = mount_factory(home / "agent", "--store", store, name="store", env=user_env(home))
    deadline = time.monotonic() + READY_WITHIN
    while not all(_ctl(mount.path).get(f"search_{m}", "").startswith("ready") for m in MACHINES):
        assert time.monotonic() < deadline, _ctl(mount.path)
        time.sleep(0.2)

    lines = [line.split("\t") for line in run("cat", mount.path / "search" / WORD).splitlines()]

    expected = _newest(hits)
    assert [(when, path) for when, path, _role, _snippet in lines] == expected
    last = expected[-1][0]
    shown_last = sum(when == last for when, _ in expected)
    assert shown_last < 2 * SESSIONS  # the last millisecond shown has more hits than fit
    assert {path.split("/")[1] for _, path in expected} == set(MACHINES)
    for _, path, role, snippet in lines[:3]:
        assert role == "user" and WORD in snippet
        assert WORD in (mount.path / path).read_text()  # the entry file it names


ONLY_IN_CLAUDE = "quetzalcoatl"
SHARED = "kestrel"


def _xcsh_session(agent: Path, session_id: str, said: list[tuple[str, int, str]]) -> str:
    """An agent dir session of ``said`` (entry id, ms, text); returns its stem."""
    name = f"2026-01-01T00-00-00-000Z_{session_id}"
    lines = [{"type": "session", "version": 3, "id": session_id, "timestamp": ms_to_iso(0)}]
    for entry_id, ms, text in said:
        message = {"role": "user", "content": [{"type": "text", "text": text}]}
        lines.append(
            {"type": "message", "id": entry_id, "timestamp": ms_to_iso(ms), "message": message}
        )
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True, exist_ok=True)
    (project / f"{name}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return name


def test_root_search_finds_a_machines_synced_claude_sessions(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Machine beta ships its Claude Code dir with its agent dir: a word only in that
    Claude session is found from the root ``search/`` under
    ``machines/beta/agents/claude/``, and merged by time with the agent dirs' hits (one
    millisecond: the machine's agent dir before its agents)."""
    demo = load_demo_agents()
    store = f"file://{tmp_path / 'team-store'}"
    t1, t2, t3 = START_MS, START_MS + 60_000, START_MS + 120_000
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha_stem = _xcsh_session(
        alpha / "agent", "a", [("e1", t1, f"old {SHARED}"), ("e3", t3, f"new {SHARED}")]
    )
    beta_stem = _xcsh_session(beta / "agent", "b", [("e2", t2, f"own {SHARED}")])
    claude_id = "7d0c3a52-9a8e-4c1b-8f0e-2b7d6c1a9e02"
    lines = demo.ClaudeLines(claude_id, "/work", t2 / 1000 - 1)  # its line at t2
    uuid = lines.user(f"The {ONLY_IN_CLAUDE} and the {SHARED} in beta's Claude Code.")
    demo.write_lines(beta / ".claude" / "projects" / "-work" / f"{claude_id}.jsonl", lines.lines)
    for home, extra in ((alpha, ("--no-agents",)), (beta, ())):
        done = sync(home, "--store", store, "--machine", home.name, *extra)
        assert done.returncode == 0, done.stderr
    mount = mount_factory(alpha / "agent", "--store", store, name="store", env=user_env(alpha))
    deadline = time.monotonic() + READY_WITHIN
    indexes = ("alpha", "beta", "beta/claude")
    while not all(_ctl(mount.path).get(f"search_{i}", "").startswith("ready") for i in indexes):
        assert time.monotonic() < deadline, _ctl(mount.path)
        time.sleep(0.2)

    claude_entry = f"machines/beta/agents/claude/sessions/-work/{claude_id}/entries/{uuid}.json"
    only = [
        line.split("\t") for line in run("cat", mount.path / "search" / ONLY_IN_CLAUDE).splitlines()
    ]
    assert [(when, path) for when, path, _, _ in only] == [(ms_to_iso(t2), claude_entry)]
    assert ONLY_IN_CLAUDE in run("cat", mount.path / claude_entry)

    shared = [
        line.split("\t")[1] for line in run("cat", mount.path / "search" / SHARED).splitlines()
    ]
    assert shared == [
        f"machines/alpha/sessions/{PROJECT}/{alpha_stem}/entries/e3.json",
        f"machines/beta/sessions/{PROJECT}/{beta_stem}/entries/e2.json",
        claude_entry,
        f"machines/alpha/sessions/{PROJECT}/{alpha_stem}/entries/e1.json",
    ]
    for path in shared:
        assert SHARED in run("cat", mount.path / path), path


def test_a_search_right_after_mounting_waits_for_the_first_builds(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """As a local mount's: root ``search/`` read the moment the store mount is up
    waits for every machine's first index build (a few seconds at most) instead of
    answering from indexes still empty; the root ``ctl`` then says they are ready."""
    store = f"file://{tmp_path / 'team-store'}"
    hits = _ship(tmp_path, store)
    home = tmp_path / MACHINES[0]
    mount = mount_factory(home / "agent", "--store", store, name="store", env=user_env(home))
    lines = [line.split("\t") for line in run("cat", mount.path / "search" / WORD).splitlines()]
    assert [(when, path) for when, path, _role, _snippet in lines] == _newest(hits)
    status = _ctl(mount.path)
    assert all(status[f"search_{m}"].startswith("ready") for m in MACHINES), status


PADDED_BYTES = 100_000


def _padded_xcsh_session(agent: Path, session_id: str, text: str) -> str:
    """A session of one message saying ``text`` and `PADDED_BYTES` of padding; its stem."""
    name = _xcsh_session(agent, session_id, [("e1", START_MS, text)])
    pad = {"type": "custom", "customType": "pad", "data": "z" * 1000}
    with open(agent / "sessions" / PROJECT / f"{name}.jsonl", "ab") as f:
        f.write((orjson.dumps(pad) + b"\n") * (PADDED_BYTES // 1000))
    return name


def _hit_paths(root: Path, word: str) -> list[str]:
    return [line.split("\t")[1] for line in run("cat", root / "search" / word).splitlines()]


def test_the_mirror_budget_never_takes_a_synced_agents_session_out_of_search(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """``--mirror-max-gb`` below what the store holds: the mirror evicts the agent
    dir's session (the mount fetches it again when it is asked for by name), never a
    synced Claude Code session (nothing would bring it back: it would be gone from the
    listing and from ``search/``), even when they alone take more than the budget.
    Each Claude session stays listed and found, its hit's entry opens."""
    demo = load_demo_agents()
    store = f"file://{tmp_path / 'team-store'}"
    beta = tmp_path / "beta"
    stem = _padded_xcsh_session(beta / "agent", "own", "the own ocelot")
    claude_ids = [f"7d0c3a52-9a8e-4c1b-8f0e-2b7d6c1a9e0{n}" for n in range(3)]
    for n, claude_id in enumerate(claude_ids):
        lines = demo.ClaudeLines(claude_id, "/work", START_MS / 1000 + n)
        lines.user(f"claude{n}wombat " + "pad " * (PADDED_BYTES // 4))
        demo.write_lines(
            beta / ".claude" / "projects" / "-work" / f"{claude_id}.jsonl", lines.lines
        )
    done = sync(beta, "--store", store, "--machine", "beta")
    assert done.returncode == 0, done.stderr
    budget_gb = 2.5 * PADDED_BYTES / (1 << 30)  # room for two of the four sessions
    mount = mount_factory(
        beta / "agent",
        *("--store", store, "--refresh-seconds", "1", "--mirror-max-gb", f"{budget_gb:.9f}"),
        name="store",
        env=user_env(beta),
    )
    status = _ctl(mount.path)
    assert status["files_evicted"] == "1", status  # the agent dir's session alone
    assert int(status["mirror_bytes"]) > int(status["mirror_max_bytes"])
    claude = mount.path / "machines" / "beta" / "agents" / "claude" / "sessions" / "-work"
    assert run("ls", claude).split() == claude_ids
    for n, claude_id in enumerate(claude_ids):
        (path,) = _hit_paths(mount.path, f"claude{n}wombat")
        assert path.startswith(f"machines/beta/agents/claude/sessions/-work/{claude_id}/entries/")
        assert f"claude{n}wombat" in run("cat", mount.path / path)
    own = mount.path / "machines" / "beta" / "sessions" / PROJECT / stem
    assert "ocelot" in run("cat", own / "transcript.md")  # evicted, fetched when asked for
