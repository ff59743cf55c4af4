"""Run a FUSE daemon with each request handler timed in thread CPU (for
`bench.bench_append_requests`).

    python bench/timed_requests.py OUT.json ceiling MOUNTPOINT TARGET_FILE
    python bench/timed_requests.py OUT.json sessionfs mount MOUNTPOINT --foreground ...

The handlers of `REQUESTS` are wrapped before the daemon starts; at exit ``OUT.json``
gets, per request, one ``[started, took]`` pair a call: when it started
(``time.monotonic_ns``, the clock every process of the machine shares, so the bench
can leave out the calls made before a moment of its own) and its CPU time in ns
(``time.thread_time_ns``: the daemon's handlers never yield to the scheduler on the
append path, so the interval is the handler's own work). ``sessionfs`` runs the
``sessionfs`` command of the current directory's checkout (put first on ``sys.path``,
as ``python -m`` would), so one copy of this script times an old checkout and a new
one alike.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

#: The requests a file written into ``append/`` costs (what the ceiling answers too).
REQUESTS = ("lookup", "getattr", "create", "write", "flush", "release", "forget")


def timed_handlers(operations: type, times: dict[str, list[tuple[int, int]]]) -> None:
    """Wrap ``operations``' handlers of `REQUESTS`: each call appends when it started
    and its thread CPU time (ns) to ``times[name]``."""
    for name in REQUESTS:
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


def main(argv: list[str]) -> None:
    out, kind, *rest = argv
    times: dict[str, list[tuple[int, int]]] = {}
    atexit.register(lambda: _dump(out, times))
    if kind == "ceiling":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from bench import minimal_append_fs

        timed_handlers(minimal_append_fs.MinimalAppendFs, times)
        minimal_append_fs.serve(*rest)
        return
    sys.path.insert(0, os.getcwd())  # the checkout's own sessionfs, not an installed one
    from sessionfs.commands.cli import main as sessionfs_main
    from sessionfs.fs.ops import SessionFsOperations

    timed_handlers(SessionFsOperations, times)
    sys.argv = [sys.argv[0], *rest]
    sessionfs_main()


def _dump(out: str, times: dict[str, list[tuple[int, int]]]) -> None:
    with open(out, "w", encoding="utf-8") as file:
        json.dump(times, file)


if __name__ == "__main__":
    main(sys.argv[1:])
