"""Shared helpers for the benchmarks: timing, result tables, a mounted daemon, RSS.

Benchmarks print ratios against a baseline measured in the same run, so the figures
mean something on any machine.
"""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

# The mount harness of the FUSE tests: one way to start, wait for and stop a mount.
from tests.support.mount import guard_mount, isolated_env, stop_mount, wait_for_mount
from tests.support.mount import mount_command as sessionfs_args

__all__ = [
    "COMMON_TERMS",
    "FIXTURES",
    "REPO",
    "Row",
    "best_of",
    "common_term_queries",
    "mounted",
    "percentile",
    "print_table",
    "rss_mb",
    "sessionfs_args",
    "timed",
]

REPO = Path(__file__).resolve().parents[1]
#: The real agent session files the tests use too (see tests/fixtures/README.md).
FIXTURES = REPO / "tests" / "fixtures"
MOUNT_TIMEOUT = 60.0

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` 0.95: p95) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


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
    #: None: a figure shown for itself, with no target
    ok: bool | None


def print_table(title: str, rows: list[Row]) -> None:
    headers = ("measurement", "sessionfs", "baseline", "ratio", "target", "")
    cells = [headers] + [
        (r.name, r.ours, r.baseline, f"{r.ratio:.2f}", r.target, _verdict(r.ok)) for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  " + "  ".join("-" * width for width in widths))
    sys.stdout.flush()


def _verdict(ok: bool | None) -> str:
    return "" if ok is None else "ok" if ok else "MISSED"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@contextmanager
def mounted(
    args: list[str], mountpoint: Path, cwd: Path = REPO
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a FUSE daemon (``args``, foreground) at ``mountpoint`` until the block ends;
    ``cwd``: the checkout whose ``sessionfs`` it runs (``python -m`` imports from there)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    # The machine user's own Claude Code and Codex dirs are never mounted (a bench
    # that wants another agent's sessions passes --claude-dir, which wins).
    process = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, env=isolated_env())
    guard = guard_mount(mountpoint, process.pid)  # (a bench killed midway leaves no mount)
    try:
        wait_for_mount(mountpoint, process, MOUNT_TIMEOUT)
        yield process
    finally:
        try:
            stop_mount(mountpoint, process, timeout=20)
        finally:
            guard.release()


#: How many of the index's most frequent terms `common_term_queries` takes.
COMMON_TERMS = 50


def common_term_queries(db: Path, count: int = COMMON_TERMS) -> list[tuple[str, str]]:
    """The ``count`` terms in the most entries of the index at ``db`` (its FTS5
    vocabulary), then the distinct 3-letter prefixes of those that are longer; as
    (kind, query) pairs like `bench.corpus.SEARCH_QUERIES`."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.vocabulary USING fts5vocab(main, fts, row)")
        terms = [
            row[0]
            for row in conn.execute(
                "SELECT term FROM temp.vocabulary ORDER BY doc DESC, term LIMIT ?", (count,)
            )
        ]
    finally:
        conn.close()
    prefixes = dict.fromkeys(term[:3] for term in terms if len(term) > 3)
    return [("common term", term) for term in terms] + [
        ("3-letter prefix", prefix) for prefix in prefixes if prefix not in terms
    ]
