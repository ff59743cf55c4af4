"""One-file appends through ``append/`` against their ceiling (issue 26 point 7).

The ceiling is `bench.minimal_append_fs`: a pyfuse3 filesystem that answers the same
requests and appends each file with an fdatasync, checking and keeping nothing. Each
checkout given (default: this one) mounts its own copy of `bench_writes`' agent dir;
in each of `ROUNDS` rounds every side, the ceiling included, gets `FILES` files written
with a shell's system calls (`bench_writes.mount_appends`), `SLICE` at a time, the
order rotating from turn to turn, so all see the same load. Per side: the median over the rounds of
(the ceiling's time / the side's time) -- aim: at least 0.8 -- with the load average,
the daemon's CPU a file and how it splits over the daemon's threads.

    python -m bench.bench_append_ceiling [CHECKOUT ...]   # e.g. an old worktree, then .
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ab_writes import mounted_from
from bench.bench_writes import minimal_append_filesystem, mount_appends
from bench.entries_walk import process_cpu_seconds

ROUNDS = int(os.environ.get("SESSIONFS_CEILING_ROUNDS", "5"))
FILES = int(os.environ.get("SESSIONFS_CEILING_FILES", "200"))
#: Files a side writes before the next side's turn (the disk's fsync time drifts within
#: seconds on a shared machine: short turns see the same moments).
SLICE = 10
AIM = 0.8


def daemon_pid(mountpoint: Path) -> int:
    """The process serving ``mountpoint`` (the one whose command line names it)."""
    target = str(mountpoint).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if target in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return int(pid)
        except OSError:
            continue
    raise LookupError(f"no daemon serves {mountpoint}")


def daemon_cpu_seconds(mountpoint: Path) -> float:
    """CPU time so far of the daemon serving ``mountpoint``, all its threads, ended ones
    included, in ns where the kernel allows (`bench.entries_walk.process_cpu_seconds`)."""
    return process_cpu_seconds(daemon_pid(mountpoint))


def thread_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU time so far of each live thread of ``pid``, by thread id, in ns (the first
    figure of its ``schedstat``: another process's thread clocks cannot be read)."""
    times = {}
    for tid in map(int, os.listdir(f"/proc/{pid}/task")):
        with contextlib.suppress(OSError, ValueError):  # ended meanwhile
            ns = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0]
            times[tid] = int(ns) / 1e9
    return times


def by_thread(pid: int, before: dict[int, float], after: dict[int, float], total: float) -> str:
    """Where a daemon's CPU went between two `thread_cpu_seconds`, in µs a file: its
    main thread (the event loop: pyfuse3 and trio), its other threads alive at the end
    (the invalidator, trio's workers), and threads that ended meanwhile (the search
    indexer's: one per update) -- ``total`` (the process's CPU a file) less the others."""
    spent = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    per_file = {tid: seconds / (ROUNDS * FILES) * 1e6 for tid, seconds in spent.items()}
    main = per_file.pop(pid, 0.0)
    others = sorted(per_file.values(), reverse=True)
    ended = total * 1e6 - main - sum(others)
    shown = ", ".join(f"{us:.1f}" for us in others[:3] if us >= 0.05) or "-"
    return f"event loop {main:.0f}, other threads {shown}, ended threads {ended:.1f} us a file"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="sessionfs-ceiling-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        root = Path(tmp)
        ceiling_root = root / "ceiling"
        ceiling_root.mkdir()
        dirs = {"ceiling": stack.enter_context(minimal_append_filesystem(ceiling_root))}
        for n, checkout in enumerate(args.checkouts):
            session = stack.enter_context(mounted_from(checkout.resolve(), root / f"side{n}"))
            dirs[f"{checkout}"] = session / "append"
        for append_dir in dirs.values():  # warm: the first files load the session
            mount_appends(append_dir, 5, 10**6)
        names = list(dirs)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        mountpoints = {name: append_dir.parent for name, append_dir in dirs.items()}
        mountpoints = {
            name: next(p for p in (d, *d.parents) if os.path.ismount(p))
            for name, d in mountpoints.items()
        }
        pids = {name: daemon_pid(m) for name, m in mountpoints.items()}
        cpu_before = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
        threads_before = {name: thread_cpu_seconds(pid) for name, pid in pids.items()}
        loads = []
        for round_ in range(ROUNDS):
            took = dict.fromkeys(names, 0.0)
            for slice_ in range(FILES // SLICE):
                shift = slice_ % len(names)
                for name in names[shift:] + names[:shift]:
                    started = time.perf_counter()
                    mount_appends(dirs[name], SLICE, round_ * FILES + slice_ * SLICE)
                    took[name] += time.perf_counter() - started
            for name in names:
                seconds[name].append(took[name])
            loads.append(round(os.getloadavg()[0], 1))
        threads_after = {name: thread_cpu_seconds(pid) for name, pid in pids.items()}
        cpu = {
            name: (process_cpu_seconds(pid) - cpu_before[name]) / (ROUNDS * FILES)
            for name, pid in pids.items()
        }
        threads = {
            name: by_thread(pid, threads_before[name], threads_after[name], cpu[name])
            for name, pid in pids.items()
        }
    ceiling = seconds["ceiling"]
    print(f"{FILES} files per side and round, {ROUNDS} rounds, load average {loads}")
    print(
        f"  ceiling: median {statistics.median(ceiling) / FILES * 1e6:,.0f} us a file, "
        f"daemon CPU {cpu['ceiling'] * 1e6:,.0f} us a file"
    )
    for name in names[1:]:
        ratios = [c / s for c, s in zip(ceiling, seconds[name], strict=True)]
        per_file = statistics.median(seconds[name]) / FILES * 1e6
        mark = "ok" if statistics.median(ratios) >= AIM else "MISSED"
        print(
            f"  {name}: median {per_file:,.0f} us a file; of the ceiling: median "
            f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)}) "
            f"aim >= {AIM} {mark}; daemon CPU {cpu[name] * 1e6:,.0f} us a file"
        )
    for name in names:
        print(f"  {name} by thread: {threads[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
