"""A cold read of every ``entries/*.json`` as a user's script does it, against a bare
pyfuse3 fs serving the same bytes (issue 26). Used by ``make bench`` (`bench_scale`)
and the read-path A/B (`ab_reads`).

Two orders, the two ways a script goes through a corpus:

* ``listed first``: list every session's ``entries/`` and collect the paths, then read
  them (the cache's least recently used sessions are then the ones read next: what an
  LRU that lets go of sessions too soon gets wrong);
* ``session by session``: list one ``entries/``, read its files, go on to the next.

Each walk runs in a child process (a stuck read times out) and reports seconds, files
and bytes; the daemon's RSS (now and its peak) and the loads its root ``ctl`` counts
(``cache_loads``, where the build has it) are read right after, and the CPU time the
daemon spent on the walk (`cpu_seconds`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ORDERS = ("listed first", "session by session")

WALKER = """
import os, sys, time
order, dirs = sys.argv[1], sys.stdin.read().split("\\n")[:-1]
def read(path):
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += len(chunk)
    return n
start = time.perf_counter()
files = size = 0
if order == "listed first":
    paths = [os.path.join(d, name) for d in dirs for name in os.listdir(d)]
    for path in paths:
        size += read(path)
        files += 1
else:
    for d in dirs:
        for name in os.listdir(d):
            size += read(os.path.join(d, name))
            files += 1
print(time.perf_counter() - start, files, size)
"""


class WalkFailed(RuntimeError):
    pass


@dataclass
class Walk:
    seconds: float
    files: int
    size: int

    @property
    def rate(self) -> float:
        return self.files / self.seconds


def walk(dirs: list[Path], order: str, timeout: float) -> Walk:
    """Read every file of ``dirs`` in ``order`` (one of `ORDERS`) in a child process."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", WALKER, order],
            input="".join(f"{d}\n" for d in dirs),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired as error:
        raise WalkFailed(f"the walk took more than {timeout:.0f} s") from error
    except subprocess.CalledProcessError as error:
        raise WalkFailed(f"the walk failed: {error.stderr[-300:]}") from error
    seconds, files, size = result.stdout.split()
    return Walk(float(seconds), int(files), int(size))


def entries_dirs(mnt: Path, session_files: list[Path]) -> list[Path]:
    """The ``entries/`` dir in the mount of each session file (``<project>/<stem>``)."""
    return [
        mnt / "sessions" / f.parent.name / f.name.removesuffix(".jsonl") / "entries"
        for f in session_files
    ]


def snapshot(dirs: list[Path], dest: Path) -> Path:
    """Copy each of ``dirs`` (a mount's ``entries/``) to ``dest/<n>/``: what the bare fs
    serves (`bench_mount.bare_layout`), the same bytes under the same names."""
    shutil.rmtree(dest, ignore_errors=True)
    for n, directory in enumerate(dirs):
        shutil.copytree(directory, dest / str(n))
    return dest


def daemon_memory_mb(pid: int) -> tuple[float, float]:
    """The daemon's (VmRSS, VmHWM) in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process ``pid`` used so far: on a shared machine a
    steadier figure than the wall time, which other work stretches."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """A process's CPU time, every thread's, those that ended included, in ns where
    the kernel lets another process read its CPU clock (Linux does: the clock id of
    ``clock_getcpuclockid``), else in clock ticks. A warm grep costs a daemon a few
    ms, less than a clock tick, and trio's worker threads come and go (the threads'
    own schedstat missed those that ended during a round)."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2) / 1e9  # CPUCLOCK_SCHED of the process
    except OSError:
        return cpu_seconds(pid)


def cache_loads(mnt: Path) -> int | None:
    """``cache_loads`` from the root ``ctl`` (None: this build does not count them)."""
    for line in (mnt / "ctl").read_text().splitlines():
        key, _, value = line.partition(": ")
        if key == "cache_loads":
            return int(value)
    return None
