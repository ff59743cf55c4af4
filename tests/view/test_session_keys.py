"""Sub-agent sessions in the view: how a stem maps to files and mount paths
(`sessionfs.view.session_keys`), and what `AgentIndex` lists from an artifacts dir."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.session_keys import (
    artifacts_dir,
    is_valid_stem,
    mount_parts,
    session_file,
    session_of_node_key,
    stem_of_file,
)

ROOT = Path("/a/sessions")


def test_a_stem_maps_to_its_file_artifacts_dir_and_mount_path() -> None:
    assert session_file(ROOT, "p", "s/t/u") == ROOT / "p" / "s" / "t" / "u.jsonl"
    assert artifacts_dir(ROOT, "p", "s/t") == ROOT / "p" / "s" / "t"
    assert mount_parts("p", "s") == ("sessions", "p", "s")
    assert mount_parts("p", "s/t/u") == ("sessions", "p", "s", "subagents", "t", "subagents", "u")
    assert stem_of_file(ROOT, ROOT / "p" / "s" / "t.jsonl") == ("p", "s/t")
    assert stem_of_file(ROOT, ROOT / "p" / "s.jsonl") == ("p", "s")
    assert stem_of_file(ROOT, Path("/elsewhere/p/s.jsonl")) is None
    assert stem_of_file(ROOT, ROOT / "s.jsonl") is None


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (("sessions", "p", "s"), ("p", "s", 3)),
        (("sessions", "p", "s", "entries", "x.json"), ("p", "s", 3)),
        (("sessions", "p", "s", "subagents"), ("p", "s", 3)),  # the listing: the parent's
        (("sessions", "p", "s", "subagents", "t"), ("p", "s/t", 5)),
        (("sessions", "p", "s", "subagents", "t", "subagents", "u", "ctl"), ("p", "s/t/u", 7)),
        (("sessions", "p", "s", "artifacts", "subagents", "t"), ("p", "s", 3)),  # a plain dir
        (("sessions", "p"), None),
        (("by-id", "x", "y"), None),
    ],
)
def test_the_innermost_session_of_a_node_key(
    key: tuple[str, ...], expected: tuple[str, str, int] | None
) -> None:
    assert session_of_node_key(key) == expected


@pytest.mark.parametrize("stem", ["", "a//b", "a/..", "../a", "a/.", "a\x00b", "/".join("x" * 9)])
def test_stems_that_name_no_file_are_refused(stem: str) -> None:
    assert not is_valid_stem(stem)


def _session(path: Path, session_id: str) -> None:
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": "t", "cwd": "/w"}
    unknown = {"type": "mystery_kind", "id": "e1", "parentId": None, "timestamp": "t"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(header) + b"\n" + orjson.dumps(unknown) + b"\n")


def test_subagents_are_listed_from_the_artifacts_dir_only(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    _session(root / "p" / "s.jsonl", "parent")
    _session(root / "p" / "s" / "t.jsonl", "child")
    _session(root / "p" / "s" / "t" / "u.jsonl", "grandchild")
    (root / "p" / "s" / "notes.jsonl").write_text('{"type": "message"}\n')  # no header
    os.mkfifo(root / "p" / "s" / "pipe.jsonl")
    (root / "p" / "s" / "loop.jsonl").symlink_to("loop.jsonl")
    (root / "p" / "s" / "out.log").write_text("tool output\n")
    _session(root / "p" / "orphan" / "z.jsonl", "no parent file")  # a dir, not a session's
    # the same cwd under its old and its new project dir name: two projects, both listed
    _session(root / "--home-u-w--" / "old.jsonl", "old")
    _session(root / "-w" / "new.jsonl", "new")
    index = AgentIndex(tmp_path)
    assert index.projects() == ["--home-u-w--", "-w", "p"]
    assert [r.stem for r in index.sessions_in("p")] == ["s"]
    assert [(r.stem, r.name) for r in index.subagents_of("p", "s")] == [("s/t", "t")]
    assert [r.stem for r in index.subagents_of("p", "s/t")] == ["s/t/u"]
    assert index.subagents_of("p", "s/t/u") == []
    assert index.subagents_of("p", "../p/s") == []
    every = {r.session_id: r.stem for r in index.every_session()}
    assert every == {
        "old": "old",
        "new": "new",
        "parent": "s",
        "child": "s/t",
        "grandchild": "s/t/u",
    }
    ref = index.session("p", "s/t/u")
    assert ref is not None and ref.path == root / "p" / "s" / "t" / "u.jsonl"
