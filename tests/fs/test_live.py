"""Acceptance: another process writing a session file is seen live through the mount;
replaced and shrunk files are reloaded."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support import waiting
from support.mount import Mount

pytestmark = pytest.mark.fuse

#: The design bound is well under 1 s (0.2 s freshness checks, 0.5 s attribute cache);
#: tests wait longer so a loaded CI machine cannot make them flaky.
DEADLINE = 5.0

WRITER = textwrap.dedent(
    """
    import json, sys
    path, parent, new_id, text = sys.argv[1:5]
    entry = {"type": "message", "id": new_id, "parentId": parent,
             "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": text, "timestamp": 1767225600000}}
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\\n")
    """
)


def eventually(check: Callable[[], bool], what: str) -> None:
    waiting.eventually(check, what, DEADLINE)


def newest_session(mount: Mount) -> tuple[Path, Path]:
    link = mount.path / "recent" / "1"
    d = (link.parent / os.readlink(link)).resolve()
    f = mount.agent_dir / "sessions" / d.parent.name / f"{d.name}.jsonl"
    return d, f


def test_appends_by_another_process_show_up_live(demo_mount: Mount) -> None:
    d, file = newest_session(demo_mount)
    leaf = os.readlink(d / "leaf")[len("entries/") : -len(".json")]
    before = orjson.loads((d / "context.json").read_bytes())["messages"]
    (d / "transcript.md").read_bytes()  # warm every cache first
    (d / "tree.txt").read_bytes()
    subprocess.run(
        [sys.executable, "-c", WRITER, file, leaf, "feedf00d", "hello from a running agent"],
        check=True,
        timeout=30,
    )
    eventually(lambda: "feedf00d.json" in os.listdir(d / "entries"), "entries/")
    eventually(
        lambda: len(orjson.loads((d / "context.json").read_bytes())["messages"]) == len(before) + 1,
        "context.json",
    )
    eventually(lambda: "hello from a running agent" in (d / "transcript.md").read_text(), "md")
    eventually(lambda: "feedf00d" in (d / "tree.txt").read_text(), "tree.txt")
    eventually(lambda: os.readlink(d / "leaf") == "entries/feedf00d.json", "leaf")
    size = os.stat(d / "context.json").st_size
    assert size == len((d / "context.json").read_bytes())


def test_a_half_written_line_waits_for_its_end(demo_mount: Mount) -> None:
    d, file = newest_session(demo_mount)
    leaf = os.readlink(d / "leaf")[len("entries/") : -len(".json")]
    line = (
        orjson.dumps(
            {
                "type": "custom",
                "id": "0badc0de",
                "parentId": leaf,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "customType": "x",
            }
        )
        + b"\n"
    )
    with open(file, "ab") as f:
        f.write(line[:20])
        f.flush()
        time.sleep(0.5)
        assert "0badc0de.json" not in os.listdir(d / "entries")
        f.write(line[20:])
    eventually(lambda: "0badc0de.json" in os.listdir(d / "entries"), "completed line")


def test_replaced_and_shrunk_files_are_reloaded(demo_mount: Mount) -> None:
    d, file = newest_session(demo_mount)
    lines = file.read_bytes().splitlines(keepends=True)
    header = orjson.loads(lines[0])
    header["title"] = "Replaced title"
    tmp = file.with_name(".replacement.tmp")
    tmp.write_bytes(orjson.dumps(header) + b"\n" + b"".join(lines[1:]))
    os.replace(tmp, file)
    eventually(lambda: (d / "title").read_text() == "Replaced title\n", "replaced file")
    ids = [orjson.loads(x)["id"] for x in lines[1:4]]
    with open(file, "r+b") as f:
        f.truncate(sum(len(x) for x in lines[:4]))
    eventually(
        lambda: sorted(os.listdir(d / "entries")) == sorted(f"{i}.json" for i in ids), "shrunk"
    )
    assert os.readlink(d / "leaf") == f"entries/{ids[-1]}.json"


def test_new_sessions_and_projects_appear(demo_mount: Mount) -> None:
    project = demo_mount.agent_dir / "sessions" / "--home-demo-new--"
    project.mkdir()
    header = {
        "type": "session",
        "version": 3,
        "id": "new-session-id",
        "timestamp": "2026-02-01T00:00:00.000Z",
        "cwd": "/home/demo/new",
    }
    (project / "2026-02-01T00-00-00-000Z_new-session-id.jsonl").write_bytes(
        orjson.dumps(header) + b"\n"
    )
    eventually(lambda: "--home-demo-new--" in os.listdir(demo_mount.path / "sessions"), "project")
    eventually(
        lambda: os.readlink(demo_mount.path / "recent" / "1").startswith(
            "../sessions/--home-demo-new--/"
        ),
        "recent/1",
    )
    assert (demo_mount.path / "by-id" / "new-session-id" / "header.json").is_file()
    assert not (demo_mount.path / "by-id" / "new-session-id" / "leaf").exists()
