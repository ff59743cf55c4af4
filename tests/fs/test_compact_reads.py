"""Acceptance: sessions that are only read are served from their compact form
(`core.formats.xcsh_file`) with exactly the bytes a parsed session renders --
every ``entries/`` file, ``path/`` link, ``leaf`` and rendering, read with real ``cat``
and ``readlink`` -- and a session larger than ``--cache-mb`` is still served whole."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest
from support.fixture_paths import fixture_files
from support.mount import MountFactory

from core import SessionManager
from sessionfs.view.loaded_session import LoadedSession, open_browse
from sessionfs.view.session_ref import SessionRef

pytestmark = pytest.mark.fuse

RENDERINGS = ("header.json", "title", "context.json", "transcript.md", "tree.txt", "stats.json")


def cat(path: Path) -> bytes:
    return subprocess.run(["cat", str(path)], capture_output=True, check=True, timeout=30).stdout


def parsed(path: Path) -> LoadedSession:
    """The session as a parsed ``SessionManager`` renders it (what the mount served
    before the compact form existed)."""
    st = os.stat(path)
    ref = SessionRef(path.parent.name, path.stem, path, {}, st.st_mtime_ns, st.st_size)
    return LoadedSession.parsed(ref, open_browse(path))


def expected_files(session: LoadedSession) -> dict[str, bytes]:
    names = session.table().names
    files = {what: session.rendered(what) for what in RENDERINGS}
    files.update({f"entries/{n}": session.entry_bytes(i) for i, n in enumerate(names)})
    return files


def expected_links(session: LoadedSession) -> dict[str, str]:
    names = session.table().names
    path = session.path_indexes()
    width = max(4, len(str(len(path) - 1)))
    links = {
        f"path/{number:0{width}d}-{names[i]}": f"../entries/{names[i]}"
        for number, i in enumerate(path)
    }
    links["leaf"] = f"entries/{session.name_for_id(session.leaf_id())}"
    return links


def agent_with_current_sessions(tmp_path: Path) -> Path:
    """The real fixtures as the agents write them today (opening them migrates them to
    the current version: only such files are held compact)."""
    project = tmp_path / "agent" / "sessions" / "--work--"
    project.mkdir(parents=True)
    for fixture in fixture_files():
        target = project / fixture.name
        target.write_bytes(fixture.read_bytes())
        SessionManager.open(str(target))
    return tmp_path / "agent"


def test_compact_sessions_serve_the_bytes_a_parsed_session_renders(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = agent_with_current_sessions(tmp_path)
    mount = mount_factory(agent)
    for file in sorted((agent / "sessions" / "--work--").iterdir()):
        session_dir = mount.path / "sessions" / "--work--" / file.stem
        session = parsed(file)
        for name, data in expected_files(session).items():
            assert cat(session_dir / name) == data, name
        assert sorted(os.listdir(session_dir / "entries")) == sorted(session.table().names)
        for name, target in expected_links(session).items():
            assert os.readlink(session_dir / name) == target, name


def write_big_session(tmp_path: Path, entries: int, words: int = 35) -> Path:
    """``<tmp>/agent/sessions/--work--/big.jsonl``: one linear chain of user messages."""
    project = tmp_path / "agent" / "sessions" / "--work--"
    project.mkdir(parents=True)
    header = {"type": "session", "version": 3, "id": "big", "timestamp": "t", "cwd": "/"}
    lines = [orjson.dumps(header)]
    for i in range(entries):
        text = f"message {i} " + "lorem ipsum dolor sit amet " * words
        entry = {
            "type": "message",
            "id": f"{i:08x}",
            "parentId": f"{i - 1:08x}" if i else None,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        }
        lines.append(orjson.dumps(entry))
    file = project / "big.jsonl"
    file.write_bytes(b"\n".join(lines) + b"\n")
    return file


def test_a_session_larger_than_the_cache_is_served_whole(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file = write_big_session(tmp_path, 3000)  # ~3 MB: three times --cache-mb 1
    assert file.stat().st_size > 3 * 2**20
    mount = mount_factory(tmp_path / "agent", "--cache-mb", "1")
    session_dir = mount.path / "sessions" / "--work--" / "big"
    session = parsed(file)
    assert cat(session_dir / "context.json") == session.rendered("context.json")
    assert cat(session_dir / "entries" / "00000bb7.json") == session.entry_bytes(2999)
    assert len(os.listdir(session_dir / "path")) == 3000


def test_renderings_of_a_session_near_the_limit_are_made_lean_with_the_same_bytes(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    # With --cache-mb 1 the daemon renders files up to ~10.8 MB, and a file over half
    # that without every entry parsed at once (issue 26 point 6): context.json a
    # message at a time into memory, tree.txt and stats.json entry by entry; the render
    # workers stream transcript.md and transcript.html into the cache dir, each its
    # own job. Each is the first read of a fresh daemon (the load renders it).
    file = write_big_session(tmp_path, 7000)
    assert 6 * 2**20 < file.stat().st_size < 10 * 2**20
    expected = parsed(file)
    for i, what in enumerate(
        ("context.json", "tree.txt", "stats.json", "transcript.md", "transcript.html")
    ):
        mount = mount_factory(tmp_path / "agent", "--cache-mb", "1", name=f"mnt{i}")
        assert cat(mount.path / "sessions" / "--work--" / "big" / what) == expected.rendered(
            what
        ), what
        mount.unmount()


def test_renderings_beyond_the_documented_limit_are_refused_and_entries_still_served(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    # With --cache-mb 1 a rendering parses at most (1 + 64) / 6 MB: ~10.8 MB. A 12 MB
    # session's tree.txt would take the daemon past its memory bound.
    file = write_big_session(tmp_path, 1200, words=370)
    assert file.stat().st_size > 11 * 2**20
    before = file.read_bytes()
    mount = mount_factory(tmp_path / "agent", "--cache-mb", "1")
    session_dir = mount.path / "sessions" / "--work--" / "big"
    refused = subprocess.run(
        ["cat", str(session_dir / "tree.txt")], capture_output=True, text=True, timeout=30
    )
    assert refused.returncode != 0
    assert "File too large" in refused.stderr
    status = cat(session_dir / "ctl").decode()
    assert "last_error: tree.txt: the session file is 12 MB" in status
    assert "at most 11 MB" in status
    # transcript.md and context.json are rendered by the render workers (other
    # processes) a message at a time into the cache dir and read from there: neither
    # the daemon nor a worker holds the parse (tests/fs/test_huge_file.py).
    assert b"message 1199 lorem" in cat(session_dir / "transcript.md")
    assert cat(session_dir / "context.json") == parsed(file).rendered("context.json")
    entry = orjson.loads(cat(session_dir / "entries" / "000004af.json"))
    assert entry["id"] == "000004af" and entry["parentId"] == "000004ae"
    assert len(os.listdir(session_dir / "path")) == 1200
    assert file.read_bytes() == before
