"""Acceptance: permission bits in a session dir follow the session file on disk, and
``--allow-other`` says what that means."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory, run

pytestmark = pytest.mark.fuse

PROJECT = "--perm--"
PIXEL = b"\x89PNG\r\n\x1a\n not really an image"
SHA = hashlib.sha256(PIXEL).hexdigest()


def line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def write_session(project: Path, stem: str, mode: int) -> None:
    header = {
        "type": "session",
        "version": 3,
        "id": stem,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/x",
    }
    image = {"type": "image", "data": f"blob:sha256:{SHA}", "mimeType": "image/png"}
    entries = [
        {
            "type": "message",
            "id": f"{stem}-1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": [image], "timestamp": 0},
        },
        {
            "type": "label",
            "id": f"{stem}-2",
            "parentId": f"{stem}-1",
            "targetId": f"{stem}-1",
            "label": "mark",
            "timestamp": "2026-01-01T00:00:02.000Z",
        },
    ]
    path = project / f"{stem}.jsonl"
    path.write_bytes(line(header) + b"".join(line(e) for e in entries))
    path.chmod(mode)


def permissions_agent(root: Path) -> Path:
    agent = root / "agent"
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True)
    (agent / "blobs").mkdir()
    (agent / "blobs" / SHA).write_bytes(PIXEL)
    write_session(project, "private", 0o600)
    write_session(project, "shared", 0o644)
    return agent


def modes_below(directory: Path) -> dict[str, int]:
    """``find -printf '%m'``: every path below ``directory`` (links not followed) and,
    with ``-L``, the files the links lead to. Path -> permission bits."""
    found: dict[str, int] = {}
    for follow in ([], ["-L"]):
        out = run("find", *follow, directory, "-printf", "%m %P\\n")
        for row in out.splitlines():
            mode, _, name = row.partition(" ")
            found[("L:" if follow else "") + name] = int(mode, 8)
    return found


def test_a_private_session_shows_no_group_or_other_bits(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount: Mount = mount_factory(permissions_agent(tmp_path))
    project = mount.path / "sessions" / PROJECT
    run("cat", project / "private" / "context.json")  # loaded or not: the same answer
    private = modes_below(project / "private")
    assert {"", "entries/private-1.json", "leaf", "labels/mark", f"blobs/{SHA}", "title"} <= set(
        private
    )
    assert {name: mode for name, mode in private.items() if mode & 0o077} == {}
    assert os.stat(project / "private").st_mode & 0o777 == 0o500 | 0o200
    assert private["title"] == 0o600 and private["ctl"] == 0o600  # writable: owner only
    assert private["entries/private-1.json"] == 0o400

    shared = modes_below(project / "shared")
    assert shared[""] == 0o755 and shared["title"] == 0o644
    assert shared["entries/shared-1.json"] == 0o444 and shared[f"blobs/{SHA}"] == 0o444

    # chmod while mounted: the next look at the session shows the new mode, also on
    # files whose attributes the kernel caches for long (entries, no listing between),
    # and on append/, whose attributes the daemon keeps between getattrs
    names = ("entries/shared-1.json", "title", "labels", "append")
    watched = [project / "shared" / p for p in names]
    assert run("stat", "-c", "%a", *watched).split() == ["444", "644", "755", "755"]
    assert mode_of_a_file_being_written(project / "shared" / "append") == 0o644
    # held open, append/ is asked about by getattr alone (no lookup that would bring
    # new attributes with it)
    append_fd = os.open(project / "shared" / "append", os.O_RDONLY | os.O_DIRECTORY)
    try:
        (mount.agent_dir / "sessions" / PROJECT / "shared.jsonl").chmod(0o600)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            run("cat", project / "shared" / "ctl")  # any access to the session notices
            modes = run("stat", "-c", "%a", *watched).split()
            held = os.fstat(append_fd).st_mode & 0o777
            if modes == ["400", "600", "700", "700"] and held == 0o700:
                break
            time.sleep(0.2)
        assert modes == ["400", "600", "700", "700"] and held == 0o700
        time.sleep(0.7)  # past the attributes' timeout: a getattr of append/ must say so too
        assert os.fstat(append_fd).st_mode & 0o777 == 0o700
    finally:
        os.close(append_fd)
    assert mode_of_a_file_being_written(project / "shared" / "append") == 0o600


def mode_of_a_file_being_written(append_dir: Path) -> int:
    """The permission bits ``fstat`` shows of a file just made in ``append/`` (closed
    unwritten: nothing is appended)."""
    fd = os.open(append_dir / "probe.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        return os.fstat(fd).st_mode & 0o777
    finally:
        os.close(fd)


def test_allow_other_says_what_it_means(tmp_path: Path, mount_factory: MountFactory) -> None:
    mount: Mount = mount_factory(permissions_agent(tmp_path), "--allow-other")
    assert run("ls", mount.path / "sessions" / PROJECT).split() == ["private", "shared"]
    notes = [
        row for row in mount.log.read_text(errors="replace").splitlines() if "--allow-other" in row
    ]
    assert len(notes) == 1 and "other users can now read" in notes[0]
