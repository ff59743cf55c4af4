"""Acceptance: ``transcripts/<project>/<stem>.md`` through a real mount -- the same
sessions as raw grep, the same bytes as ``transcript.md``, exact sizes before any read,
a kept cache dir reused after a remount, a deleted, corrupt or full cache dir never
served, appends seen live, the root ``.ignore``; nothing under the agent dir changes."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support import waiting
from support.agent_messages import assistant, user
from support.mount import Mount, MountFactory

from core.manager import SessionManager
from sessionfs.fs.nodes.transcripts import _read_if_cached

pytestmark = pytest.mark.fuse

WORD = "quokkaflux"
DEADLINE = 5.0
#: Sessions made with WORD in them: (project, text). One project has two.
WORD_SESSIONS = (
    ("--work-alpha--", "about quokkaflux"),
    ("--work-alpha--", "no match here"),
    ("--work-beta--", "QUOKKAFLUX? no: quokkaflux"),
)


def eventually(check: Callable[[], bool], what: str) -> None:
    waiting.eventually(check, what, DEADLINE)


def add_sessions(agent_dir: Path) -> None:
    for project, text in WORD_SESSIONS:
        manager = SessionManager.create("/work/x", agent_dir / "sessions" / project)
        with manager:
            manager.append_message(user(text))
            manager.append_message(assistant("answer"))
            manager.ensure_on_disk()


def agent_hash(agent_dir: Path) -> str:
    """Every name, byte and mtime under the agent dir."""
    digest = hashlib.sha256()
    for path in sorted(agent_dir.rglob("*")):
        st = path.lstat()
        digest.update(f"{path.relative_to(agent_dir)} {st.st_mtime_ns} {st.st_size}\n".encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def grep_sessions(root: Path, suffix: str) -> set[str]:
    out = subprocess.run(
        ["grep", "-rl", WORD, str(root)], capture_output=True, text=True, timeout=60
    ).stdout
    return {line[len(str(root)) + 1 : -len(suffix)] for line in out.splitlines()}


def transcripts(mount: Mount) -> list[Path]:
    return sorted((mount.path / "transcripts").glob("*/*.md"))


def session_transcript(mount: Mount, transcript: Path) -> Path:
    return mount.path / "sessions" / transcript.parent.name / transcript.stem / "transcript.md"


@pytest.fixture
def word_agent(demo_agent: Path) -> Path:
    add_sessions(demo_agent)
    return demo_agent


def test_grep_finds_the_sessions_raw_grep_finds_with_the_same_bytes(
    word_agent: Path, mount_factory: MountFactory
) -> None:
    before = agent_hash(word_agent)
    mount = mount_factory(word_agent)
    files = transcripts(mount)
    assert len(files) == len(list((word_agent / "sessions").glob("*/*.jsonl")))
    sizes = {f: os.stat(f).st_size for f in files}  # before anything was read
    assert grep_sessions(mount.path / "transcripts", ".md") == grep_sessions(
        word_agent / "sessions", ".jsonl"
    )
    assert len(grep_sessions(mount.path / "transcripts", ".md")) == 2
    for f in files:
        data = f.read_bytes()
        assert len(data) == sizes[f], f
        assert data == session_transcript(mount, f).read_bytes(), f
    mount.unmount()
    assert agent_hash(word_agent) == before


def test_a_remount_with_the_cache_dir_kept_renders_nothing(
    word_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    cache = tmp_path / "kept-cache"
    first = mount_factory(word_agent, "--cache-dir", str(cache), name="first")
    expected = {f.relative_to(first.path): f.read_bytes() for f in transcripts(first)}
    first.unmount()
    assert f"transcripts: {len(expected)} rendered, 0 found" in first.log.read_text()
    again = mount_factory(word_agent, "--cache-dir", str(cache), name="again")
    assert {f.relative_to(again.path): f.read_bytes() for f in transcripts(again)} == expected
    again.unmount()
    assert f"transcripts: 0 rendered, {len(expected)} found" in again.log.read_text()


def test_a_sessions_transcript_comes_from_the_render_cache_while_not_loaded(
    word_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    cache = tmp_path / "kept-cache"
    first = mount_factory(word_agent, "--cache-dir", str(cache), name="first")
    files = [session_transcript(first, f) for f in transcripts(first)]
    sizes = {f: os.stat(f).st_size for f in files}  # exact before any read
    expected = {f.relative_to(first.path): f.read_bytes() for f in files}
    assert all(len(expected[f.relative_to(first.path)]) == sizes[f] for f in files)
    loaded = files[0].parent
    header = (loaded / "header.json").read_bytes()  # loads that session in the daemon
    assert (loaded / "transcript.md").read_bytes() == expected[files[0].relative_to(first.path)]
    assert os.stat(loaded / "header.json").st_size == len(header)
    first.unmount()
    # Rendered by the workers (the daemon parsed none of them for transcript.md).
    assert f"transcripts: {len(files)} rendered, 0 found" in first.log.read_text()
    again = mount_factory(word_agent, "--cache-dir", str(cache), name="again")
    files = [again.path / name for name in expected]
    assert {f: os.stat(f).st_size for f in files} == {
        again.path / n: len(d) for n, d in expected.items()
    }
    header_file = again.path / loaded.relative_to(first.path) / "header.json"
    assert os.stat(header_file).st_size == len(header)  # the worker's recorded size
    assert {f.relative_to(again.path): f.read_bytes() for f in files} == expected
    again.unmount()
    assert f"transcripts: 0 rendered, {len(files)} found" in again.log.read_text()


def test_a_deleted_or_corrupt_cache_dir_is_never_served(
    word_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    mount = mount_factory(word_agent, "--cache-dir", str(cache))
    expected = {f: f.read_bytes() for f in transcripts(mount)}
    shutil.rmtree(cache)
    assert {f: f.read_bytes() for f in expected} == expected
    stored = [p for p in cache.rglob("*") if p.is_file()]
    assert stored, "the cache dir is rebuilt"
    for path in stored:  # garbage of the same size, then garbage of another size
        size = path.stat().st_size
        path.write_bytes(b"\0garbage" * (size // 8) + b"x" * (size % 8))
    assert {f: f.read_bytes() for f in expected} == expected
    for path in stored:
        path.write_bytes(b"SFSRNDR1\xff\xff\xff\xff")
    assert {f: f.read_bytes() for f in expected} == expected
    assert grep_sessions(mount.path / "transcripts", ".md") == grep_sessions(
        word_agent / "sessions", ".jsonl"
    )


def test_a_cache_dir_on_a_full_disk_still_serves_everything(
    word_agent: Path, mount_factory: MountFactory, full_disk: Path
) -> None:
    mount = mount_factory(word_agent, "--cache-dir", str(full_disk / "cache"))
    for f in transcripts(mount):
        size = os.stat(f).st_size
        data = f.read_bytes()
        assert len(data) == size
        assert data == session_transcript(mount, f).read_bytes()
    assert len(grep_sessions(mount.path / "transcripts", ".md")) == 2


def test_an_append_by_another_process_shows_up_within_a_second(
    word_agent: Path, mount_factory: MountFactory
) -> None:
    mount = mount_factory(word_agent)
    file = next((word_agent / "sessions" / "--work-alpha--").glob("*.jsonl"))
    transcript = mount.path / "transcripts" / "--work-alpha--" / f"{file.stem}.md"
    assert b"appended later" not in transcript.read_bytes()
    manager = SessionManager.open(str(file))
    with manager:
        manager.append_message(user("appended later"))
    started = time.monotonic()
    eventually(lambda: b"appended later" in transcript.read_bytes(), "the append")
    assert time.monotonic() - started < 1.5
    assert os.stat(transcript).st_size == len(transcript.read_bytes())
    assert transcript.read_bytes() == session_transcript(mount, transcript).read_bytes()


def test_a_replaced_or_deleted_session_file(word_agent: Path, mount_factory: MountFactory) -> None:
    mount = mount_factory(word_agent)
    files = sorted((word_agent / "sessions" / "--work-alpha--").glob("*.jsonl"))
    first = mount.path / "transcripts" / "--work-alpha--" / f"{files[0].stem}.md"
    first.read_bytes()
    shutil.copy(files[1], files[0].with_suffix(".tmp"))
    os.replace(files[0].with_suffix(".tmp"), files[0])  # a new inode, other content
    eventually(lambda: WORD.encode() not in first.read_bytes(), "the replacement")
    files[0].unlink()
    eventually(lambda: not first.exists(), "the deletion")


def test_the_root_ignore_leaves_out_the_duplicate_views(demo_mount: Mount) -> None:
    ignore = (demo_mount.path / ".ignore").read_text().splitlines()
    for name in ("entries/", "path/", "context.json", "tree.txt", "transcript.md", "branches/"):
        assert f"/sessions/**/{name}" in ignore
    assert not any(line.startswith("/transcripts") for line in ignore)
    if shutil.which("rg") is not None:
        out = subprocess.run(
            ["rg", "-l", "--no-messages", "user", str(demo_mount.path)],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        allowed = ("/transcripts/", "/history/", "/README.md")  # the manual says "user" too
        assert out and all(any(a in p for a in allowed) for p in out), out


def test_a_cached_read_never_waits_and_never_reads_short(tmp_path: Path) -> None:
    path = tmp_path / "cache-file"
    path.write_bytes(b"0123456789" * 1000)  # just written: in the page cache
    fd = os.open(path, os.O_RDONLY)
    try:
        got = _read_if_cached(fd, 100, 5)
        assert got is None or got == (b"0123456789" * 11)[5:105]  # None: no RWF_NOWAIT
        assert _read_if_cached(fd, 100, 9_950) is None  # short (past the end): the slow path
    finally:
        os.close(fd)
