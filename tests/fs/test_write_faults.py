"""Concurrency and faults of writing through the mount (issue 5): many writers at once,
a daemon killed mid-stream, a full disk, and a crashed agent's torn line."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from support.mount import COMMAND_TIMEOUT, MountFactory
from support.tmpfs import fill, tmpfs
from support.write_setup import (
    bad_lines,
    disk_ids,
    drop,
    errno_of,
    make_agent,
    on_disk,
    read_ctl,
    session_dir,
)

from core import SessionManager
from sessionfs.view.loaded_session import TAIL_APPENDS_ABOVE_BYTES

pytestmark = pytest.mark.fuse

#: Appends through append/, one file each; prints each marker once close() returned 0.
MOUNT_WRITER = textwrap.dedent(
    """
    import json, os, sys
    directory, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for n in range(count):
        marker = f"{prefix}-{n}"
        data = json.dumps({"role": "user", "content": marker}).encode()
        try:
            fd = os.open(os.path.join(directory, marker + ".json"),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)
        except OSError as exc:
            print("error", exc.errno, flush=True)
            sys.exit(1)
        print(marker, flush=True)
    """
)

#: A running agent: its own chain of lines, each one O_APPEND write, straight to the file.
DIRECT_WRITER = textwrap.dedent(
    """
    import json, os, sys
    path, parent, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for n in range(count):
        entry_id = f"a{n:07x}"
        line = json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                           "timestamp": "2026-01-01T00:00:00.000Z",
                           "message": {"role": "assistant", "content": [],
                                       "provider": "p", "model": "m", "timestamp": n}})
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, (line + "\\n").encode())
        os.close(fd)
        parent = entry_id
    """
)


def markers(file: Path) -> list[str]:
    out = []
    for entry in on_disk(file).get_entries():
        message = entry.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            out.append(message["content"])
    return out


def test_four_mount_writers_and_an_agent_at_once(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(tmp_path)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    ids_before = disk_ids(file)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", MOUNT_WRITER, str(d / "append"), f"w{n}", "250"],
            stdout=subprocess.PIPE,
        )
        for n in range(4)
    ]
    agent = subprocess.Popen(
        [sys.executable, "-c", DIRECT_WRITER, str(file), ids_before[-1], "250"]
    )
    outputs = [w.communicate(timeout=COMMAND_TIMEOUT * 5)[0].decode() for w in writers]
    assert agent.wait(timeout=COMMAND_TIMEOUT) == 0
    assert [w.returncode for w in writers] == [0, 0, 0, 0], outputs

    disk = on_disk(file)
    entries = disk.get_entries()
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)) == len(ids_before) + 1000 + 250
    found = markers(file)
    expected = {f"w{n}-{i}" for n in range(4) for i in range(250)}
    assert sorted(m for m in found if m.startswith("w")) == sorted(expected)
    assert {e["id"] for e in entries if e["id"].startswith("a")} >= {
        f"a{n:07x}" for n in range(250)
    }
    known = set(ids)
    assert all(e["parentId"] is None or e["parentId"] in known for e in entries)
    assert bad_lines(file) == []
    header = orjson.loads(file.read_bytes().split(b"\n", 1)[0])
    assert header["type"] == "session" and header["version"] == 3
    assert mount.alive()


def test_daemon_killed_during_appends_loses_nothing_confirmed(
    tmp_path: Path,
    mount_factory: MountFactory,
) -> None:
    agent_dir, file = make_agent(tmp_path)
    mount = mount_factory(agent_dir, name="first")
    d = session_dir(mount, file)
    writer = subprocess.Popen(
        [sys.executable, "-c", MOUNT_WRITER, str(d / "append"), "k", "1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert writer.stdout is not None
    confirmed = []
    for raw in writer.stdout:
        line = raw.decode().strip()
        if line.startswith("k-"):
            confirmed.append(line)
        if len(confirmed) == 300:
            mount.process.send_signal(signal.SIGKILL)
            break
    rest = writer.communicate(timeout=COMMAND_TIMEOUT)[0].decode().split()
    confirmed += [m for m in rest if m.startswith("k-")]
    mount.unmount()
    assert 300 <= len(confirmed) < 1000

    on_file = markers(file)
    assert set(confirmed) <= set(on_file)
    assert len(on_file) == len(set(on_file))
    report = bad_lines(file)
    assert report == [] or report == [len(file.read_bytes().split(b"\n"))]

    # A crashed agent leaves half a line; the next write through the mount must not
    # glue onto it.
    with open(file, "ab") as fh:
        fh.write(b'{"type":"message","id":"torn0001","parentId":nu')
    again = mount_factory(agent_dir, name="second")
    d2 = session_dir(again, file)
    drop(d2 / "append", "after.txt", b"after the crash")
    last = on_disk(file).get_entries()[-1]
    assert last["message"]["content"][0]["text"] == "after the crash"
    assert len(bad_lines(file)) == 1  # the torn line, now complete-but-invalid, skipped
    assert set(confirmed) <= set(markers(file))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 12 MiB tmpfs (needs root; room for a session over `TAIL_APPENDS_ABOVE_BYTES`);
    unmounted in teardown, after the mount on it, even when the test fails."""
    with tmpfs(tmp_path / "small", "12m") as target:
        yield target


def test_disk_full_then_space_freed_without_remount(
    small_disk: Path, mount_factory: MountFactory
) -> None:
    agent_dir, file = make_agent(small_disk)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    drop(d / "append", "before.txt", b"written before the disk filled up")
    ids_before = disk_ids(file)
    # A leaf chosen through the mount must survive the reload after the failure.
    subprocess.run(["ln", "-sfn", f"entries/{ids_before[0]}.json", "leaf"], cwd=d, check=True)
    filler = fill(small_disk)
    bytes_before = file.read_bytes()
    big = b"y" * (256 * 1024)
    code = errno_of(lambda: drop(d / "append", "lost.txt", big))
    assert code in (errno.ENOSPC, errno.EIO)
    status = (d / "ctl").read_text()
    assert "No space left" in status or "Input/output" in status
    assert disk_ids(file) == ids_before  # earlier entries intact, nothing half-added
    # The partial line the full disk let through was cut off again: not a byte changed.
    assert file.read_bytes() == bytes_before and bad_lines(file) == []
    code = errno_of(lambda: (d / "title").write_text("never"))
    assert code in (errno.ENOSPC, errno.EIO)
    assert not [n for n in os.listdir(file.parent) if n.endswith(".tmp")]

    assert os.readlink(d / "leaf") == f"entries/{ids_before[0]}.json"
    filler.unlink()
    drop(d / "append", "after.txt", big)
    assert on_disk(file).get_entries()[-1]["parentId"] == ids_before[0]
    (d / "title").write_text("Written after freeing space")
    disk = on_disk(file)
    assert [e["id"] for e in disk.get_entries()][: len(ids_before)] == ids_before
    assert disk.get_entries()[-1]["message"]["content"][0]["text"] == big.decode()
    assert disk.get_header()["title"] == "Written after freeing space"
    assert mount.alive()


def test_disk_full_on_an_append_through_the_tail_of_a_big_session(
    small_disk: Path, mount_factory: MountFactory
) -> None:
    """A session too big to parse for an append (issue 26 point 6) is appended to
    through its tail: a full disk still fails the ``close()``, changes no byte, says
    why in ``ctl``, and the next append works once there is room again."""
    agent_dir, file = make_agent(small_disk)
    with SessionManager.open(file) as padding:
        for _ in range(TAIL_APPENDS_ABOVE_BYTES // 100_000 + 1):
            padding.append_message({"role": "user", "content": "x" * 100_000})
    last_before = disk_ids(file)[-1]
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    filler = fill(small_disk)
    bytes_before = file.read_bytes()
    big = b"y" * (256 * 1024)
    code = errno_of(lambda: drop(d / "append", "lost.txt", big))
    assert code in (errno.ENOSPC, errno.EIO)
    assert "No space left" in (d / "ctl").read_text()
    assert file.read_bytes() == bytes_before and bad_lines(file) == []
    filler.unlink()
    drop(d / "append", "after.txt", big)
    entries = on_disk(file).get_entries()
    assert entries[-1]["parentId"] == last_before
    assert entries[-1]["message"]["content"][0]["text"] == big.decode()
    assert file.read_bytes().startswith(bytes_before)
    assert read_ctl(mount.path)["cache_loads"] == "1"  # for the ctl read; no append read it
    assert mount.alive()


def test_a_leaf_pinned_before_a_failed_write_holds_for_the_very_next_append(
    small_disk: Path, mount_factory: MountFactory
) -> None:
    """The failed write drops the session (to be read again); the leaf chosen through
    the mount before it is put back when the next append reads it, with nothing else
    reading the session in between (the append's lookup reads no session by itself)."""
    agent_dir, file = make_agent(small_disk)
    mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    first = disk_ids(file)[0]
    subprocess.run(["ln", "-sfn", f"entries/{first}.json", "leaf"], cwd=d, check=True)
    filler = fill(small_disk)
    assert errno_of(lambda: drop(d / "append", "lost.txt", b"y" * 256 * 1024)) in (
        errno.ENOSPC,
        errno.EIO,
    )
    filler.unlink()
    drop(d / "append", "after.txt", b"on the chosen branch")
    assert on_disk(file).get_entries()[-1]["parentId"] == first
