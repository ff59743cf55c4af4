"""``sessionfs sync`` keeps every agent's sessions: the agent dir's, Claude Code's (with
its sub-agent files) and Codex's (live and archived rollouts, compressed or not), each
once, in the store's layout; an unchanged re-sync ships nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zstandard
from archive_helpers import default_archive, mirror_of, sync, tree_bytes
from support.other_agents import fake_home

from core.agent_homes import AgentHome
from sessionfs.store import sync as sync_module
from sessionfs.store.archive_sources import ArchiveFile
from sessionfs.store.dir_client import DirStoreClient
from sessionfs.store.state import SyncState
from sessionfs.store.sync import SyncEngine, SyncOptions
from sessionfs.store.url import DirStoreURL


def _claude_files(claude: Path) -> dict[str, bytes]:
    """Claude's files as the archive keeps them: its sessions' bytes, and each
    sub-agent's meta document as one line."""
    files = {
        f"agents/claude/{path.relative_to(claude).as_posix()}": path.read_bytes()
        for path in sorted((claude / "projects").rglob("*.jsonl"))
    }
    for meta in sorted((claude / "projects").rglob("subagents/*.meta.json")):
        name = f"agents/claude/{meta.relative_to(claude).as_posix()}"
        files[name] = meta.read_bytes().rstrip(b"\n") + b"\n"
    return files


def _keys(archive: Path) -> list[str]:
    return [item.key for item in DirStoreClient(DirStoreURL(archive)).list("machines/box/")]


def test_claude_and_codex_sessions_are_archived_byte_identical(tmp_path: Path) -> None:
    trees = fake_home(tmp_path)
    done = sync(trees.home)
    assert done.returncode == 0, done.stderr
    mirrored = tree_bytes(mirror_of(default_archive(trees.home), tmp_path / "c").machine_dir("box"))
    claude = _claude_files(trees.claude)
    assert any("/subagents/agent-" in name for name in claude)  # nested sub-agent
    assert any(name.endswith(".meta.json") for name in claude)  # and its meta
    assert any(name.endswith("/agent-f1a7.jsonl") for name in claude)  # flat, older layout
    assert {name: data for name, data in mirrored.items() if "/claude/" in name} == claude
    codex = {name: data for name, data in mirrored.items() if "/codex/" in name}
    rollout = trees.codex_rollout.relative_to(trees.codex).as_posix()
    assert codex[f"agents/codex/{rollout}"] == trees.codex_rollout.read_bytes()
    archived = (
        zstandard.ZstdDecompressor().decompressobj().decompress(trees.codex_archived.read_bytes())
    )
    stem = trees.codex_archived.name.removesuffix(".jsonl.zst")
    (where,) = [name for name in codex if stem in name]
    assert codex[where] == archived and where.startswith("agents/codex/sessions/")
    index = (trees.codex / "session_index.jsonl").read_bytes()
    assert codex["agents/codex/session_index.jsonl"] == index


def test_a_codex_rollout_moved_and_compressed_is_one_session(tmp_path: Path) -> None:
    trees = fake_home(tmp_path)
    assert sync(trees.home).returncode == 0
    before = _keys(default_archive(trees.home))
    live = trees.codex_rollout
    data = live.read_bytes()
    moved = trees.codex / "archived_sessions" / live.name
    moved.parent.mkdir(exist_ok=True)
    os.rename(live, moved)  # what Codex's archive does first
    assert sync(trees.home).returncode == 0
    assert _keys(default_archive(trees.home)) == before
    compressed = moved.with_name(moved.name + ".zst")
    compressed.write_bytes(zstandard.ZstdCompressor().compress(data))
    moved.unlink()  # then it compresses
    done = sync(trees.home)
    assert done.returncode == 0, done.stderr
    assert _keys(default_archive(trees.home)) == before  # not a second session, no new generation
    assert "shipped 0 segments" in done.stderr
    mirrored = tree_bytes(mirror_of(default_archive(trees.home), tmp_path / "c").machine_dir("box"))
    rel = f"agents/codex/{live.relative_to(trees.codex).as_posix()}"
    assert mirrored[rel] == data
    assert sum(data == body for body in mirrored.values()) == 1


def test_an_unchanged_resync_ships_nothing_and_a_grown_file_ships_its_new_lines(
    tmp_path: Path,
) -> None:
    trees = fake_home(tmp_path)
    assert sync(trees.home).returncode == 0
    archive = default_archive(trees.home)
    before = _keys(archive)
    again = sync(trees.home)
    assert again.returncode == 0 and "shipped 0 segments" in again.stderr
    assert _keys(archive) == before
    with trees.claude_session.open("ab") as grow:
        grow.write(b'{"type":"summary","summary":"one more line"}\n')
    grown = sync(trees.home)
    assert "shipped 1 segments" in grown.stderr, grown.stderr
    (new,) = set(_keys(archive)) - set(before)
    assert "/agents/claude/projects/" in new and "/g00000001/" in new


def test_an_unchanged_pass_opens_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trees = fake_home(tmp_path)
    homes = (AgentHome("claude", trees.claude), AgentHome("codex", trees.codex))
    state = SyncState(tmp_path / "state", "test", "box")
    client = DirStoreClient(DirStoreURL(tmp_path / "archive"))
    engine = SyncEngine(client, state, SyncOptions(trees.home / "agent", "box", agent_homes=homes))
    try:
        assert engine.sync_once().segments > 5
        opened: list[Path] = []
        real_open = sync_module.open_archive_file

        def counted_open(file: ArchiveFile) -> object:
            opened.append(file.path)
            return real_open(file)

        monkeypatch.setattr(sync_module, "open_archive_file", counted_open)
        assert engine.sync_once().segments == 0
        assert opened == []
        with trees.codex_subagent.open("ab") as grow:  # one changed file: opened, alone
            grow.write(b'{"type":"event_msg","payload":{"type":"x"}}\n')
        engine.sync_once()
        assert opened == [trees.codex_subagent]
    finally:
        state.close()


def test_a_compressed_rollout_of_two_frames_is_archived_whole(tmp_path: Path) -> None:
    """An archived rollout of two zstd frames (``zstd -c part >> file``), the first
    saying only its own size and compressing well, so that its sizes cannot tell it
    from one frame: the sync archives its whole text, not what the first frame says
    (its decompression is bounded by a ceiling, `most_text`, not by the header)."""
    trees = fake_home(tmp_path)
    first = b"".join(b'{"n":%d,"t":"again and again"}\n' % i for i in range(5000))
    second = b"".join(b'{"n":%d,"t":"and again"}\n' % i for i in range(5000, 9000))
    two = trees.codex_archived.with_name(
        "rollout-2025-01-03T00-00-00-0199b000-0000-7000-8000-0000000002f2.jsonl.zst"
    )
    compress = zstandard.ZstdCompressor().compress
    two.write_bytes(compress(first) + compress(second))
    done = sync(trees.home)
    assert done.returncode == 0, done.stderr
    mirrored = tree_bytes(mirror_of(default_archive(trees.home), tmp_path / "c").machine_dir("box"))
    kept = [data for name, data in mirrored.items() if "0000000002f2" in name]
    assert kept == [first + second], [len(data) for data in kept]
