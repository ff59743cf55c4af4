"""``--mirror-max-gb``: past its disk budget the store mirror removes whole files (sessions
and blobs), least recently read first, says so in ``ctl``, and fetches an evicted one
again as soon as the mount is asked for it."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import orjson
import pytest
from store_helpers import S3Server, ctl_status
from support.mount import fuse_available, start_mount

from sessionfs.store.layout import SegmentKey, StoreLayout

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.skipif(not fuse_available(), reason="FUSE is not available"),
]

SESSION_BYTES = 100_000
#: room for two of the four files: three sessions and a blob (GB, as the flag takes it)
BUDGET_GB = 250_000 / (1 << 30)


def _session(session_id: str) -> bytes:
    header = {"type": "session", "version": 3, "id": session_id,
              "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}  # fmt: skip
    line = orjson.dumps({"type": "custom", "customType": "pad", "data": "z" * 900}) + b"\n"
    return orjson.dumps(header) + b"\n" + line * (SESSION_BYTES // len(line))


def test_the_mirror_stays_under_its_budget_and_fetches_evicted_files_on_demand(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    client = s3_server.client(store_prefix)
    layout = StoreLayout(client.url)
    stems = [f"2026-01-0{n}T00-00-00-000Z_s{n}" for n in (1, 2, 3)]
    for n, stem in enumerate(stems, start=1):
        client.put_if_absent(
            layout.segment("m", SegmentKey(f"--p--/{stem}.jsonl", 1, 0)), _session(f"s{n}")
        )
    image = bytes(range(256)) * (SESSION_BYTES // 256)
    sha = hashlib.sha256(image).hexdigest()
    client.put_if_absent(layout.blob(sha), image)
    client.put_if_absent(layout.machine_blob("m", sha), b"")
    cache = tmp_path / "cache"
    mount = start_mount(
        tmp_path / "unused-agent",
        tmp_path / "mnt",
        *("--store", s3_server.store_url(store_prefix), "--endpoint-url", s3_server.endpoint),
        *("--cache-dir", str(cache), "--refresh-seconds", "1"),
        *("--mirror-max-gb", f"{BUDGET_GB:.9f}"),
    )
    try:
        root = mount.path
        (mirror,) = cache.glob("store-*")
        on_disk = mirror / "machines" / "m" / "sessions" / "--p--"
        shared = mirror / "blobs" / sha
        status = ctl_status(root)
        assert status["files_evicted"] == "2", status
        assert int(status["mirror_bytes"]) <= int(status["mirror_max_bytes"]) < 4 * SESSION_BYTES
        # None was read yet: the first in key order went (the blob, then s1).
        assert not shared.exists()
        assert sorted(p.name for p in on_disk.iterdir()) == [f"{s}.jsonl" for s in stems[1:]]

        # Asked for by name, each comes back at once.
        shown = root / "machines" / "m" / "sessions" / "--p--" / stems[0]
        assert orjson.loads((shown / "header.json").read_bytes())["id"] == "s1"
        assert (on_disk / f"{stems[0]}.jsonl").read_bytes() == _session("s1")
        assert (root / "machines" / "m" / "blobs" / sha).read_bytes() == image
        assert shared.read_bytes() == image

        # The next refresh evicts the two never read, never what was just read.
        deadline = time.monotonic() + 30
        while any((on_disk / f"{stem}.jsonl").exists() for stem in stems[1:]):
            assert time.monotonic() < deadline, ctl_status(root)
            time.sleep(0.5)
        assert (on_disk / f"{stems[0]}.jsonl").exists() and shared.exists()
        status = ctl_status(root)
        assert status["files_evicted"] == "2", status
        assert int(status["mirror_bytes"]) <= int(status["mirror_max_bytes"])
    finally:
        mount.unmount()
