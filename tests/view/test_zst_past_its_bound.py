"""Another agent's archive that decompresses past its bound (`core.zstd_files.most_text`,
made 1 MB here: the real ceiling is 1 GB, too big for a test, and no setting lowers it
for a mount's daemon): the daemon's cache refuses it with ``EFBIG``, its reason in the
session's ``ctl`` and the root ``ctl``; a render worker says it is too big to hold;
the sync skips it saying why and archives the rest. Nothing of it is kept."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest
import trio
from support.codex_archives import archived_rollout, codex_cache
from support.other_agents import fake_home

import core.zstd_files
from core.agent_homes import AgentHome
from core.zstd_files import TextPastItsBound
from sessionfs.fs.agent_mounts import _root_ctl_notice
from sessionfs.fs.nodes.base import MountContext
from sessionfs.store.archive_sources import ArchiveFile, open_archive_file
from sessionfs.store.dir_client import DirStoreClient
from sessionfs.store.state import SyncState
from sessionfs.store.sync import SyncEngine, SyncOptions
from sessionfs.store.url import DirStoreURL
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.render_worker import TooBigToHold, _render

BOUND = 1 << 20
BOMB_WORDS = "a decompression bomb"


@pytest.fixture(autouse=True)
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core.zstd_files, "MOST_RATIO", 2)
    monkeypatch.setattr(core.zstd_files, "MOST_UNSAID", BOUND)


def bomb_rollout(codex: Path) -> Path:
    """A Codex rollout, archived: a session's first lines, then 16 MB of one message
    said again and again, compressed to a few KB."""
    path, size = archived_rollout(codex, True, prompts=1, filler=16 * BOUND)
    assert path.stat().st_size * 2 < BOUND < size
    return path


def test_the_daemon_refuses_it_saying_why_in_both_ctls(tmp_path: Path) -> None:
    path = bomb_rollout(tmp_path / "codex")
    index, cache = codex_cache(tmp_path / "codex")
    root = MountContext(index=index, sessions=cache, history=None, started_ns=0)  # type: ignore[arg-type]
    cache.refusal_listeners.append(_root_ctl_notice(root, "codex"))

    async def scenario() -> None:
        await trio.to_thread.run_sync(index.first_scan)
        (listed,) = await trio.to_thread.run_sync(index.all_sessions)
        with pytest.raises(WriteRejected) as refused:
            await cache.get(listed.project, listed.stem, warm="stats.json")
        assert refused.value.errno == errno.EFBIG
        assert refused.value.reason.startswith(f"{path.name}: ")
        assert BOMB_WORDS in refused.value.reason
        assert root.root_last_error is not None
        assert root.root_last_error.startswith("agents/codex/")
        assert root.root_last_error.endswith(refused.value.reason)
        assert cache.counts.loads == 0 and cache.peek(listed.project, listed.stem) is None

    trio.run(scenario)


def test_a_render_worker_says_it_is_too_big_to_hold(tmp_path: Path) -> None:
    path = bomb_rollout(tmp_path / "codex")
    with pytest.raises(TooBigToHold) as refused:
        _render(path, "codex", "transcript.md", None)
    assert str(refused.value).startswith("transcript.md: ") and BOMB_WORDS in str(refused.value)


def test_the_sync_skips_it_saying_why_and_archives_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trees = fake_home(tmp_path)
    bomb = bomb_rollout(trees.codex)
    identity = (bomb.stat().st_ino, bomb.stat().st_size, bomb.stat().st_mtime_ns)
    file = ArchiveFile("codex", "archived_sessions/x.jsonl", bomb, identity, compressed=True)
    with pytest.raises(TextPastItsBound) as refused, open_archive_file(file):
        pass
    assert refused.value.errno == errno.EFBIG and BOMB_WORDS in str(refused.value)

    homes = (AgentHome("claude", trees.claude), AgentHome("codex", trees.codex))
    state = SyncState(tmp_path / "state", "test", "box")
    client = DirStoreClient(DirStoreURL(tmp_path / "archive"))
    engine = SyncEngine(client, state, SyncOptions(trees.home / "agent", "box", agent_homes=homes))
    try:
        with caplog.at_level(logging.WARNING):
            assert engine.sync_once().segments > 5
    finally:
        state.close()
    said = [r.getMessage() for r in caplog.records if bomb.name in r.getMessage()]
    assert len(said) == 1 and BOMB_WORDS in said[0] and "unreadable" in said[0], said
    keys = [item.key for item in client.list("machines/box/")]
    stem = bomb.name.removesuffix(".jsonl.zst")
    assert not [key for key in keys if stem in key]
    assert [key for key in keys if trees.codex_archived.name.removesuffix(".jsonl.zst") in key]
