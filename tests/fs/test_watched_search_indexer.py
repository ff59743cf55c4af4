"""The search indexer driven by the agent dir's inotify watch: what another process
appends is indexed from the watch's events, sub-agent files of a session that changed
lately are looked at on every tick, and the full pass (a stat of every session file,
which slows every request it runs beside) is left to a rare safety net.

Real `SearchView`, real `SessionWatch` on a real directory, real appends by other
processes; no FUSE.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest
import trio
from support.agent_messages import user_entry, write_header_session

from sessionfs.fs.search_indexer import FULL_PASS_INTERVAL, SearchIndexer
from sessionfs.fs.session_watch import SessionWatch
from sessionfs.view.search_view import SearchView

pytestmark = pytest.mark.timeout(60)


class NoSink:
    """The kernel side of the watch (nothing to invalidate without a mount)."""

    def key_changed(self, key: tuple[str, ...], name_too: bool) -> None:
        pass

    def subtree_changed(
        self, prefix: tuple[str, ...], keep_name: Callable[[str], bool] | None = None
    ) -> None:
        pass


def user_line(entry_id: str, text: str) -> bytes:
    return orjson.dumps(user_entry(entry_id, None, text))


def write_session(path: Path, session_id: str, text: str) -> None:
    write_header_session(path.parent, path.stem, session_id)
    with open(path, "ab") as f:
        f.write(user_line(f"{session_id}-1", text) + b"\n")


def append_by_another_process(path: Path, line: bytes) -> None:
    subprocess.run(
        ["sh", "-c", 'printf "%s\\n" "$1" >> "$2"', "sh", line.decode(), str(path)],
        check=True,
        timeout=10,
    )


def agent_dir(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    sessions = agent / "sessions"
    for n in range(5):
        write_session(sessions / "--p--" / f"s{n}.jsonl", f"s{n}", f"plain words {n}")
    write_session(sessions / "--q--" / "parent.jsonl", "parent", "the parent asks")
    write_session(sessions / "--q--" / "parent" / "1-helper.jsonl", "sub", "the helper starts")
    return agent


async def wait_for_hit(view: SearchView, word: str, seconds: float) -> float:
    """Seconds until ``word`` is found (fails after ``seconds``)."""
    started = time.monotonic()
    while not view.search(word):
        if time.monotonic() - started > seconds:
            raise AssertionError(f"{word!r} not indexed after {seconds} s")
        await trio.sleep(0.05)
    return time.monotonic() - started


Scenario = Callable[[Path, SearchView, SearchIndexer], Awaitable[None]]


def run_indexer(tmp_path: Path, watched: bool, scenario: Scenario) -> None:
    agent = agent_dir(tmp_path)
    view = SearchView(tmp_path / "cache", agent)
    watch = SessionWatch(agent / "sessions", NoSink())
    if watched:
        assert watch.start()

    async def main() -> None:
        indexer = SearchIndexer(view, watch=watch if watched else None)
        watch.listeners.append(indexer)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            nursery.start_soon(indexer.run)
            await indexer.built.wait()
            await scenario(agent / "sessions", view, indexer)
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    finally:
        view.close()


def test_appends_are_indexed_from_the_watch_without_full_passes(tmp_path: Path) -> None:
    async def scenario(sessions: Path, view: SearchView, indexer: SearchIndexer) -> None:
        assert indexer.full_pass_interval() > 10 * FULL_PASS_INTERVAL
        append_by_another_process(sessions / "--p--" / "s3.jsonl", user_line("x", "quokkas"))
        assert await wait_for_hit(view, "quokkas", 5) < 3
        # A new session in a new project dir (made before its watch could be) is found too.
        write_session(sessions / "--new--" / "n.jsonl", "n", "a wombat appears")
        await wait_for_hit(view, "wombat", 5)
        await trio.sleep(3 * FULL_PASS_INTERVAL)
        # the first build and the one look at everything the new project dir asked for
        assert indexer.full_passes == 2
        # ctl's "ready, N files, X MB" counts what is on disk now (from the index's rows)
        on_disk = list(sessions.rglob("*.jsonl"))
        assert view.progress.files_total == len(on_disk) == 8
        assert view.progress.bytes_total == sum(path.stat().st_size for path in on_disk)

    run_indexer(tmp_path, watched=True, scenario=scenario)


def test_a_subagent_of_a_session_that_changed_lately_is_indexed_as_it_writes(
    tmp_path: Path,
) -> None:
    async def scenario(sessions: Path, view: SearchView, indexer: SearchIndexer) -> None:
        parent = sessions / "--q--" / "parent.jsonl"
        helper = sessions / "--q--" / "parent" / "1-helper.jsonl"
        append_by_another_process(parent, user_line("p2", "delegating to a helper"))
        await wait_for_hit(view, "delegating", 5)
        # The sub-agent writes while its parent waits: no event for its file.
        append_by_another_process(helper, user_line("h2", "axolotl spotted"))
        assert await wait_for_hit(view, "axolotl", 5) < 3 * FULL_PASS_INTERVAL + 1
        assert indexer.full_passes == 1

    run_indexer(tmp_path, watched=True, scenario=scenario)


def test_without_a_watch_every_tick_is_a_full_pass(tmp_path: Path) -> None:
    async def scenario(sessions: Path, view: SearchView, indexer: SearchIndexer) -> None:
        assert indexer.full_pass_interval() == FULL_PASS_INTERVAL
        append_by_another_process(sessions / "--p--" / "s1.jsonl", user_line("x", "narwhals"))
        await wait_for_hit(view, "narwhals", 5)
        await trio.sleep(3 * FULL_PASS_INTERVAL + 0.5)
        assert indexer.full_passes >= 3

    run_indexer(tmp_path, watched=False, scenario=scenario)
