"""Nothing lost, nothing doubled: a sync killed (SIGKILL) again and again leaves an
archive the next sync completes with every byte once; a file replaced by a shorter one
gets a new generation and the old one stays; the same blob is stored once; a full disk
fails cleanly and the next sync goes on."""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from archive_helpers import SYNC_TIMEOUT, default_archive, mirror_of, sync, tree_bytes, user_env
from support.tmpfs import tmpfs

from sessionfs.store.dir_client import DirStoreClient
from sessionfs.store.url import DirStoreURL


def _line(n: int, size: int) -> bytes:
    return b'{"type":"message","n":%d,"pad":"%s"}\n' % (n, b"x" * size)


def _agent_dir(home: Path, sessions: int, lines: int) -> dict[str, bytes]:
    """Sessions in ``home/agent``; returns what a full archive must hold of them."""
    expected = {}
    for s in range(sessions):
        rel = f"--p{s % 7}--/2026-01-01T00-00-{s:02d}-000Z_{s:04d}.jsonl"
        path = home / "agent" / "sessions" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join(_line(n, 200 + (n * 37 + s) % 900) for n in range(lines))
        path.write_bytes(data + b'{"torn":')  # a line still being written is not kept
        expected[f"sessions/{rel}"] = data
    return expected


def _objects(archive: Path, prefix: str = "") -> list[tuple[str, int]]:
    client = DirStoreClient(DirStoreURL(archive))
    return [(item.key, item.size) for item in client.list(prefix)]


def _sync_process(home: Path, *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "sessionfs", "sync", "--once", "--machine", "box", *args]
    return subprocess.Popen(
        command, env=user_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def test_sigkill_at_any_point_then_a_sync_completes_every_byte_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    expected = _agent_dir(home, sessions=100, lines=150)
    archive = default_archive(home)
    chance = random.Random(28)
    kills = 0
    for _ in range(10):
        before = len(_objects(archive)) if archive.exists() else 0
        process = _sync_process(home, "--segment-mb", "0.02", "--jobs", "4")
        try:
            deadline = time.monotonic() + SYNC_TIMEOUT
            while process.poll() is None and time.monotonic() < deadline:
                if archive.exists() and len(_objects(archive)) > before:
                    time.sleep(chance.uniform(0, 0.1))
                    process.send_signal(signal.SIGKILL)
                    kills += 1
                    break
                time.sleep(0.01)
        finally:
            process.kill()
            process.wait(timeout=30)
        if process.returncode == 0:
            break  # it finished before the kill
    assert kills >= 3
    done = sync(home, "--segment-mb", "0.02")
    assert done.returncode == 0, done.stderr
    mirrored = tree_bytes(mirror_of(archive, tmp_path / "cache").machine_dir("box"))
    assert mirrored == expected
    segments = _objects(archive, "machines/box/sessions/")
    assert all("/g00000001/" in key for key, _ in segments)  # no file shipped twice
    assert sum(size for _, size in segments) == sum(len(data) for data in expected.values())


def _generations(archive: Path, rel: str) -> dict[str, bytes]:
    client = DirStoreClient(DirStoreURL(archive))
    found: dict[str, bytes] = {}
    for item in client.list(f"machines/box/sessions/{rel}/"):
        generation = item.key.split("/")[-2]
        found[generation] = found.get(generation, b"") + client.get(item.key, 1 << 30)
    return found


def test_a_shorter_file_never_truncates_what_the_archive_holds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    expected = _agent_dir(home, sessions=2, lines=30)
    first, second = sorted(expected)
    assert sync(home).returncode == 0
    path = home / "agent" / first
    shorter = path.with_name(".new")
    shorter.write_bytes(b'{"type":"session","rewritten":true}\n')
    shorter.replace(path)  # replaced by rename
    (home / "agent" / second).write_bytes(b'{"truncated":"in place"}\n')  # cut in place
    assert sync(home).returncode == 0
    archive = default_archive(home)
    rel = first.removeprefix("sessions/")
    assert _generations(archive, rel) == {
        "g00000001": expected[first],
        "g00000002": path.read_bytes(),
    }
    assert _generations(archive, second.removeprefix("sessions/"))["g00000001"] == expected[second]
    mirrored = tree_bytes(mirror_of(archive, tmp_path / "cache").machine_dir("box"))
    assert mirrored[first] == path.read_bytes()  # the newest generation is the file


def test_the_same_blob_from_two_machines_is_stored_once(tmp_path: Path) -> None:
    blob = b"an image pasted twice" * 1000
    sha = hashlib.sha256(blob).hexdigest()
    homes = [tmp_path / "one", tmp_path / "two"]
    for home in homes:
        _agent_dir(home, sessions=1, lines=3)
        (home / "agent" / "blobs").mkdir()
        (home / "agent" / "blobs" / sha).write_bytes(blob)
    archive = tmp_path / "shared"
    for n, home in enumerate(homes):
        command = ["--store", f"file://{archive}", "--machine", f"m{n}"]
        assert sync(home, *command).returncode == 0
    assert _objects(archive, "blobs/") == [(f"blobs/{sha}", len(blob))]
    assert [key for key, _ in _objects(archive, "machines/") if "/blobs/" in key] == [
        f"machines/m0/blobs/{sha}",
        f"machines/m1/blobs/{sha}",
    ]


def test_a_full_disk_fails_cleanly_and_the_next_sync_goes_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    expected = _agent_dir(home, sessions=30, lines=200)  # about 4 MB
    with tmpfs(tmp_path / "small", "1m") as disk:
        store = ["--store", f"file://{disk / 'archive'}"]
        full = sync(home, *store, "--segment-mb", "0.05")
        assert full.returncode == 75, full.stderr
        assert "no space left" in full.stderr and "Traceback" not in full.stderr
        partial = tree_bytes(mirror_of(disk / "archive", tmp_path / "c1").machine_dir("box"))
        assert partial and all(expected[name].startswith(data) for name, data in partial.items())
        assert sum(map(len, partial.values())) < sum(map(len, expected.values()))
        remount = ["mount", "-o", "remount,size=64m", str(disk)]
        subprocess.run(remount, check=True, timeout=30)
        done = sync(home, *store, "--segment-mb", "0.05")
        assert done.returncode == 0, done.stderr
        mirrored = tree_bytes(mirror_of(disk / "archive", tmp_path / "c2").machine_dir("box"))
        assert mirrored == expected
        temps = disk / "archive" / ".tmp"
        assert not temps.exists() or not list(temps.iterdir())  # no half object left
