"""Shared helpers for the benchmarks: timing, result tables, a mounted daemon, RSS.

Benchmarks print ratios against a baseline measured in the same run, so the figures
mean something on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[1]
#: The real agent session files the tests use too (see tests/fixtures/README.md).
FIXTURES = REPO / "tests" / "fixtures"
MOUNT_TIMEOUT = 60.0

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def best_of(runs: int, fn: Callable[[], T]) -> tuple[float, T]:
    """The fastest of ``runs`` timings (the least disturbed by the machine)."""
    best: tuple[float, T] | None = None
    for _ in range(runs):
        elapsed, result = timed(fn)
        if best is None or elapsed < best[0]:
            best = (elapsed, result)
    assert best is not None
    return best


@dataclass
class Row:
    name: str
    ours: str
    baseline: str
    ratio: float
    target: str
    ok: bool


def print_table(title: str, rows: list[Row]) -> None:
    headers = ("measurement", "sessionfs", "baseline", "ratio", "target", "")
    cells = [headers] + [
        (r.name, r.ours, r.baseline, f"{r.ratio:.2f}", r.target, "ok" if r.ok else "MISSED")
        for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  " + "  ".join("-" * width for width in widths))
    sys.stdout.flush()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def wait_for_mount(path: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not os.path.ismount(path):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"mount at {path} did not come up (exit {process.poll()})")
        time.sleep(0.02)


def unmount(path: Path, process: subprocess.Popen[bytes]) -> None:
    if os.path.ismount(path):
        subprocess.run(["fusermount3", "-u", str(path)], check=False, timeout=60)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=20)
    if os.path.ismount(path):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], check=False, timeout=60)


@contextmanager
def mounted(args: list[str], mountpoint: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run a FUSE daemon (``args``, foreground) at ``mountpoint`` until the block ends."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        wait_for_mount(mountpoint, process)
        yield process
    finally:
        unmount(mountpoint, process)


def sessionfs_args(mountpoint: Path, agent_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "sessionfs",
        "mount",
        str(mountpoint),
        "--foreground",
        "--agent-dir",
        str(agent_dir),
        *extra,
    ]
