"""`AgentIndex.listing_of`: a project's listing is reused while its dir's mtime stays,
and taken again as soon as a file is created, renamed or deleted in it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support.agent_messages import write_header_session

from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.session_ids import RACY_NS

PROJECT = "--work-p--"


def settle(directory: Path) -> None:
    """Date the dir's mtime back past `RACY_NS`, as for a dir not touched lately."""
    old = time.time_ns() - 2 * RACY_NS
    os.utime(directory, ns=(old, old))


def stems(index: AgentIndex) -> list[str]:
    return [ref.stem for ref in index.listing_of(PROJECT).refs]


def test_a_settled_dir_is_listed_once_until_its_mtime_moves(tmp_path: Path) -> None:
    project = tmp_path / "sessions" / PROJECT
    for n in range(3):
        write_header_session(project, f"s{n}", f"id-{n}")
    settle(project)
    index = AgentIndex(tmp_path)
    first = index.listing_of(PROJECT)
    assert [ref.stem for ref in first.refs] == ["s0", "s1", "s2"]
    assert index.listing_of(PROJECT) is first  # one stat of the dir, no file read
    with (project / "s1.jsonl").open("ab") as fh:
        fh.write(b"{}\n")  # an append moves the file's mtime, not the dir's
    assert index.listing_of(PROJECT) is first
    write_header_session(project, "s3", "id-3")
    assert stems(index) == ["s0", "s1", "s2", "s3"]
    (project / "s0.jsonl").unlink()
    assert stems(index) == ["s1", "s2", "s3"]


def test_a_dir_changed_lately_is_listed_every_time(tmp_path: Path) -> None:
    # Its mtime may not move on a second change within the filesystem's granularity.
    project = tmp_path / "sessions" / PROJECT
    write_header_session(project, "s0", "id-0")
    index = AgentIndex(tmp_path)
    first = index.listing_of(PROJECT)
    assert first.settled_mtime_ns is None
    assert index.listing_of(PROJECT) is not first


def test_a_missing_or_invalid_project_lists_nothing(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    index = AgentIndex(tmp_path)
    assert index.listing_of(PROJECT).refs == []
    assert index.listing_of("..").refs == []
    project = tmp_path / "sessions" / PROJECT
    write_header_session(project, "s0", "id-0")
    assert stems(index) == ["s0"]


def test_the_projects_are_reused_while_the_sessions_root_is_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    for name in ("--a--", "--b--"):
        write_header_session(root / name, "s0", "id-0")
    index = AgentIndex(tmp_path)
    assert index.reused_projects() is None  # never listed
    assert index.listed_projects() == ("--a--", "--b--")
    assert index.reused_projects() is None  # the root changed lately: not settled
    settle(root)
    assert index.listed_projects() == ("--a--", "--b--")
    assert index.reused_projects() == ("--a--", "--b--")  # one stat, no listing
    write_header_session(root / "--c--", "s0", "id-0")  # a new project moves the mtime
    assert index.reused_projects() is None
    assert index.listed_projects() == ("--a--", "--b--", "--c--")
    settle(root)
    index.listed_projects()
    (root / "--a--").rename(root / "--z--")
    assert index.reused_projects() is None
    assert index.listed_projects() == ("--b--", "--c--", "--z--")


def test_an_index_listing_projects_its_own_way_never_reuses_them(tmp_path: Path) -> None:
    class Merged(AgentIndex):  # as another agent's index or one merging an archive
        session_paths_fixed = True

        def projects(self) -> list[str]:
            return sorted({*super().projects(), "--elsewhere--"})

    write_header_session(tmp_path / "sessions" / "--a--", "s0", "id-0")
    settle(tmp_path / "sessions")
    index = Merged(tmp_path)
    assert index.listed_projects() == ("--a--", "--elsewhere--")
    assert index.reused_projects() is None
