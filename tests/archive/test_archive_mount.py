"""The mount shows what the archive holds: a Claude Code tree whose sessions are deleted
after a sync (as Claude's cleanup does) still reads through a real mount, byte-identical,
read-only, ``header.json`` saying it is only in the archive and since when; a project
lists live and archived-only sessions together."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from archive_helpers import sync, user_env
from support.mount import Mount, MountFactory, run
from support.other_agents import CLAUDE_PROJECT, CODEX_PROJECT, fake_home, load_demo_agents
from support.write_setup import read_ctl

pytestmark = pytest.mark.fuse

RENDERINGS = ("transcript.md", "context.json", "title", "tree.txt", "stats.json")


def _session_dirs(mount: Mount, agent: str) -> list[Path]:
    """Every session dir (sub-agents' too) under ``agents/<agent>/sessions``, by ``find``."""
    root = mount.path / "agents" / agent / "sessions"
    found = run("find", root, "-name", "transcript.md").splitlines()
    return sorted(Path(line).parent for line in found)


def _readings(mount: Mount, agent: str) -> dict[str, bytes]:
    """What ``cat`` reads of every session's renderings and entries."""
    root = mount.path / "agents" / agent / "sessions"
    read: dict[str, bytes] = {}
    for session in _session_dirs(mount, agent):
        names = [*RENDERINGS, *(f"entries/{e}" for e in run("ls", session / "entries").split())]
        for name in names:
            data = subprocess.run(["cat", str(session / name)], capture_output=True, timeout=60)
            read[f"{session.relative_to(root)}/{name}"] = data.stdout
    return read


def _write_refused(path: Path, redirect: str) -> bool:
    """``echo new > path`` (or ``>>``) in a shell fails as read-only."""
    done = subprocess.run(
        ["sh", "-c", f"echo new {redirect} '{path}'"], capture_output=True, timeout=60
    )
    return done.returncode != 0 and b"Read-only" in done.stderr


def _home(tmp_path: Path) -> Path:
    trees = fake_home(tmp_path)
    (trees.home / "agent" / "sessions").mkdir(parents=True)
    return trees.home


def test_deleted_claude_sessions_read_byte_identical_from_the_archive(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = _home(tmp_path)
    env = user_env(home)
    done = sync(home)
    assert done.returncode == 0, done.stderr
    live = mount_factory(home / "agent", "--machine", "box", name="live", env=env)
    before = _readings(live, "claude")
    hits = run("cat", live.path / "search" / "requireAuth")
    assert "agents/claude/sessions/" in hits
    live_sessions = [p.relative_to(live.path) for p in _session_dirs(live, "claude")]
    assert len(live_sessions) >= 4 and any("subagents" in str(p) for p in live_sessions)
    live.unmount()

    projects = home / ".claude" / "projects"
    shutil.rmtree(projects)  # Claude's cleanup: every transcript gone
    projects.mkdir()
    archived = mount_factory(home / "agent", "--machine", "box", name="archived", env=env)
    assert [
        p.relative_to(archived.path) for p in _session_dirs(archived, "claude")
    ] == live_sessions
    assert _readings(archived, "claude") == before
    assert run("cat", archived.path / "search" / "requireAuth") == hits  # the same hits

    session = archived.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT
    (first,) = [p for p in session.iterdir() if (p / "header.json").exists()][:1]
    header = json.loads((first / "header.json").read_text())
    assert header["archive"]["only_in_archive"] is True
    assert header["archive"]["machine"] == "box"
    assert header["archive"]["since"].endswith("Z")
    assert _write_refused(first / "title", ">")


def test_a_project_lists_live_and_archived_only_sessions_together(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = _home(tmp_path)
    archive = f"file://{tmp_path / 'elsewhere'}"  # not the default archive: --archive
    assert sync(home, "--store", archive).returncode == 0
    project = home / ".claude" / "projects" / CLAUDE_PROJECT
    files = sorted(p for p in project.glob("*.jsonl") if not p.name.startswith("agent-"))
    gone, kept = files[0], project / "0a0b0c0d-1111-4222-8333-444455556666.jsonl"
    kept.write_bytes(gone.read_bytes().replace(gone.stem.encode(), kept.stem.encode()))
    gone.unlink()
    mount = mount_factory(
        home / "agent", "--machine", "box", "--archive", archive, env=user_env(home)
    )
    listed = run("ls", mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT).split()
    assert gone.stem in listed and kept.stem in listed
    live_header = mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / kept.stem
    assert "archive" not in json.loads((live_header / "header.json").read_text())


def test_a_rewritten_session_keeps_its_older_generation_in_generations(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = _home(tmp_path)
    assert sync(home).returncode == 0
    project = home / ".claude" / "projects" / CLAUDE_PROJECT
    (session,) = [p for p in project.glob("*.jsonl") if not p.name.startswith("agent-")][:1]
    before = session.read_bytes()
    shorter = session.with_name(".rewrite")
    shorter.write_bytes(before.split(b"\n", 3)[0] + b"\n")  # a shorter file, renamed over
    shorter.replace(session)
    assert sync(home).returncode == 0
    mount = mount_factory(home / "agent", "--machine", "box", env=user_env(home))
    generations = mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / session.stem
    generations /= "generations"
    assert run("ls", generations).split() == ["g00000001.jsonl"]
    old = subprocess.run(["cat", str(generations / "g00000001.jsonl")], capture_output=True)
    assert old.returncode == 0 and old.stdout == before
    assert _write_refused(generations / "g00000001.jsonl", ">>")
    assert session.read_bytes() != before  # the live file is the new one


def test_a_directory_store_mounts_like_a_team_store(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    home = _home(tmp_path)
    session = home / "agent" / "sessions" / "--work--" / "2026-01-01T00-00-00-000Z_a.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(
        b'{"type":"session","version":3,"id":"a","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"cwd":"/work"}\n'
    )
    live = mount_factory(home / "agent", "--no-archive", name="live", env=user_env(home))
    transcript = (live.path / "sessions" / "--work--" / session.stem / "transcript.md").read_bytes()
    live.unmount()
    assert sync(home).returncode == 0
    session.unlink()
    store = f"file://{home / 'data' / 'sessionfs' / 'archive'}"
    mount = mount_factory(home / "agent", "--store", store, name="store", env=user_env(home))
    machine = mount.path / "machines" / "box"
    archived = machine / "sessions" / "--work--" / session.stem / "transcript.md"
    assert archived.read_bytes() == transcript
    assert "claude" in run("ls", machine / "agents").split()


def test_an_archived_only_sub_agent_keeps_its_meta(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """A Claude sub-agent's ``.meta.json`` is archived beside its file: once Claude's
    cleanup removed both, the archived sub-agent's ``header.json`` still has its type
    and task, as the live one had."""
    home = _home(tmp_path)
    demo = load_demo_agents()
    project = "-home-demo-webapp"
    subagent = f"{demo.DEMO_SESSION_ID}/subagents/agent-a7c3e91"
    meta = home / ".claude" / "projects" / project / f"{subagent}.meta.json"
    assert meta.is_file()
    assert sync(home).returncode == 0
    shutil.rmtree(home / ".claude" / "projects" / project)  # the session dir and its meta
    mount = mount_factory(home / "agent", "--machine", "box", env=user_env(home))
    session = mount.path / "agents" / "claude" / "sessions" / project / demo.DEMO_SESSION_ID
    header = json.loads((session / "subagents" / "agent-a7c3e91" / "header.json").read_text())
    assert header["archive"]["only_in_archive"] is True
    assert header["agentType"] == "Explore", header
    assert header["description"] == "Find requireAuth uses"
    assert header["toolUseId"] == "toolu_demo_02"


def test_an_archived_only_codex_session_keeps_its_state_database_title(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """``codex exec`` writes no ``session_index.jsonl``: a thread's title is only in
    Codex's state database, which the archive keeps the titles of, so a session only
    the archive still holds has the title the live one had."""
    home = _home(tmp_path)
    codex = home / ".codex"
    main = next(codex.rglob("rollout-*-00000000a001.jsonl"))
    sub = next(codex.rglob("rollout-*-00000000a002.jsonl"))
    state = sqlite3.connect(codex / "state_5.sqlite")
    state.execute("CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, title TEXT NOT NULL)")
    state.execute("INSERT INTO threads VALUES (?, NULL, ?)", (sub.stem[-36:], "Find callers"))
    state.commit()
    state.close()
    session = Path("agents", "codex", "sessions", CODEX_PROJECT, main.stem)
    title = session / "subagents" / sub.stem / "title"
    live = mount_factory(home / "agent", "--no-archive", name="live", env=user_env(home))
    assert (live.path / title).read_text() == "Find callers\n"
    live.unmount()

    assert sync(home).returncode == 0
    shutil.rmtree(codex / "sessions")  # the rollouts gone, and the database with them
    (codex / "state_5.sqlite").unlink()
    archived = mount_factory(home / "agent", "--machine", "box", env=user_env(home))
    header = json.loads((archived.path / title).with_name("header.json").read_text())
    assert header["archive"]["only_in_archive"] is True
    assert (archived.path / title).read_text() == "Find callers\n"


def test_the_archive_mirror_keeps_to_its_budget_with_copies_of_live_files(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Past ``--mirror-max-gb`` the mirror drops its copies of files the agents still
    have (the mount shows the live ones); a copy is fetched back once its file is
    deleted, and a file only the archive holds is never dropped."""
    home = _home(tmp_path)
    env = user_env(home)
    assert sync(home).returncode == 0
    options = ("--machine", "box", "--cache-dir", str(tmp_path / "cache"))
    tiny = ("--mirror-max-gb", "0.000001")  # about 1 KB: less than any session
    project = home / ".claude" / "projects" / CLAUDE_PROJECT
    files = sorted(p for p in project.glob("*.jsonl") if not p.name.startswith("agent-"))
    shown = Path("agents", "claude", "sessions", CLAUDE_PROJECT)

    first = mount_factory(home / "agent", *options, *tiny, name="first", env=env)
    (mirror,) = (tmp_path / "cache").glob("store-*")
    copies = mirror / "machines" / "box" / "agents" / "claude" / "projects" / CLAUDE_PROJECT
    assert files and not any(copies.glob("*.jsonl")), sorted(copies.glob("*"))
    assert run("ls", first.path / shown).split() == [p.stem for p in files]
    status = read_ctl(first.path)
    assert status["archive_mirror_max_bytes"] == str(int(1e-6 * (1 << 30))), status
    assert int(status["archive_files_evicted"]) >= len(files), status
    transcript = (first.path / shown / files[0].stem / "transcript.md").read_bytes()
    first.unmount()

    size = files[0].stat().st_size
    files[0].unlink()  # Claude's cleanup: the archive's copy is the only one now
    second = mount_factory(home / "agent", *options, *tiny, name="second", env=env)
    assert (copies / files[0].name).is_file()  # fetched back, and kept past the budget
    status = read_ctl(second.path)
    assert int(status["archive_mirror_bytes"]) >= size, status
    assert not any((copies / p.name).exists() for p in files[1:])
    assert run("ls", second.path / shown).split() == [p.stem for p in files]
    assert (second.path / shown / files[0].stem / "transcript.md").read_bytes() == transcript
