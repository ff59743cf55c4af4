"""What the sync and the store mirror put on disk is private whatever the umask (0600
files, 0700 dirs, SQLite's -wal and -shm included), and ``--debug`` never writes a
credential: the S3 libraries' request logs stay off in the sync and in the mount."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from store_helpers import S3Server, make_agent_dir, sync_command
from support.mount import fuse_available, start_mount

#: Credentials nothing else in a log could contain by chance. SeaweedFS without an
#: identity file accepts any key; what matters is that these are what gets signed with.
KEY_ID = "AKIATRUSTSTORE7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+trust/store/EXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEXAMPLEtrustSTORE+session/TOKEN"
NEVER_LOGGED = (KEY_ID, SECRET, TOKEN, "Signature=", "X-Amz-Security-Token")


def _env(server: S3Server) -> dict[str, str]:
    return {
        **server.env,
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
    }


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes_under(root: Path) -> dict[str, int]:
    """The permission bits of ``root`` and everything below it."""
    found = {".": stat.S_IMODE(root.lstat().st_mode)}
    for path in root.rglob("*"):
        found[path.relative_to(root).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    return found


def assert_private(modes: dict[str, int], root: Path) -> None:
    loose = {
        name: oct(mode)
        for name, mode in modes.items()
        if mode != (0o700 if (root / name).is_dir() and not (root / name).is_symlink() else 0o600)
    }
    assert not loose, loose


def test_sync_state_is_private_and_debug_logs_no_credential(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = make_agent_dir(
        tmp_path, fixture="pi-v1-before-compaction.jsonl", project="--p--", shared_blob=b"s"
    )
    state = tmp_path / "new" / "state"  # the sync makes both dirs
    command = sync_command(s3_server, store_prefix, agent, "m", state, "--debug")
    command.remove("--once")  # running: its SQLite -wal and -shm are there to look at
    with umask(0o022):
        sync = subprocess.Popen(command, env=_env(s3_server), stderr=subprocess.PIPE, text=True)
    assert sync.stderr is not None
    try:
        lines = []
        while not any("shipped" in line for line in lines):
            line = sync.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
        modes = modes_under(tmp_path / "new")
    finally:
        sync.terminate()
        rest = sync.communicate(timeout=30)[1]
    assert {"state/sync.sqlite", "state/sync.sqlite-wal", "state/sync.sqlite-shm"} <= set(modes)
    assert_private(modes, tmp_path / "new")
    log = "".join(lines) + rest
    assert "claimed machine name m" in log
    for secret in NEVER_LOGGED:
        assert secret not in log


@pytest.mark.skipif(not fuse_available(), reason="FUSE is not available")
def test_store_mirror_is_private_and_debug_mount_logs_no_credential(
    s3_server: S3Server, store_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent_dir(
        tmp_path, fixture="pi-v1-before-compaction.jsonl", project="--p--", shared_blob=b"s"
    )
    command = sync_command(s3_server, store_prefix, agent, "m", tmp_path / "state")
    subprocess.run(command, env=s3_server.env, check=True, capture_output=True, timeout=60)
    for name, value in _env(s3_server).items():
        monkeypatch.setenv(name, value)
    cache = tmp_path / "cache"
    with umask(0o022):
        mount = start_mount(
            tmp_path / "unused-agent",
            tmp_path / "mnt",
            *("--store", s3_server.store_url(store_prefix), "--endpoint-url", s3_server.endpoint),
            *("--cache-dir", str(cache), "--refresh-seconds", "1", "--debug"),
        )
    try:
        machine = mount.path / "machines" / "m"
        for session in (machine / "sessions" / "--p--").iterdir():
            (session / "transcript.md").read_bytes()
        time.sleep(2.5)  # a refresh or two more, with their requests
    finally:
        mount.unmount()
    (mirror,) = cache.glob("store-*")
    modes = modes_under(mirror)
    assert "mirror-state.json" in modes and any(name.startswith("blobs/") for name in modes)
    assert any(name.endswith(".jsonl") for name in modes)
    # The mirror, and everything else the store mount keeps in its cache dir (each
    # machine's search index and renders).
    assert_private(modes_under(cache), cache)
    log = mount.log.read_text(errors="replace")
    assert " DEBUG " in log  # --debug was on
    for secret in NEVER_LOGGED:
        assert secret not in log
