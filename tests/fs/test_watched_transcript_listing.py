"""A warm listing of ``transcripts/<project>/`` (issue 26, point 5: greps at page-cache
speed): while the project dir is unchanged it is made on the event loop from the reused
listing (no listing, no thread hop), and while the watch sees no change of a session
file its transcript's readdirplus attributes are sent again without a stat; a changed
file gets new ones at once."""

from __future__ import annotations

import os
from pathlib import Path

import pyfuse3
import pytest
import trio
from test_listing_reuse import PROJECT, context, settled_project

from core.session_stat import session_stat
from sessionfs.fs.nodes import transcripts
from sessionfs.fs.nodes.base import WATCHED, MountContext, Node
from sessionfs.fs.nodes.session import ProjectDir
from sessionfs.fs.nodes.transcripts import TranscriptFile, TranscriptProjectDir
from sessionfs.fs.ops import SessionFsOperations
from sessionfs.fs.session_watch import SessionWatch
from sessionfs.view.agent_index import ProjectListing
from sessionfs.view.prerender import Prerenderer, render_transcript
from sessionfs.view.render_cache import FileIdentity


def listings_made(ctx: MountContext, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The projects listed from now on (`AgentIndex.listing_of`: the listing itself)."""
    listings: list[str] = []
    real_listing_of = ctx.index.listing_of

    def listing_of(name: str) -> ProjectListing:
        listings.append(name)
        return real_listing_of(name)

    monkeypatch.setattr(ctx.index, "listing_of", listing_of)
    return listings


def test_a_watched_transcript_is_listed_from_what_it_saw_until_its_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = settled_project(tmp_path, 2)
    ctx = context(tmp_path)
    sessions_root = ctx.index.sessions_root
    cache = tmp_path / "cache"

    def render(path: Path) -> None:
        key = str(path.relative_to(sessions_root))
        assert render_transcript(str(path), key, str(cache), want_bytes=False).rendered

    for path in sorted(project.glob("*.jsonl")):  # rendered before: a remount's cache dir
        render(path)
    renders = Prerenderer(sessions_root, cache)
    ctx.renders = renders
    listed = TranscriptProjectDir(ctx, ("transcripts", PROJECT))
    ops = SessionFsOperations(listed, read_only=True)
    watch = SessionWatch(sessions_root, ops)
    assert watch.start()
    ctx.watch = watch
    listings = listings_made(ctx, monkeypatch)
    stats: list[Path] = []

    def counted_stat(path: str | Path) -> os.stat_result:
        stats.append(Path(path))
        return session_stat(path)

    monkeypatch.setattr(transcripts, "session_stat", counted_stat)

    async def attrs(node: Node) -> pyfuse3.EntryAttributes:
        return await ops._listing_attrs(node, ops.table.inode_for(node))

    async def known(file: TranscriptFile) -> None:
        """As a remount finds it: the cache file validated (an open does this)."""
        assert await renders.validated(file.path, FileIdentity.of(os.stat(file.path)))

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            rows = await listed.children()
            assert listings == [PROJECT]  # the first listing: in a thread
            t0, t1 = (node for _, node in rows)
            assert isinstance(t0, TranscriptFile) and isinstance(t1, TranscriptFile)
            placeholder = await attrs(t0)
            assert placeholder.attr_timeout == 0 and not t0.listing_settled()  # not known yet
            await known(t0)
            await known(t1)
            exact = await attrs(t0)
            assert exact.st_size == len(await t0.content()) and exact.attr_timeout > 0
            assert t0.kernel_tier() is WATCHED and t0.listing_settled()
            await attrs(t1)
            kept, kept_t1 = await attrs(t0), await attrs(t1)  # made while settled: kept
            stats.clear()
            assert await listed.children() == rows  # the same nodes, made on the event loop
            assert listings == [PROJECT]
            assert await attrs(t0) is kept and await attrs(t1) is kept_t1
            assert stats == []  # no look at any session file
            with open(t0.path, "ab") as f:
                f.write(b"\n")
            await trio.sleep(0.2)  # the watch reads the event
            assert not t0.listing_settled()
            changed = await attrs(t0)
            assert changed is not kept and stats == [t0.path]  # one stat of the changed file
            assert changed.attr_timeout == 0  # its new transcript is not rendered yet
            render(t0.path)
            await known(t0)
            assert (await attrs(t0)).st_size == len(await t0.content())
            assert await attrs(t1) is kept_t1  # the other file did not change
            nursery.cancel_scope.cancel()

    try:
        trio.run(scenario)
    finally:
        watch.close()
        renders.close()


def test_an_unchanged_project_of_sessions_is_listed_without_a_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sessions/<project>/`` the same way: its reused listing is known with one stat."""
    project = settled_project(tmp_path, 2)
    listed = ProjectDir(context(tmp_path), ("sessions", PROJECT))
    listings = listings_made(listed.ctx, monkeypatch)

    async def scenario() -> None:
        rows = await listed.children()
        assert [name for name, _ in rows] == ["s0", "s1"] and listings == [PROJECT]
        assert await listed.children() == rows and listings == [PROJECT]
        (project / "s2.jsonl").write_bytes((project / "s0.jsonl").read_bytes())
        os.utime(project, ns=(1, 1))  # the dir changed (an mtime of its own, not racy)
        assert [name for name, _ in await listed.children()] == ["s0", "s1", "s2"]
        assert listings == [PROJECT, PROJECT]

    trio.run(scenario)
