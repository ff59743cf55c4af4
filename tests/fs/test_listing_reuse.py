"""A warm listing of ``sessions/<project>/`` (issue 19, big listings): while the project
dir is unchanged the same session-dir nodes are handed out again, and once their
listing's stat is past `FRESH_INTERVAL` the ops layer sends the readdirplus attributes
it made for them before; a session loaded since, or a changed dir, gets new ones."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pyfuse3
import pytest
import trio
from support.agent_messages import write_header_session

from sessionfs.fs.nodes.base import WATCHED, MountContext, Node
from sessionfs.fs.nodes.session import ProjectDir, SessionDir
from sessionfs.fs.ops import SessionFsOperations
from sessionfs.fs.session_watch import SessionWatch
from sessionfs.view.agent_index import AgentIndex, SessionRef
from sessionfs.view.history import HistoryView
from sessionfs.view.loaded_session import FRESH_INTERVAL
from sessionfs.view.session_cache import SessionCache
from sessionfs.view.session_ids import RACY_NS

PROJECT = "--work-p--"


def settled_project(agent: Path, sessions: int) -> Path:
    project = agent / "sessions" / PROJECT
    for n in range(sessions):
        write_header_session(project, f"s{n}", f"id-{n}")
    old = time.time_ns() - 2 * RACY_NS
    os.utime(project, ns=(old, old))
    return project


def context(agent: Path) -> MountContext:
    index = AgentIndex(agent)
    return MountContext(
        index=index,
        sessions=SessionCache(index, 1 << 20),
        history=HistoryView(agent / "history.db"),
        started_ns=time.time_ns(),
    )


def session_dirs(rows: list[tuple[str, Node]]) -> list[SessionDir]:
    dirs = [node for _, node in rows]
    assert all(isinstance(node, SessionDir) for node in dirs)
    return dirs  # type: ignore[return-value]


def age(dirs: list[SessionDir]) -> None:
    """As if the listing had been taken longer than `FRESH_INTERVAL` ago."""
    for node in dirs:
        node.ref_at -= 2 * FRESH_INTERVAL


def stats_taken(ctx: MountContext, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The stems whose session file the nodes stat from now on (`SessionCache.ref`)."""
    looked: list[str] = []
    real = ctx.sessions.ref

    async def ref(project: str, stem: str) -> SessionRef | None:
        looked.append(stem)
        return await real(project, stem)

    monkeypatch.setattr(ctx.sessions, "ref", ref)
    return looked


def test_an_unchanged_project_hands_out_the_same_nodes(tmp_path: Path) -> None:
    project = settled_project(tmp_path, 3)
    ctx = context(tmp_path)
    listed = ProjectDir(ctx, ("sessions", PROJECT))

    async def scenario() -> None:
        first = await listed.children()
        assert [name for name, _ in first] == ["s0", "s1", "s2"]
        assert await listed.children() is first
        assert await ProjectDir(ctx, ("sessions", PROJECT)).children() is first
        write_header_session(project, "s3", "id-3")
        again = await listed.children()
        assert [name for name, _ in again] == ["s0", "s1", "s2", "s3"]
        assert not {id(node) for _, node in again} & {id(node) for _, node in first}
        shutil.rmtree(project)
        assert await listed.children() == []
        assert listed.key not in ctx.listed_children  # a removed project pins no node

    trio.run(scenario)


def test_a_session_dir_is_settled_once_its_listing_is_old_and_while_not_loaded(
    tmp_path: Path,
) -> None:
    settled_project(tmp_path, 2)
    ctx = context(tmp_path)

    async def scenario() -> None:
        dirs = session_dirs(await ProjectDir(ctx, ("sessions", PROJECT)).children())
        assert not any(node.listing_settled() for node in dirs)  # exact for a moment
        age(dirs)
        assert all(node.listing_settled() for node in dirs)
        await ctx.sessions.get(PROJECT, "s1")
        assert [node.listing_settled() for node in dirs] == [True, False]
        looked_up = SessionDir(ctx, ("sessions", PROJECT, "s0"), None)
        assert not looked_up.listing_settled()  # no listing's stat to stand by

    trio.run(scenario)


def test_ops_sends_the_attributes_it_made_for_a_settled_node_again(tmp_path: Path) -> None:
    settled_project(tmp_path, 2)
    ctx = context(tmp_path)
    listed = ProjectDir(ctx, ("sessions", PROJECT))
    ops = SessionFsOperations(listed, read_only=True)

    async def attrs(node: Node) -> pyfuse3.EntryAttributes:
        return await ops._listing_attrs(node, ops.table.inode_for(node))

    async def scenario() -> None:
        s0, s1 = session_dirs(await listed.children())
        fresh = await attrs(s0)
        assert fresh.attr_timeout > 0  # the listing's own stat, exact for a moment
        assert await attrs(s0) is not fresh
        age([s0, s1])
        kept = await attrs(s0)
        assert kept.attr_timeout == 0  # past FRESH_INTERVAL: the kernel asks again
        assert s0.ref is not None and kept.st_mtime_ns == s0.ref.mtime_ns
        assert await attrs(s0) is kept
        other = SessionDir(ctx, s0.key, s0.ref, s0.ref_at)  # a lookup's newer node
        assert await attrs(other) is not kept
        first_s1 = await attrs(s1)
        await ctx.sessions.get(PROJECT, "s1")  # loaded: answers from memory
        assert await attrs(s1) is not first_s1

    trio.run(scenario)


def test_a_getattr_looks_at_the_session_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = settled_project(tmp_path, 1)
    ctx = context(tmp_path)
    looked = stats_taken(ctx, monkeypatch)

    async def scenario() -> None:
        (s0,) = session_dirs(await ProjectDir(ctx, ("sessions", PROJECT)).children())
        age([s0])
        (project / "s0.jsonl").chmod(0o600)
        st = await s0.stat()
        shown = await s0.permissions()
        assert looked == ["s0"]  # one stat for both, not the listing's old one
        assert st.mtime_ns == (project / "s0.jsonl").stat().st_mtime_ns
        assert shown.mask & 0o077 == 0  # the mode as it is now

    trio.run(scenario)


def test_a_watched_session_dir_answers_from_its_listing_until_its_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = settled_project(tmp_path, 2)
    ctx = context(tmp_path)
    listed = ProjectDir(ctx, ("sessions", PROJECT))
    ops = SessionFsOperations(listed, read_only=True)
    watch = SessionWatch(ctx.index.sessions_root, ops)
    assert watch.start()
    ctx.watch = watch
    looked = stats_taken(ctx, monkeypatch)

    async def attrs(node: Node) -> pyfuse3.EntryAttributes:
        return await ops._listing_attrs(node, ops.table.inode_for(node))

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            s0, s1 = session_dirs(await listed.children())
            assert s0.kernel_tier() is WATCHED and s0.listing_settled()
            kept = await attrs(s0)
            assert kept.attr_timeout == WATCHED.attr_timeout  # exact, kept for long
            kept_s1 = await attrs(s1)
            await trio.sleep(FRESH_INTERVAL)  # past it: makes no difference now
            assert await attrs(s0) is kept and looked == []
            with open(project / "s0.jsonl", "ab") as f:
                f.write(b"\n")
            (project / "s0.jsonl").chmod(0o600)
            await trio.sleep(0.2)  # the watch reads the events
            assert not s0.listing_settled()
            changed = await attrs(s0)
            assert looked == ["s0"]  # one stat of the changed file
            assert changed.st_mtime_ns == (project / "s0.jsonl").stat().st_mtime_ns
            assert changed.st_mode & 0o077 == 0 and changed.attr_timeout == WATCHED.attr_timeout
            assert s0.listing_settled()  # the new stat stands while the file stays
            again = await attrs(s0)
            assert again.st_mtime_ns == changed.st_mtime_ns and looked == ["s0"]
            assert await attrs(s0) is again  # kept again
            assert await attrs(s1) is kept_s1  # the other file did not change
            await ctx.sessions.get(PROJECT, "s1")  # loaded: the file's attributes still
            assert s1.listing_settled() and await attrs(s1) is kept_s1
            with open(project / "s1.jsonl", "ab") as f:
                f.write(b"\n")
            await trio.sleep(0.2)
            assert (await s1.stat()).mtime_ns == (project / "s1.jsonl").stat().st_mtime_ns
            assert await attrs(s1) is not kept_s1
            nursery.cancel_scope.cancel()

    trio.run(scenario)
