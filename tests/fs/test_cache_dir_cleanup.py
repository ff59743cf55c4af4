"""Acceptance: ``--cache-dir`` does not keep renderings of deleted sessions. A remount
cleans the render cache: a deleted session's cache file goes, live ones stay (and are
served without rendering), a corrupt one goes and is rebuilt on the next read."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support.mount import MountFactory, run

from core import paths
from sessionfs.view.render_cache import EntryHead, FileIdentity, entry_name, read_entry_head

pytestmark = pytest.mark.fuse

DEADLINE = 10.0


def renders_dir(cache: Path) -> Path:
    (agent_cache,) = cache.glob("agent-*")
    return agent_cache / "renders"


def session_files(agent: Path) -> list[Path]:
    return sorted(paths.sessions_root(agent).glob("*/*.jsonl"))


def key_of(agent: Path, session: Path) -> str:
    return str(session.relative_to(paths.sessions_root(agent)))


def wait_until_gone(path: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while path.exists():
        assert time.monotonic() < deadline, f"{path} still there after {DEADLINE}s"
        time.sleep(0.05)


def test_a_remount_removes_deleted_sessions_renderings_and_keeps_the_rest(
    demo_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = mount_factory(demo_agent, "--cache-dir", str(cache), name="first")
    run("grep", "-rlc", "zzz-no-such-word", first.path / "transcripts", check=False)
    first.unmount()
    renders = renders_dir(cache)
    sessions = session_files(demo_agent)
    assert len(sessions) >= 3
    names = {s: entry_name(key_of(demo_agent, s)) for s in sessions}
    assert set(names.values()) <= set(os.listdir(renders))

    deleted, corrupt, *live = sessions
    deleted.unlink()
    (renders / names[corrupt]).write_bytes(b"SFSRNDR2 not a head at all")

    again = mount_factory(demo_agent, "--cache-dir", str(cache), name="again")
    wait_until_gone(renders / names[deleted])
    wait_until_gone(renders / names[corrupt])
    for session in live:
        assert (renders / names[session]).is_file(), session

    # the corrupt one is rendered again and stored again, intact
    project, stem = corrupt.parent.name, corrupt.stem
    flat = run("cat", again.path / "transcripts" / project / f"{stem}.md")
    assert flat == run("cat", again.path / "sessions" / project / stem / "transcript.md")
    # (its head, not `RenderCache.validate`: that also compares the renderer's
    # fingerprint, which this process computed from the source files at import)
    with open(renders / names[corrupt], "rb") as f:
        head = read_entry_head(f.fileno())
    assert head == EntryHead(key_of(demo_agent, corrupt), FileIdentity.of(os.stat(corrupt)))
    assert not (again.path / "transcripts" / deleted.parent.name / f"{deleted.stem}.md").exists()
    again.unmount()
