"""Acceptance: hostile files never take the mount down; odd names are encoded."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from support.agent_messages import user_entry
from support.mount import Mount, MountFactory, run

pytestmark = pytest.mark.fuse

HEADER = {"type": "session", "version": 3, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"}


def write(path: Path, *objs: object, raw: bytes = b"") -> None:
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in objs) + raw)


def hostile_agent(root: Path) -> Path:
    agent = root / "agent"
    p = agent / "sessions" / "--hostile--"
    p.mkdir(parents=True)
    (p / "junk.jsonl").write_bytes(os.urandom(3000))
    (p / "empty.jsonl").write_bytes(b"")
    write(p / "noheader.jsonl", user_entry("aaaaaaaa", None))
    write(
        p / "dupids.jsonl",
        {**HEADER, "id": "dup"},
        user_entry("11111111", None, "first"),
        user_entry("11111111", "11111111", "second"),
        user_entry("11111111", None, "third"),
    )
    write(
        p / "names.jsonl",
        {**HEADER, "id": "na/mes"},
        user_entry("a/b", None),
        user_entry(".", "a/b"),
        user_entry("..", "."),
        user_entry("50%", ".."),
        user_entry("", "50%"),
        user_entry(7, ""),
        {
            "type": "label",
            "id": "lab1",
            "parentId": "50%",
            "targetId": "a/b",
            "label": "x/y",
            "timestamp": "2026-01-01T00:00:02.000Z",
        },
        {
            "type": "label",
            "id": "lab2",
            "parentId": "lab1",
            "targetId": ".",
            "label": "..",
            "timestamp": "2026-01-01T00:00:02.000Z",
        },
    )
    write(
        p / "cycle.jsonl",
        {**HEADER, "id": "cycle"},
        user_entry("c1", "c2"),
        user_entry("c2", "c1"),
        user_entry("c3", "c3"),
        user_entry("c4", "missing"),
    )
    write(
        p / "garbage-lines.jsonl",
        {**HEADER, "id": "garbage"},
        user_entry("g1", None),
        raw=b'{not json\n\xff\xfe\x00binary\n[1,2,3]\n"string"\n'
        + orjson.dumps(user_entry("g2", "g1"))
        + b'\n{"type":"message","id":"torn',
    )
    write(
        p / "weird-types.jsonl",
        {**HEADER, "id": "weird"},
        {"type": "message", "id": "w1", "parentId": None, "timestamp": 5, "message": "str"},
        {"type": "compaction", "id": "w2", "parentId": "w1", "firstKeptEntryId": 3},
        {
            "type": "message",
            "id": "w3",
            "parentId": "w2",
            "message": {
                "role": None,
                "content": [1, None, {"type": "image", "data": 3}, {"type": "toolCall"}],
            },
        },
        {"id": "w4", "parentId": "w3"},
        {"type": "branch_summary", "id": "w5", "parentId": "w4", "summary": ["not", "a", "string"]},
    )
    (p / "dir.jsonl").mkdir()
    (p / "link.jsonl").symlink_to("/etc/passwd")
    (agent / "sessions" / "not-a-dir.jsonl").write_text("x")
    (agent / "blobs").mkdir()
    (agent / "blobs" / "not-a-sha").write_text("x")
    return agent


def test_hostile_files_never_take_the_mount_down(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = hostile_agent(tmp_path)
    mount: Mount = mount_factory(agent)
    project = mount.path / "sessions" / "--hostile--"
    listed = sorted(os.listdir(project))
    assert listed == ["cycle", "dupids", "garbage-lines", "names", "weird-types"]
    run("find", mount.path)
    run("grep", "-r", "-c", "e", mount.path / "sessions", check=False)
    for dirpath, _dirs, files in os.walk(mount.path / "sessions"):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink():
                assert os.stat(path).st_size == len(path.read_bytes())
    assert mount.alive()
    assert os.listdir(mount.path / "blobs") == []


def test_duplicate_and_hostile_ids_get_encoded_names(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount: Mount = mount_factory(hostile_agent(tmp_path))
    project = mount.path / "sessions" / "--hostile--"
    assert os.listdir(project / "dupids" / "entries") == [
        "11111111.json",
        "11111111~2.json",
        "11111111~3.json",
    ]
    second = orjson.loads((project / "dupids" / "entries" / "11111111~2.json").read_bytes())
    assert second["message"]["content"] == "second"
    names = os.listdir(project / "names" / "entries")
    assert names == [
        "a%2Fb.json",
        "%2E.json",
        "%2E%2E.json",
        "50%25.json",
        "~4.json",
        "~5.json",
        "lab1.json",
        "lab2.json",
    ]
    labels = project / "names" / "labels"
    assert sorted(os.listdir(labels)) == ["%2E%2E", "x%2Fy"]
    assert os.readlink(labels / "x%2Fy") == "../entries/a%2Fb.json"
    assert orjson.loads((labels / "%2E%2E").read_bytes())["id"] == "."
    assert "na%2Fmes" in os.listdir(mount.path / "by-id")
    assert mount.alive()


def test_parent_cycles_terminate(tmp_path: Path, mount_factory: MountFactory) -> None:
    mount: Mount = mount_factory(hostile_agent(tmp_path))
    d = mount.path / "sessions" / "--hostile--" / "cycle"
    tree = (d / "tree.txt").read_text()
    assert all(i in tree for i in ("c1", "c2", "c3", "c4"))
    orjson.loads((d / "context.json").read_bytes())
    (d / "transcript.md").read_text()
    orjson.loads((d / "stats.json").read_bytes())
    assert os.listdir(d / "path")
    assert mount.alive()
