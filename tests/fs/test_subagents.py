"""Acceptance: sub-agent sessions and the artifacts dir, through a real mount.

The agents' task tool writes each sub-agent run as ``<task-id>.jsonl`` into the
parent session's artifacts dir (``<project>/<stem>/``, next to tool outputs), and a
sub-agent's own runs into its artifacts dir in turn (spec 13). The mount shows them as
``<session>/subagents/<name>/`` (full session dirs) and the artifacts dir as
``<session>/artifacts/`` (read-only, byte for byte).
"""

from __future__ import annotations

import errno
import filecmp
import json
import os
import random
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.agent_messages import assistant, file_objects, make_session, user
from support.mount import Mount, MountFactory, background_mount, run, sessionfs
from support.write_helpers import append_raw_line
from support.write_setup import PROJECT, disk_ids, entry_id_of, errno_of, on_disk, read_ctl

from core import SessionManager

pytestmark = pytest.mark.fuse


@dataclass
class Family:
    """A parent session with two sub-agent runs (one of which ran one of its own), a
    tool output, a nested dir, and the hostile names an artifacts dir may hold."""

    agent: Path
    parent: Path
    artifacts: Path
    explore: Path
    review: Path
    check: Path  # a sub-agent of review

    @property
    def stem(self) -> str:
        return self.parent.name.removesuffix(".jsonl")


def _sub_agent(directory: Path, name: str, question: str, answer: str) -> Path:
    """A sub-agent session file, written by core, then given the task tool's name."""
    scratch = directory.parent / f".scratch-{name}"
    manager = SessionManager.create("/work/demo", scratch)
    with manager:
        manager.append_message(user(question))
        manager.append_message(assistant(answer))
        manager.ensure_on_disk()
    made = manager.get_session_file()
    assert made is not None
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}.jsonl"
    os.replace(made, target)
    shutil.rmtree(scratch)
    return target


def make_family(root: Path) -> Family:
    agent = root / "agent"
    parent = make_session(agent, project=PROJECT)
    artifacts = parent.with_suffix("")
    explore = _sub_agent(artifacts, "0-Explore", "find the flaky test", "it is test_race")
    review = _sub_agent(artifacts, "1-Review", "review the fix", "looks right")
    check = _sub_agent(artifacts / "1-Review", "0-Check", "run the suite", "all green")
    rng = random.Random(12)
    (artifacts / "bash-1.log").write_bytes(bytes(rng.getrandbits(8) for _ in range(70_001)))
    (artifacts / "outputs" / "deep").mkdir(parents=True)
    (artifacts / "outputs" / "deep" / "result.txt").write_text("deep result\n")
    (artifacts / "notes.jsonl").write_text('{"type": "message", "note": "no header"}\n')
    os.mkfifo(artifacts / "x.jsonl")
    (artifacts / "latest.log").symlink_to("bash-1.log")
    (artifacts / "escape").symlink_to("/etc/hostname")
    (artifacts / "climb").symlink_to("../../..")
    return Family(agent, parent, artifacts, explore, review, check)


@pytest.fixture
def family(tmp_path: Path) -> Family:
    return make_family(tmp_path)


@pytest.fixture
def mounted(family: Family, mount_factory: MountFactory) -> Mount:
    return mount_factory(family.agent)


def session_path(mount: Mount, family: Family) -> Path:
    return mount.path / "sessions" / PROJECT / family.stem


def test_subagents_are_full_session_dirs(family: Family, mounted: Mount) -> None:
    session = session_path(mounted, family)
    assert run("ls", session / "subagents").split() == ["0-Explore", "1-Review"]
    explore = session / "subagents" / "0-Explore"
    assert {"context.json", "transcript.md", "entries", "leaf", "append", "ctl"} <= set(
        os.listdir(explore)
    )
    context = json.loads(run("cat", explore / "context.json"))
    assert [m["role"] for m in context["messages"]] == ["user", "assistant"]
    assert (
        json.loads(run("cat", explore / "header.json"))["id"]
        == file_objects(family.explore)[0]["id"]
    )
    hits = run("grep", "-l", "test_race", *sorted(session.glob("subagents/*/transcript.md")))
    assert hits.split() == [str(explore / "transcript.md")]
    # a sub-agent's own sub-agent, one level further down
    nested = session / "subagents" / "1-Review" / "subagents"
    assert run("ls", nested).split() == ["0-Check"]
    assert "all green" in run("cat", nested / "0-Check" / "transcript.md")
    assert run("ls", nested / "0-Check" / "subagents") == ""


def test_hostile_names_are_skipped_and_logged_once(family: Family, mounted: Mount) -> None:
    session = session_path(mounted, family)
    for _ in range(2):
        assert os.listdir(session / "subagents") == ["0-Explore", "1-Review"]
        assert not (session / "subagents" / "notes").exists()  # header-less
        assert not (session / "subagents" / "x").exists()  # a FIFO: never opened
    log = mounted.log.read_text()
    assert log.count("notes.jsonl") == 1, log
    assert log.count("x.jsonl") == 1, log


def test_project_listing_shows_no_artifacts_dir_or_subagent_files(
    family: Family, mounted: Mount
) -> None:
    assert os.listdir(mounted.path / "sessions") == [PROJECT]
    assert os.listdir(mounted.path / "sessions" / PROJECT) == [family.stem]
    assert len(os.listdir(mounted.path / "recent")) == 1  # the project's own sessions


def test_append_and_leaf_through_a_subagent_dir(family: Family, mounted: Mount) -> None:
    explore = session_path(mounted, family) / "subagents" / "0-Explore"
    parent_before = family.parent.read_bytes()
    run("sh", "-c", f"echo hi > '{explore}/append/m.txt'")
    appended = on_disk(family.explore).get_entries()[-1]
    assert appended["message"]["role"] == "user"
    assert appended["message"]["content"][0]["text"].strip() == "hi"
    assert family.parent.read_bytes() == parent_before  # the parent is untouched
    first = disk_ids(family.explore)[0]
    run("ln", "-sfn", f"entries/{first}.json", explore / "leaf")
    assert entry_id_of(os.readlink(explore / "leaf")) == first
    assert read_ctl(explore)["leaf"] == first
    run("sh", "-c", f"echo 'explorer run' > '{explore}/title'")
    assert file_objects(family.explore)[0]["title"] == "explorer run"


def test_subagent_is_live(family: Family, mounted: Mount) -> None:
    transcript = session_path(mounted, family) / "subagents" / "0-Explore" / "transcript.md"
    assert "found it live" not in transcript.read_text()
    manager = SessionManager.open(family.explore)  # another writer: an agent resuming it
    with manager:
        manager.append_message(assistant("found it live"))
    deadline = time.monotonic() + 3
    while "found it live" not in transcript.read_text():
        assert time.monotonic() < deadline, "the append never showed up"
        time.sleep(0.05)


def test_artifacts_are_mirrored_byte_for_byte(
    family: Family, mounted: Mount, tmp_path: Path
) -> None:
    mirror = session_path(mounted, family) / "artifacts"
    assert sorted(os.listdir(mirror)) == [
        "0-Explore.jsonl",
        "1-Review",
        "1-Review.jsonl",
        "bash-1.log",
        "latest.log",
        "notes.jsonl",
        "outputs",
    ]  # no FIFO, no link leading out (escape, climb)
    log = family.artifacts / "bash-1.log"
    assert (
        subprocess.run(
            ["cat", mirror / "bash-1.log"], capture_output=True, timeout=30, check=True
        ).stdout
        == log.read_bytes()
    )
    assert os.stat(mirror / "bash-1.log").st_size == log.stat().st_size
    assert os.stat(mirror / "bash-1.log").st_mtime_ns == log.stat().st_mtime_ns
    assert os.readlink(mirror / "latest.log") == "bash-1.log"
    assert (mirror / "outputs" / "deep" / "result.txt").read_text() == "deep result\n"
    copy = tmp_path / "copy"
    run("cp", "-r", mirror, copy)
    expected = tmp_path / "expected"
    shutil.copytree(family.artifacts, expected, symlinks=True, ignore=_left_out)
    _assert_same_tree(copy, expected)


def _left_out(directory: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("x.jsonl", "escape", "climb")]


def _assert_same_tree(a: Path, b: Path) -> None:
    compared = filecmp.dircmp(a, b)
    assert not compared.left_only and not compared.right_only, (
        compared.left_only,
        compared.right_only,
    )
    for name in compared.common:
        left, right = a / name, b / name
        if right.is_symlink():
            assert os.readlink(left) == os.readlink(right), name
        elif right.is_dir():
            _assert_same_tree(left, right)
        else:
            assert left.read_bytes() == right.read_bytes(), name


def test_no_artifact_link_leads_out_of_the_mount(family: Family, mounted: Mount) -> None:
    """Issue 17: ``s -> .`` makes ``s/s/…`` stay where it is, so a target that reads
    as "stays inside" climbs out of the mount, up to the host's root."""
    artifacts, deep = family.artifacts, family.artifacts / "outputs" / "deep"
    (artifacts / "s").symlink_to(".")
    (artifacts / "x").symlink_to("s/" * 40 + "../" * 40 + "etc")
    (artifacts / "through").symlink_to("escape")  # via a link that leads out
    (artifacts / "back").symlink_to("outputs/../bash-1.log")  # '..' after a name
    (deep / "up").symlink_to("../../bash-1.log")  # climbs, but stays inside
    (deep / "s2").symlink_to("../../s")  # a link to the dot link: fine
    assert os.path.realpath(artifacts / "x") == "/etc"  # on disk it does lead out
    mirror = session_path(mounted, family) / "artifacts"
    names = run("ls", mirror).split()
    assert "s" in names and not {"x", "through", "back"} & set(names)
    assert run("ls", mirror / "outputs" / "deep").split() == ["result.txt", "s2", "up"]
    for path in ("x/passwd", "x", "through", "s/x/passwd", "s/s/through"):
        result = subprocess.run(["cat", mirror / path], capture_output=True, timeout=30)
        assert result.returncode != 0 and b"root:" not in result.stdout, path
    assert (mirror / "outputs" / "deep" / "up").read_bytes() == (
        artifacts / "bash-1.log"
    ).read_bytes()
    assert (mirror / "s" / "s" / "outputs" / "deep" / "s2" / "latest.log").exists()


def test_artifacts_refuse_writes(family: Family, mounted: Mount) -> None:
    mirror = session_path(mounted, family) / "artifacts"
    before = (family.artifacts / "bash-1.log").read_bytes()
    assert errno_of(lambda: (mirror / "new.txt").write_text("x")) in (errno.EPERM, errno.EACCES)
    assert errno_of(lambda: (mirror / "bash-1.log").write_bytes(b"x")) in (
        errno.EPERM,
        errno.EACCES,
    )
    assert errno_of(lambda: (mirror / "bash-1.log").unlink()) == errno.EPERM
    assert errno_of(lambda: (mirror / "outputs" / "more").mkdir()) == errno.EPERM
    assert errno_of(lambda: os.truncate(mirror / "bash-1.log", 0)) in (errno.EPERM, errno.EACCES)
    assert (family.artifacts / "bash-1.log").read_bytes() == before
    assert not (family.artifacts / "new.txt").exists()
    assert os.stat(mirror / "bash-1.log").st_mode & 0o222 == 0


def test_session_without_artifacts_has_empty_subagents(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = tmp_path / "agent"
    lone = make_session(agent, project=PROJECT)
    mount = mount_factory(agent)
    session = mount.path / "sessions" / PROJECT / lone.name.removesuffix(".jsonl")
    names = os.listdir(session)
    assert "subagents" in names and "artifacts" not in names
    assert os.listdir(session / "subagents") == []
    assert not (session / "artifacts").exists()


def test_by_id_resolves_subagent_sessions(family: Family, mounted: Mount) -> None:
    by_id = mounted.path / "by-id"
    explore_id = file_objects(family.explore)[0]["id"]
    check_id = file_objects(family.check)[0]["id"]
    assert explore_id in os.listdir(by_id) and check_id in os.listdir(by_id)
    assert (
        os.readlink(by_id / explore_id)
        == f"../sessions/{PROJECT}/{family.stem}/subagents/0-Explore"
    )
    assert os.readlink(by_id / check_id) == (
        f"../sessions/{PROJECT}/{family.stem}/subagents/1-Review/subagents/0-Check"
    )
    assert json.loads((by_id / check_id / "header.json").read_text())["id"] == check_id


def test_subagent_dir_follows_its_own_file_mode(family: Family, mounted: Mount) -> None:
    family.parent.chmod(0o644)  # shared ones (files core makes are private)
    family.review.chmod(0o644)
    family.explore.chmod(0o600)
    subagents = session_path(mounted, family) / "subagents"
    deadline = time.monotonic() + 3
    while stat.S_IMODE(os.stat(subagents / "0-Explore").st_mode) & 0o077:
        assert time.monotonic() < deadline, oct(os.stat(subagents / "0-Explore").st_mode)
        time.sleep(0.1)
    assert stat.S_IMODE(os.stat(subagents / "0-Explore" / "context.json").st_mode) & 0o077 == 0
    assert stat.S_IMODE(os.stat(subagents / "1-Review").st_mode) & 0o055 == 0o055


def test_mount_says_which_agent_dir(
    family: Family, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with background_mount(family.agent, tmp_path, monkeypatch) as (mnt, result):
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            f"sessionfs: mounted agent dir {family.agent} at {mnt}"
        ]
        assert sessionfs("umount", mnt).returncode == 0


def test_subagent_transcripts_in_transcripts_tree(family: Family, mounted: Mount) -> None:
    transcripts = mounted.path / "transcripts" / PROJECT
    assert sorted(os.listdir(transcripts)) == [family.stem, f"{family.stem}.md"]
    assert sorted(os.listdir(transcripts / family.stem)) == [
        "0-Explore.md",
        "1-Review",
        "1-Review.md",
    ]
    hits = run("grep", "-rl", "test_race", mounted.path / "transcripts").split()
    assert hits == [str(transcripts / family.stem / "0-Explore.md")]
    session = session_path(mounted, family)
    nested = transcripts / family.stem / "1-Review" / "0-Check.md"
    expected = session / "subagents" / "1-Review" / "subagents" / "0-Check" / "transcript.md"
    assert nested.read_bytes() == expected.read_bytes()
    assert "all green" in nested.read_text()


def test_search_hits_in_a_subagent_point_into_its_dir(family: Family, mounted: Mount) -> None:
    deadline = time.monotonic() + 20
    while not read_ctl(mounted.path).get("search", "").startswith("ready"):
        assert time.monotonic() < deadline, "the search index never got ready"
        time.sleep(0.1)
    lines = (mounted.path / "search" / "test_race").read_text().splitlines()
    assert len(lines) == 1, lines
    entry = lines[0].split("\t")[1]
    assert entry.startswith(f"sessions/{PROJECT}/{family.stem}/subagents/0-Explore/entries/")
    assert "test_race" in (mounted.path / entry).read_text()


def test_fork_of_a_subagent_is_a_sibling_subagent(family: Family, mounted: Mount) -> None:
    subagents = session_path(mounted, family) / "subagents"
    run("sh", "-c", f"echo fork > '{subagents}/0-Explore/ctl'")
    forked = Path(read_ctl(subagents / "0-Explore")["last_result"])
    assert forked.parent == subagents, forked
    assert forked.name in os.listdir(subagents)
    assert (family.artifacts / f"{forked.name}.jsonl").is_file()  # next to its origin
    assert "test_race" in (forked / "transcript.md").read_text()


def test_unknown_entry_types_in_a_subagent_are_shown(family: Family, mounted: Mount) -> None:
    last = disk_ids(family.check)[-1]
    append_raw_line(
        family.check,
        {
            "type": "mystery_kind",
            "id": "feed0001",
            "parentId": last,
            "timestamp": "2026-01-01T00:00:00.000Z",
        },
    )
    check = session_path(mounted, family) / "subagents" / "1-Review" / "subagents" / "0-Check"
    deadline = time.monotonic() + 3
    while "feed0001.json" not in os.listdir(check / "entries"):
        assert time.monotonic() < deadline, "the unknown entry never showed up"
        time.sleep(0.05)
    assert json.loads((check / "entries" / "feed0001.json").read_text())["type"] == "mystery_kind"
    assert "all green" in (check / "transcript.md").read_text()
