"""``by-id/``'s id map (`SessionIdIndex`): after the first sweep a lookup costs a stat,
not a listing; a dir is listed again only when it changed; misses sweep at most once
per interval; the names are the ones a full listing gives."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support.agent_messages import write_header_session

from core import paths
from sessionfs.view import agent_index, session_ids
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.names import encode_name, unique_names

PROJECTS = 4
PER_PROJECT = 50
LONG_AGO = 1_000_000_000  # seconds since the epoch: any dir this old is settled


def settle(root: Path) -> None:
    """Date every dir under (and including) ``root`` long ago, as an agent dir whose
    dirs last changed a while back (freshly made dirs are listed again each sweep)."""
    for directory, _dirs, _files in os.walk(root):
        os.utime(directory, (LONG_AGO, LONG_AGO))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    root = paths.sessions_root(tmp_path)
    for p in range(PROJECTS):
        for s in range(PER_PROJECT):
            stem = f"2026-01-01T00-00-{s:02d}_id-{p}-{s}"
            write_header_session(root / f"--p{p}--", stem, f"id-{p}-{s}")
    # a sub-agent session, and a duplicate id in another project
    write_header_session(root / "--p0--" / "2026-01-01T00-00-00_id-0-0", "task-1", "sub-1")
    write_header_session(root / "--p3--", "2026-01-02T00-00-00_dup", "id-1-1")
    settle(root)
    return tmp_path


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every directory the agent index lists (``os.scandir`` in `agent_index`)."""
    seen: list[str] = []
    real = os.scandir

    def counting(path: str | Path) -> object:
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(agent_index.os, "scandir", counting)
    return seen


@pytest.fixture
def dir_stats(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every dir mtime a sweep reads."""
    seen: list[str] = []
    real: Callable[..., int | None] = session_ids._mtime_ns

    def counting(path: str, follow: bool = False) -> int | None:
        seen.append(path)
        return real(path, follow)

    monkeypatch.setattr(session_ids, "_mtime_ns", counting)
    return seen


def make_index(agent: Path) -> tuple[session_ids.SessionIdIndex, Clock]:
    clock = Clock()
    index = AgentIndex(agent)
    index.ids = session_ids.SessionIdIndex(index, clock)
    return index.ids, clock


def test_repeated_lookups_list_nothing_after_the_first(agent: Path, scans: list[str]) -> None:
    ids, clock = make_index(agent)
    assert ids.resolve("id-0-0") is not None
    first = len(scans)
    assert first == 1 + PROJECTS + 1  # the root, each project, one artifacts dir
    for _round in range(3):
        for p in range(PROJECTS):
            for s in range(PER_PROJECT):
                ref = ids.resolve(f"id-{p}-{s}")
                assert ref is not None and ref.session_id == f"id-{p}-{s}"
        assert ids.resolve("sub-1") is not None
        clock.now += 10  # sweeps happen, but no dir changed: nothing is listed
        assert ids.resolve("no-such-id") is None
    assert len(scans) == first


def test_misses_sweep_at_most_once_per_interval(
    agent: Path, scans: list[str], dir_stats: list[str]
) -> None:
    ids, clock = make_index(agent)
    assert ids.resolve("nope") is None
    listed, stats = len(scans), len(dir_stats)
    for _ in range(500):
        assert ids.resolve("nope") is None
        assert ids.resolve("also-nope") is None
    assert (len(scans), len(dir_stats)) == (listed, stats)  # no sweep inside the interval
    clock.now += session_ids.MISS_SWEEP_SECONDS
    assert ids.resolve("nope") is None
    assert len(dir_stats) == 2 * stats  # one sweep: root, projects, artifacts dir
    assert len(scans) == listed


def test_a_new_session_is_found_by_listing_only_its_project(agent: Path, scans: list[str]) -> None:
    ids, clock = make_index(agent)
    assert ids.resolve("fresh") is None
    before = len(scans)
    project = paths.sessions_root(agent) / "--p2--"
    write_header_session(project, "2026-03-01T00-00-00_fresh", "fresh")
    clock.now += session_ids.MISS_SWEEP_SECONDS
    ref = ids.resolve("fresh")
    assert ref is not None and (ref.project, ref.stem) == ("--p2--", "2026-03-01T00-00-00_fresh")
    assert scans[before:] == [str(project)]


def test_a_deleted_or_rewritten_session_is_noticed_at_once(agent: Path) -> None:
    ids, _clock = make_index(agent)
    root = paths.sessions_root(agent)
    gone = ids.resolve("id-1-5")
    assert gone is not None
    gone.path.unlink()
    assert ids.resolve("id-1-5") is None  # the clock did not move: a known name checks
    # replaced (the agents' atomic rewrite) by a file with another id, the dir's
    # mtime unmoved (a coarse timestamp): the stat sees the new inode
    rewritten = root / "--p1--" / "2026-01-01T00-00-06_id-1-6.jsonl"
    assert ids.resolve("id-1-6") is not None
    replacement = write_header_session(agent, "replacement", "renamed-6")
    os.replace(replacement, rewritten)
    os.utime(rewritten.parent, (LONG_AGO, LONG_AGO))
    assert ids.resolve("id-1-6") is None
    renamed = ids.resolve("renamed-6")
    assert renamed is not None and renamed.path == rewritten


def test_prefixes_resolve_when_unique(agent: Path) -> None:
    ids, _clock = make_index(agent)
    one = ids.resolve("ID-2-9")  # case-insensitive; no other id starts with "id-2-9"
    assert one is not None and one.session_id == "id-2-9"
    assert ids.resolve("ID-2-4") is None  # id-2-4, id-2-40 .. id-2-49
    assert ids.resolve("id-2-1") is not None  # exact listed name wins over prefixes
    assert ids.resolve("id-2-") is None  # ambiguous
    stem = ids.resolve("2026-01-02")  # a file-stem prefix
    assert stem is not None and stem.project == "--p3--"
    assert ids.resolve("") is None


def test_names_match_a_full_listing(agent: Path) -> None:
    ids, _clock = make_index(agent)
    index = AgentIndex(agent)
    refs = [r for r in index.every_session() if r.session_id]
    expected = unique_names([encode_name(r.session_id) for r in refs])
    listed = ids.listing()
    assert [name for name, _ in listed] == expected
    assert [(r.project, r.stem) for _, r in listed] == [(r.project, r.stem) for r in refs]
    assert "id-1-1~2" in expected  # the duplicate id, second in listing order
    dup = ids.resolve("id-1-1~2")
    assert dup is not None and dup.project == "--p3--"


def test_a_removed_project_and_subagent_dir_are_forgotten(agent: Path) -> None:
    ids, clock = make_index(agent)
    root = paths.sessions_root(agent)
    assert ids.resolve("sub-1") is not None
    artifacts = root / "--p0--" / "2026-01-01T00-00-00_id-0-0"
    (artifacts / "task-1.jsonl").unlink()
    artifacts.rmdir()
    for f in (root / "--p3--").iterdir():
        f.unlink()
    (root / "--p3--").rmdir()
    clock.now += session_ids.MISS_SWEEP_SECONDS
    assert ids.resolve("sub-1") is None
    assert ids.resolve("id-3-0") is None
    assert all(r.project != "--p3--" and "/" not in r.stem for _, r in ids.listing())


def test_known_names_resolve_without_a_thread(agent: Path, dir_stats: list[str]) -> None:
    """`resolve_known` (the event loop's path) answers a known id with one stat and
    leaves everything else to `resolve`: unknown names, files it has to read."""
    ids, clock = make_index(agent)
    assert ids.resolve_known("id-0-1") is None  # nothing swept yet
    assert ids.resolve("id-0-1") is not None
    swept = len(dir_stats)
    clock.now += 10
    known = ids.resolve_known("id-2-3")
    assert known is not None and known.session_id == "id-2-3"
    assert ids.resolve_known("no-such-id") is None
    assert len(dir_stats) == swept  # never sweeps
    replaced = write_header_session(agent, "replacement", "id-2-3")
    os.replace(replaced, known.path)  # a new inode: its header must be read first
    assert ids.resolve_known("id-2-3") is None
    again = ids.resolve("id-2-3")
    assert again is not None and again.path == known.path
