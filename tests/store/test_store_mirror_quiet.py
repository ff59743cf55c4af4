"""A mirror refresh that finds nothing new never touches a mirrored file: its mtime is
what the mount's session cache (and search index, and transcript cache) take for a change."""

from __future__ import annotations

import time
from pathlib import Path

from store_helpers import S3Server
from test_store_layout import _put


def test_a_refresh_with_nothing_new_leaves_files_alone(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 0, b"one\n")
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    mirrored = mirror.machine_dir("m") / "sessions" / "p" / "s.jsonl"
    before = mirrored.stat()
    time.sleep(0.05)  # a touch now would show in the ns mtime
    assert mirror.refresh().files_changed == 0
    after = mirrored.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 4, b"two\n")  # growth still arrives
    assert mirror.refresh().files_changed == 1
    assert mirrored.read_bytes() == b"one\ntwo\n"
