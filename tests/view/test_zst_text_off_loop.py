"""A ``.jsonl.zst``'s text size is learnt off the event loop: the agent index's scan
(a thread) reads each archive's frame header and keeps it on its `SessionRef`; a
loaded session learns it where it notes the file (a thread). What the event loop asks
at every ``stat``, ``lookup`` and first read (`SessionCache`'s load and renderable
check, `SessionRef.text_if_known` for ``context.json``'s) opens no file, even once
`core.zstd_files` no longer remembers the header (more archives than it keeps), and
the size still decides: a small archive of a text over the render limit is refused a
rendering, naming its text."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
import trio
from support.codex_archives import archived_rollout, codex_cache

import core.zstd_files
from core.safe_open import open_regular
from core.zstd_files import ASSUMED_RATIO
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_ref import SessionRef


@pytest.mark.parametrize("said", [True, False], ids=["header", "no-size"])
def test_the_event_loop_reads_no_header_and_the_text_size_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: bool
) -> None:
    """(Its size not said, the refusal says "about" the 20x guess.)"""
    path, text_size = archived_rollout(tmp_path / "codex", said)
    compressed = path.stat().st_size
    assert text_size > 4 * compressed
    if not said:
        text_size = compressed * ASSUMED_RATIO
    index, cache = codex_cache(tmp_path / "codex")
    cache.render_limit = 2 * compressed  # the file under it, its text over it
    opened: list[str] = []

    def open_off_the_loop(*args: Any, **kwargs: Any) -> Any:
        where = "the event loop" if trio.lowlevel.in_trio_run() else "a thread"
        opened.append(where)
        if where == "the event loop":
            raise AssertionError("a header read on the event loop")
        return open_regular(*args, **kwargs)

    monkeypatch.setattr(core.zstd_files, "open_regular", open_off_the_loop)
    core.zstd_files._remembered_text_size.cache_clear()

    async def scenario() -> None:
        await trio.to_thread.run_sync(index.first_scan)
        assert opened == ["a thread"]  # the scan's one header read
        core.zstd_files._remembered_text_size.cache_clear()  # (as if evicted since)
        (listed,) = await trio.to_thread.run_sync(index.all_sessions)
        key = (listed.project, listed.stem)
        known = index.session_if_known(*key)
        assert isinstance(known, SessionRef) and known.text is not None
        st = path.stat()
        assert known.text_if_known(st.st_size, st.st_mtime_ns) == known.text
        assert known.text.size == text_size and known.text.said == said
        session = await cache.get(*key, warm="stats.json")
        assert session.text_size == text_size
        with pytest.raises(WriteRejected) as refused:
            await cache.render(session, "stats.json")
        assert refused.value.errno == errno.EFBIG
        words = f"text is {'' if said else 'about '}{text_size / 2**20:.0f} MB"
        assert f"stats.json: the compressed session file's {words}" in refused.value.reason

    trio.run(scenario)
    assert "the event loop" not in opened


def test_stats_of_a_let_go_archive_over_the_limit_is_refused_without_loading_it(
    tmp_path: Path,
) -> None:
    """stats.json is made from the compact index only of an xcsh session: a Codex
    archive over the render limit, let go since it was loaded, is refused at once,
    not decompressed into the cache dir and indexed again only to be refused."""
    path, _ = archived_rollout(tmp_path / "codex", True)
    index, cache = codex_cache(tmp_path / "codex")
    cache.render_limit = 2 * path.stat().st_size  # the file under it, its text over it

    async def scenario() -> None:
        await trio.to_thread.run_sync(index.first_scan)
        (listed,) = await trio.to_thread.run_sync(index.all_sessions)
        session = await cache.get(listed.project, listed.stem, warm="stats.json")
        session.dehydrate()  # let go (the cache's eviction of it)
        loads = cache.counts.loads
        with pytest.raises(WriteRejected) as refused:
            await cache.render(session, "stats.json")
        assert refused.value.errno == errno.EFBIG and "stats.json: " in refused.value.reason
        assert cache.counts.loads == loads and not session.is_loaded

    trio.run(scenario)
