"""Acceptance: ids, labels, session ids and project names too long for a file name
(255 bytes) get stable short names that list, open, link and reverse like any other."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest
from support.agent_messages import user_entry
from support.mount import Mount, MountFactory, run

pytestmark = pytest.mark.fuse

LONG_ID = "x" * 5000
SIBLING_A = "y" * 3000 + "a"  # two long ids sharing a 3,000-character prefix
SIBLING_B = "y" * 3000 + "b"
LONG_LABEL = "l" * 300
LONG_SESSION_ID = "s" * 400
PROJECT = "--" + "p" * 240 + "--"  # 244 bytes: as long as a dir name comfortably gets
SHORT = re.compile(r"[^/]+~[0-9a-f]{16}")


def line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def long_names_agent(root: Path) -> Path:
    agent = root / "agent"
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True)
    header = {
        "type": "session",
        "version": 3,
        "id": LONG_SESSION_ID,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/x",
    }
    label = {
        "type": "label",
        "id": "lab1",
        "parentId": SIBLING_B,
        "targetId": LONG_ID,
        "label": LONG_LABEL,
        "timestamp": "2026-01-01T00:00:02.000Z",
    }
    (project / "long.jsonl").write_bytes(
        line(header)
        + line(user_entry("first", None, "one"))
        + line(user_entry(LONG_ID, "first", "the long one"))
        + line(user_entry(SIBLING_A, LONG_ID, "sibling a"))
        + line(user_entry(SIBLING_B, SIBLING_A, "sibling b"))
        + line(label)
    )
    return agent


def entry_names(session: Path) -> list[str]:
    return run("ls", "-1", "-U", session / "entries").split("\n")[:-1]


def test_long_names_list_open_and_link(tmp_path: Path, mount_factory: MountFactory) -> None:
    agent = long_names_agent(tmp_path)
    mount: Mount = mount_factory(agent)
    assert run("ls", mount.path / "sessions").split() == [PROJECT]
    session = mount.path / "sessions" / PROJECT / "long"
    names = entry_names(session)
    assert len(names) == 5 and names[0] == "first.json" and names[-1] == "lab1.json"
    long_name, sibling_a, sibling_b = names[1:4]
    for name in (long_name, sibling_a, sibling_b):
        assert len(name.encode()) <= 255 and SHORT.fullmatch(name.removesuffix(".json"))
    assert len({long_name, sibling_a, sibling_b}) == 3
    assert long_name.startswith("xxxx") and sibling_a.startswith("yyyy")
    assert orjson.loads(run("cat", session / "entries" / long_name))["id"] == LONG_ID
    assert orjson.loads(run("cat", session / "entries" / sibling_b))["id"] == SIBLING_B

    # path/ names the same files; the label's link name is short too, and resolves
    (label_name,) = run("ls", session / "labels").split()
    assert SHORT.fullmatch(label_name) and label_name.startswith("llll")
    assert os.readlink(session / "labels" / label_name) == f"../entries/{long_name}"
    assert any(p.endswith(long_name) for p in run("ls", session / "path").split())

    # by-id: the long session id is listed short and leads to the session
    (by_id,) = run("ls", mount.path / "by-id").split()
    assert SHORT.fullmatch(by_id) and len(by_id.encode()) <= 255
    header = orjson.loads(run("cat", mount.path / "by-id" / by_id / "header.json"))
    assert header["id"] == LONG_SESSION_ID

    # ln -sfn on a short name branches there: the next append goes below the long id
    run("ln", "-sfn", f"entries/{long_name}", session / "leaf", cwd=session)
    assert os.readlink(session / "leaf") == f"entries/{long_name}"
    run("sh", "-c", f"printf 'below the long one' > '{session}/append/p.txt'")
    on_disk = (agent / "sessions" / PROJECT / "long.jsonl").read_bytes().splitlines()
    appended = orjson.loads(on_disk[-1])
    assert appended["parentId"] == LONG_ID
    assert appended["message"]["content"] == [{"type": "text", "text": "below the long one"}]

    # a label made by linking to a short name labels the long id
    run("ln", "-sfn", f"../entries/{sibling_a}", session / "labels" / "sib")
    label = orjson.loads(
        (agent / "sessions" / PROJECT / "long.jsonl").read_bytes().splitlines()[-1]
    )
    assert label["type"] == "label" and label["targetId"] == SIBLING_A and label["label"] == "sib"

    # ctl's branch takes the short name as well
    run("sh", "-c", f"echo 'branch entries/{sibling_b}' > '{session}/ctl'")
    assert os.readlink(session / "leaf") == f"entries/{sibling_b}"
    assert mount.alive()


def test_short_names_are_stable_across_remounts(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = long_names_agent(tmp_path)
    first: Mount = mount_factory(agent, name="one")
    session = first.path / "sessions" / PROJECT / "long"
    before = (entry_names(session), run("ls", session / "labels"), run("ls", first.path / "by-id"))
    first.unmount()
    second: Mount = mount_factory(agent, name="two")
    session = second.path / "sessions" / PROJECT / "long"
    # Straight to a short name after the remount, before any listing of entries/.
    assert orjson.loads(run("cat", session / "entries" / before[0][1]))["id"] == LONG_ID
    after = (entry_names(session), run("ls", session / "labels"), run("ls", second.path / "by-id"))
    assert after == before
