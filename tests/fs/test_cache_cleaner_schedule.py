"""The render cache's cleaning pass gives way to requests, as the search indexer does:
it waits for a quiet moment and runs in a thread at a lower priority."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from sessionfs.fs import cache_cleaner
from sessionfs.fs.foreground import Foreground

pytestmark = pytest.mark.timeout(30)

QUIET = 0.1


def test_the_cleaning_pass_waits_for_a_quiet_moment_and_runs_niced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[tuple[float, int]] = []

    def recording_clean(cache_root: Path, sessions_root: Path) -> None:
        thread = threading.get_native_id()
        passes.append((time.monotonic(), os.getpriority(os.PRIO_PROCESS, thread)))

    monkeypatch.setattr(cache_cleaner, "clean_render_cache", recording_clean)
    renders = SimpleNamespace(cache_root=tmp_path / "renders", sessions_root=tmp_path)
    foreground = Foreground(quiet_seconds=QUIET, max_defer=10)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            foreground.started()  # a request is being served as the mount comes up
            nursery.start_soon(cache_cleaner.keep_render_cache_clean, renders, 3600.0, foreground)
            await trio.sleep(0.4)
            assert passes == [], "the cleaning pass ran while a request was served"
            foreground.finished()
            ended = time.monotonic()
            with trio.fail_after(5):
                while not passes:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        started, niceness = passes[0]
        assert started >= ended + QUIET - 0.01
        assert niceness > mine

    trio.run(scenario)
