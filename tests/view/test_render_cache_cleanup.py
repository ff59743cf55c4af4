"""Cleaning the render cache: entries that can never be served again go, live ones and
anything the cache did not make stay, and nothing outside the cache's dir is touched."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support.agent_messages import make_session

from core import paths
from sessionfs.view.render_cache import CachedRender, FileIdentity, RenderCache
from sessionfs.view.render_cache_cleanup import clean_render_cache

SIZES = {"transcript.md": 5}


def key_of(agent: Path, session: Path) -> str:
    return str(session.relative_to(paths.sessions_root(agent)))


def stored(cache: RenderCache, agent: Path, session: Path) -> CachedRender:
    record = cache.store(key_of(agent, session), FileIdentity.of(os.stat(session)), SIZES, b"hello")
    assert record is not None
    return record


def test_only_entries_that_can_never_serve_again_are_removed(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    live, deleted, grown, corrupt = (make_session(agent, project=f"--p{n}--") for n in range(4))
    cache = RenderCache(tmp_path / "cache" / "renders")
    for session in (live, deleted, grown, corrupt):
        stored(cache, agent, session)
    deleted.unlink()
    with grown.open("ab") as f:
        f.write(b'{"type":"custom","id":"x","parentId":null,"timestamp":"2026-01-01T00:00:00Z"}\n')
    corrupt_file = cache.path_for(key_of(agent, corrupt))
    data = bytearray(corrupt_file.read_bytes())
    data[20] ^= 0xFF  # inside the meta: its CRC no longer matches
    corrupt_file.write_bytes(bytes(data))

    # things the cache did not make, or that a live writer may still rename
    foreign = cache.root / "notes.txt"
    foreign.write_text("mine")
    outside = tmp_path / "precious"
    outside.write_text("keep")
    planted = cache.root / ("a" * 40)
    planted.symlink_to(outside)
    fresh_temp = cache.root / ".tmp-writing"
    fresh_temp.write_bytes(b"half")
    old_temp = cache.root / ".tmp-dead"
    old_temp.write_bytes(b"left by a crash")
    hour_ago = time.time() - 7200
    os.utime(old_temp, (hour_ago, hour_ago))

    report = clean_render_cache(cache.root, paths.sessions_root(agent))

    remaining = set(os.listdir(cache.root))
    assert remaining == {
        cache.path_for(key_of(agent, live)).name,
        "notes.txt",
        planted.name,
        fresh_temp.name,
    }
    assert (report.kept, report.removed) == (1, 4)
    assert outside.read_text() == "keep" and planted.is_symlink()
    identity = FileIdentity.of(os.stat(live))
    assert cache.validate(key_of(agent, live), identity) is not None
    # a removed entry is a plain miss, and storing again works
    assert cache.validate(key_of(agent, grown), FileIdentity.of(os.stat(grown))) is None
    assert stored(cache, agent, grown).stored is not None


def test_a_misplaced_entry_is_removed(tmp_path: Path) -> None:
    """An intact entry under another entry's name (copied by hand) is never served:
    validation looks entries up by their key's name."""
    agent = tmp_path / "agent"
    one, two = make_session(agent, project="--a--"), make_session(agent, project="--b--")
    cache = RenderCache(tmp_path / "renders")
    first = stored(cache, agent, one)
    assert first.stored is not None
    target = cache.path_for(key_of(agent, two))
    target.write_bytes(first.stored[0].read_bytes())
    clean_render_cache(cache.root, paths.sessions_root(agent))
    assert not target.exists() and first.stored[0].exists()


def test_a_symlinked_or_missing_renders_dir_is_left_alone(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    session = make_session(agent)
    real = RenderCache(tmp_path / "elsewhere")
    stored(real, agent, session)
    session.unlink()  # its entry would be removed, if the dir were followed
    link = tmp_path / "renders"
    link.symlink_to(real.root)
    report = clean_render_cache(link, paths.sessions_root(agent))
    assert report.removed == 0 and len(os.listdir(real.root)) == 1
    assert clean_render_cache(tmp_path / "missing", paths.sessions_root(agent)).kept == 0
