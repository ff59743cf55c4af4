"""Huge objects never sit in memory: with a 520 MB segment and a 300 MB blob in the store,
the store mount's peak RSS (``VmHWM``) stays under ``--cache-mb`` + 100 MB while it
mirrors them, indexes the session and serves both. The objects are generated as they
are uploaded (never whole in the test's memory either)."""

from __future__ import annotations

import hashlib
import io
import os
import time
from pathlib import Path

import boto3
import orjson
import pytest
from store_helpers import S3Server, ctl_status
from support.mount import fuse_available, start_mount

from sessionfs.store.layout import SegmentKey, StoreLayout

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.skipif(not fuse_available(), reason="FUSE is not available"),
]

MB = 1 << 20
SEGMENT_BYTES = 520 * MB
BLOB_BYTES = 300 * MB
CACHE_MB = 64
#: the issue's bound: the daemon's RSS under --cache-mb plus this
HEADROOM = 100 * MB


class PatternBody(io.RawIOBase):
    """``prefix`` then ``unit`` repeated, ``size`` bytes in all: a seekable body that is
    made as it is read."""

    def __init__(self, prefix: bytes, unit: bytes, size: int) -> None:
        self.prefix, self.unit, self.size = prefix, unit, size
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self.size - self.position)
        filled = 0
        while filled < count:
            piece = self._piece_at(self.position + filled, count - filled)
            buffer[filled : filled + len(piece)] = piece
            filled += len(piece)
        self.position += count
        return count

    def _piece_at(self, offset: int, most: int) -> bytes:
        if offset < len(self.prefix):
            return self.prefix[offset : offset + most]
        within = (offset - len(self.prefix)) % len(self.unit)
        return self.unit[within : within + most]

    def sha256(self) -> str:
        digest = hashlib.sha256()
        self.seek(0)
        while chunk := self.read(8 * MB):
            digest.update(chunk)
        self.seek(0)
        return digest.hexdigest()


def _session_body() -> PatternBody:
    """A runaway agent's session: a header, then one long tool result after another."""
    header = orjson.dumps(
        {"type": "session", "version": 3, "id": "big", "timestamp": "2026-01-01T00:00:00.000Z",
         "cwd": "/w"}
    ) + b"\n"  # fmt: skip
    line = orjson.dumps(
        {"type": "custom", "customType": "log", "data": "y" * 4000, "id": "00000000",
         "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z"}
    ) + b"\n"  # fmt: skip
    count = (SEGMENT_BYTES - len(header)) // len(line)
    return PatternBody(header, line, len(header) + count * len(line))


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_the_mount_streams_huge_objects_within_its_memory_bound(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    layout = StoreLayout(s3_server.client(store_prefix).url)
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint)
    session = _session_body()
    blob = PatternBody(b"", os.urandom(MB) + b"!", BLOB_BYTES)
    sha = blob.sha256()
    rel = "--w--/2026-01-01T00-00-00-000Z_big.jsonl"
    uploads = {
        layout.segment("m", SegmentKey(rel, 1, 0)): session,
        layout.blob(sha): blob,
        layout.machine_blob("m", sha): PatternBody(b"", b"-", 0),
    }
    # Mounted first (an empty store: ready at once), so the huge objects arrive at
    # periodic refreshes, as a runaway session does.
    mount = start_mount(
        tmp_path / "unused-agent",
        tmp_path / "mnt",
        *("--store", s3_server.store_url(store_prefix), "--endpoint-url", s3_server.endpoint),
        *("--cache-dir", str(tmp_path / "cache"), "--cache-mb", str(CACHE_MB)),
        *("--refresh-seconds", "1"),
    )
    try:
        root = mount.path
        for key, body in uploads.items():
            s3.put_object(Bucket=s3_server.bucket, Key=key, Body=body, ContentLength=body.size)
        started = time.monotonic()
        while (
            int(ctl_status(root).get("bytes_fetched", "0")) < session.size
            or ctl_status(root).get("blobs_fetched") != "1"
        ):
            assert time.monotonic() - started < 240, ctl_status(root)
            time.sleep(1)
        machine = root / "machines" / "m"
        with (machine / "blobs" / sha).open("rb") as served:  # read through the mount
            digest = hashlib.sha256()
            while chunk := served.read(8 * MB):
                digest.update(chunk)
        assert digest.hexdigest() == sha
        # Listed (its header read); not opened: loading a 520 MB session is the session
        # cache's business (its own bounds), not the mirror's.
        assert os.listdir(machine / "sessions" / "--w--") == ["2026-01-01T00-00-00-000Z_big"]
        while not ctl_status(root).get("search_m", "").startswith("ready"):
            assert time.monotonic() - started < 280, ctl_status(root)
            time.sleep(1)
        peak = _vm_hwm(mount.process.pid)
    finally:
        mount.unmount()
    print(f"store mount VmHWM with a 520 MB segment and a 300 MB blob: {peak / MB:.0f} MB")
    assert peak < CACHE_MB * MB + HEADROOM, f"{peak / MB:.0f} MB"
