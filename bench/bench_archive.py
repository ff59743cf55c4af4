"""The local archive: the first ``sessionfs sync`` of 10,000 sessions (~1 GB) into a
directory store, against a plain ``cp -r`` of the same files to the same disk, and an
unchanged re-sync (a ``stat`` per file).

Targets: the first archive at >= 50% of ``cp -r``'s speed (``cp -r`` time / sync time
>= 0.5; the sync also fsyncs every object, ``cp`` nothing: ``cp -r`` followed by
``sync(1)`` is shown beside it), an unchanged re-sync <= 1 s. The corpus is made in a
temp dir on the disk of ``--dir`` (default: the repo's ``.cache/``) and removed after;
``--sessions`` and ``--kb`` size it, ``--quick`` is 1,000 sessions. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    # `python bench/bench_archive.py` puts bench/ on sys.path, not the repo root.
    sys.path.insert(0, str(REPO))

from bench.common import Row, print_table, timed  # noqa: E402


def make_corpus(agent: Path, sessions: int, kb: int) -> int:
    """``sessions`` session files of about ``kb`` KiB of JSON lines each, in 50
    projects; returns the total bytes."""
    chance = random.Random(28)
    words = [bytes(chance.choices(range(97, 123), k=chance.randint(2, 9))) for _ in range(4000)]
    total = 0
    for n in range(sessions):
        name = f"2026-01-01T00-00-00-000Z_{n:06d}.jsonl"
        path = agent / "sessions" / f"--work-p{n % 50}--" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines, size = [], 0
        while size < kb * 1024:
            text = b" ".join(chance.choices(words, k=chance.randint(20, 300)))
            line = b'{"type":"message","id":"%08x","text":"%s"}\n' % (size, text)
            lines.append(line)
            size += len(line)
        path.write_bytes(b"".join(lines))
        total += size
    return total


def sessionfs_sync(agent: Path, archive: Path, state: Path) -> str:
    command = [
        sys.executable, "-m", "sessionfs", "sync", "--once", "--no-agents",
        "--store", f"file://{archive}", "--agent-dir", str(agent),
        "--state-dir", str(state), "--machine", "bench",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"sync failed: {done.stderr}")
    return done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--kb", type=int, default=100, help="KiB per session (default 100)")
    parser.add_argument("--quick", action="store_true", help="1,000 sessions")
    parser.add_argument("--dir", type=Path, default=REPO / ".cache", help="where to work")
    args = parser.parse_args()
    sessions = 1_000 if args.quick else args.sessions
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-archive-", dir=args.dir) as work:
        base = Path(work)
        total = make_corpus(base / "agent", sessions, args.kb)
        subprocess.run(["sync"], check=True)
        mib = total / (1 << 20)
        print(f"{sessions} sessions, {mib:.0f} MiB in {base}", flush=True)

        # one warm-up copy: both runs then read the corpus from the page cache
        subprocess.run(["cp", "-r", str(base / "agent"), str(base / "warm")], check=True)
        shutil.rmtree(base / "warm")
        cp_time, _ = timed(
            lambda: subprocess.run(["cp", "-r", str(base / "agent"), str(base / "cp")], check=True)
        )
        flush_time, _ = timed(lambda: subprocess.run(["sync"], check=True))
        shutil.rmtree(base / "cp")
        subprocess.run(["sync"], check=True)

        first, log = timed(lambda: sessionfs_sync(base / "agent", base / "archive", base / "state"))
        again, log_again = timed(
            lambda: sessionfs_sync(base / "agent", base / "archive", base / "state")
        )
        assert "shipped 0 segments" in log_again, log_again
        rows = [
            Row(
                "first archive (cp -r time / sync time)",
                f"{first:.1f} s ({mib / first:.0f} MiB/s)",
                f"cp -r {cp_time:.1f} s (+ sync(1) {flush_time:.1f} s)",
                cp_time / first,
                ">= 0.50",
                cp_time / first >= 0.5,
            ),
            Row(
                "first archive vs cp -r + sync(1)",
                f"{first:.1f} s",
                f"{cp_time + flush_time:.1f} s",
                (cp_time + flush_time) / first,
                "(durable baseline)",
                True,
            ),
            Row(
                "unchanged re-sync (stat only)",
                f"{again:.2f} s",
                f"{sessions} files",
                again,
                "<= 1 s",
                again <= 1.0,
            ),
        ]
        print_table(f"Local archive: {sessions} sessions, {mib:.0f} MiB", rows)
        print(log.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
