"""Run a FUSE daemon with each request handler timed in thread CPU (for
`bench.bench_append_requests` and `bench.bench_grep_requests`).

    python bench/timed_requests.py OUT.json ceiling MOUNTPOINT TARGET_FILE
    python bench/timed_requests.py OUT.json sessionfs mount MOUNTPOINT --foreground ...
    python bench/timed_requests.py OUT.json sessionfs-reads mount MOUNTPOINT --foreground ...
    python bench/timed_requests.py OUT.json bare-tree MOUNTPOINT TREE [--answer-flush]

The handlers of `REQUESTS` are wrapped before the daemon starts; at exit ``OUT.json``
gets, per request, one ``[started, took]`` pair a call: when it started
(``time.monotonic_ns``, the clock every process of the machine shares, so the bench
can leave out the calls made before a moment of its own: `cpu_times`) and its CPU time
in ns (``time.thread_time_ns``: the daemon's handlers never yield to the scheduler on
the append path, so the interval is the handler's own work). ``sessionfs`` runs the
``sessionfs`` command of the current directory's checkout (put first on ``sys.path``,
as ``python -m`` would), so one copy of this script times an old checkout and a new
one alike; ``sessionfs-reads`` times the requests of a read (`READ_REQUESTS`) instead,
and ``bare-tree`` the bare pyfuse3 fs serving a dir's tree (`bench_mount.serve_bare`)
the same way (a read's handlers do yield: ``read`` may ``pread`` in a worker thread,
``open`` wait for a render; their figures are the event loop thread's CPU during the
call, without a worker's and with whatever else the loop ran meanwhile). ``SIGUSR1``
drops what was timed so far (a bench's warm-up).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: The requests a file written into ``append/`` costs (what the ceiling answers too).
REQUESTS = ("lookup", "getattr", "create", "write", "flush", "release", "forget")
#: The requests reading files and dirs costs (a ``grep -r``).
READ_REQUESTS = (
    "lookup",
    "getattr",
    "opendir",
    "readdir",
    "releasedir",
    "open",
    "read",
    "flush",
    "release",
)


def timed_handlers(
    operations: object,
    times: dict[str, list[tuple[int, int]]],
    requests: tuple[str, ...] = REQUESTS,
) -> None:
    """Wrap ``operations``' handlers (a class, or an instance) of ``requests``: each
    call appends when it started and its thread CPU time (ns) to ``times[name]``."""
    for name in requests:
        handler = getattr(operations, name)
        took = times.setdefault(name, [])

        def timed(
            handler: Callable[..., Awaitable[Any]], took: list[tuple[int, int]]
        ) -> Callable[..., Awaitable[Any]]:
            @functools.wraps(handler)
            async def wrapper(*args: Any) -> Any:
                at = time.monotonic_ns()
                started = time.thread_time_ns()
                try:
                    return await handler(*args)
                finally:
                    took.append((at, time.thread_time_ns() - started))

            return wrapper

        setattr(operations, name, timed(handler, took))


def cpu_times(dump: dict[str, list[list[int]]], since: int = 0) -> dict[str, list[int]]:
    """Per request of a daemon's dump (``OUT.json``), the CPU times (ns) of the calls
    that started at ``since`` (``time.monotonic_ns``) or later."""
    return {request: [took for at, took in calls if at >= since] for request, calls in dump.items()}


def per_unit(
    took: dict[str, list[int]], requests: tuple[str, ...], units: int, fewest: float = 1
) -> tuple[str, float]:
    """What ``took`` (a daemon's dump) says per unit of work (a file, a grep): per
    request of ``requests`` timed at least ``fewest`` times, its calls a unit and the
    median µs of one call (``"open 60.00x16.1"``), and the handlers' µs a unit."""
    cells, handlers = [], 0.0
    for request in requests:
        calls = took.get(request, [])
        if not calls or len(calls) < fewest:
            continue
        handlers += sum(calls) / 1e3 / units
        cells.append(f"{request} {len(calls) / units:.2f}x{statistics.median(calls) / 1e3:.1f}")
    return "  ".join(cells), handlers


def main(argv: list[str]) -> None:
    out, kind, *rest = argv
    times: dict[str, list[tuple[int, int]]] = {}
    atexit.register(lambda: _dump(out, times))
    signal.signal(signal.SIGUSR1, lambda *_: [took.clear() for took in times.values()])
    if kind == "bare-tree":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import pyfuse3

        from bench import bench_mount

        init = pyfuse3.init

        def timed_init(operations: object, *args: Any) -> None:
            timed_handlers(operations, times, READ_REQUESTS)
            init(operations, *args)

        pyfuse3.init = timed_init
        sys.argv = [sys.argv[0], "--serve-tree", *rest]
        bench_mount.main()
        return
    if kind == "ceiling":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from bench import minimal_append_fs

        timed_handlers(minimal_append_fs.MinimalAppendFs, times)
        minimal_append_fs.serve(*rest)
        return
    sys.path.insert(0, os.getcwd())  # the checkout's own sessionfs, not an installed one
    from sessionfs.commands.cli import main as sessionfs_main
    from sessionfs.fs.ops import SessionFsOperations

    timed_handlers(
        SessionFsOperations, times, READ_REQUESTS if kind == "sessionfs-reads" else REQUESTS
    )
    sys.argv = [sys.argv[0], *rest]
    sessionfs_main()


def _dump(out: str, times: dict[str, list[tuple[int, int]]]) -> None:
    with open(out, "w", encoding="utf-8") as file:
        json.dump(times, file)


if __name__ == "__main__":
    main(sys.argv[1:])
