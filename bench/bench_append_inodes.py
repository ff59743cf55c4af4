"""What many files written into ``append/`` leave behind (issue 26: memory grows with
the work touched, not with the number of appends), each checkout given against the
others.

Per checkout, a fresh daemon over `bench_writes`' small agent dir: `FILES` files
written one by one into its session's ``append/`` (`bench_writes.mount_appends`: open,
write, close), then the root ``ctl``'s ``kernel_inodes`` (the inode table's live rows),
the daemon's RSS, what its session cache holds, and the kernel's ``fuse_inode``
objects (``/proc/slabinfo``, root only; machine-wide, so other FUSE mounts' work shows
in it too), each before and after, and the time and daemon CPU a file of the first
and the last `CHUNK` files (a cost that grows with the appends shows there).

    .venv/bin/python -m bench.bench_append_inodes [CHECKOUT ...] [--files N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_append_ceiling import daemon_cpu_seconds
from bench.bench_scale import proc_status_mb
from bench.bench_writes import make_agent_dir, mount_appends
from bench.common import mounted, sessionfs_args

FILES = 20_000
CHUNK = 2_000
WARM_FILES = 50
#: how long the kernel is given to send its forgets before the figures after
SETTLE_SECONDS = 2.0


def root_ctl(mountpoint: Path) -> dict[str, str]:
    status = {}
    for line in (mountpoint / "ctl").read_text().splitlines():
        field, _, value = line.partition(": ")
        status[field] = value
    return status


def fuse_inodes() -> int | None:
    """Live ``fuse_inode`` objects in the kernel, every FUSE mount's (None: unreadable)."""
    try:
        for line in Path("/proc/slabinfo").read_text().splitlines():
            if line.startswith("fuse_inode "):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def figures(mountpoint: Path, pid: int) -> dict[str, object]:
    status = root_ctl(mountpoint)
    return {
        "kernel_inodes": int(status["kernel_inodes"]),
        "rss_mb": proc_status_mb(pid, "VmRSS") or 0.0,
        "cache": status.get("cache", "?"),
        "fuse_inode": fuse_inodes(),
    }


def one_run(checkout: Path, work: Path, files: int) -> dict[str, object]:
    agent, mountpoint = make_agent_dir(work / "agent"), work / "mnt"
    args = sessionfs_args(mountpoint, agent, "--no-agents", "--no-archive")
    with mounted(args, mountpoint, cwd=checkout) as daemon:
        (session,) = (mountpoint / "sessions" / "--bench-writes--").iterdir()
        append_dir = session / "append"
        mount_appends(append_dir, WARM_FILES, 10**6)  # the session loaded
        time.sleep(SETTLE_SECONDS)
        before = figures(mountpoint, daemon.pid)
        chunks = []
        for start in range(0, files, CHUNK):
            count = min(CHUNK, files - start)
            cpu, wall = daemon_cpu_seconds(mountpoint), time.perf_counter()
            mount_appends(append_dir, count, start)
            wall = time.perf_counter() - wall
            chunks.append((wall / count, (daemon_cpu_seconds(mountpoint) - cpu) / count))
        time.sleep(SETTLE_SECONDS)
        after = figures(mountpoint, daemon.pid)
    return {"before": before, "after": after, "first": chunks[0], "last": chunks[-1]}


def show(checkout: Path, result: dict[str, object], files: int) -> str:
    before, after = result["before"], result["after"]
    assert isinstance(before, dict) and isinstance(after, dict)
    first, last = result["first"], result["last"]
    assert isinstance(first, tuple) and isinstance(last, tuple)
    slab = (
        f"{after['fuse_inode'] - before['fuse_inode']:+d}"
        if before["fuse_inode"] is not None and after["fuse_inode"] is not None
        else "?"
    )
    return (
        f"{checkout}: {files} files; kernel_inodes {before['kernel_inodes']} -> "
        f"{after['kernel_inodes']}; RSS {before['rss_mb']:.1f} -> {after['rss_mb']:.1f} MB "
        f"({after['rss_mb'] - before['rss_mb']:+.1f}); fuse_inode objects {slab}; "
        f"cache {before['cache']!r} -> {after['cache']!r}; a file, first {CHUNK}: "
        f"{first[0] * 1e6:.0f} us, CPU {first[1] * 1e6:.0f} us; last {CHUNK}: "
        f"{last[0] * 1e6:.0f} us, CPU {last[1] * 1e6:.0f} us"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    checkouts = [c.resolve() for c in args.checkouts]
    for round_ in range(args.rounds):
        order = checkouts if round_ % 2 == 0 else checkouts[::-1]
        for checkout in order:
            loads = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            with tempfile.TemporaryDirectory(prefix="sessionfs-append-inodes-") as tmp:
                result = one_run(checkout, Path(tmp), args.files)
            print(f"round {round_} {show(checkout, result, args.files)}; load {loads}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
