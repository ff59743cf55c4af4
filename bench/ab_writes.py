"""A/B of the write path: the code of two checkouts, mounted side by side, same moments.

    python bench/ab_writes.py OLD_CHECKOUT NEW_CHECKOUT [files|stream|switches]

On a shared VM a change of 10-30% drowns in the drift between two runs of
`bench_writes` (its baseline's fsync alone swings 3x within minutes). Here each
checkout's daemon mounts its own copy of `bench_writes`' agent dir, and one client
writes `SLICE` files (or stream lines, or ``ln -sfn`` switches) into one, then the
other, alternating which goes first, until each has had `COUNT`: both see the same
load. Prints each side's time per operation and how much faster the new one is.
``switches`` first fills each session with 800 entries and lists its ``entries/``
(what `bench_writes` has done by the time it switches). Not part of ``make bench``:
it needs two checkouts (e.g. ``git worktree add --detach ../before <rev>``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_writes import (
    make_agent_dir,
    mount_appends,
    open_stream,
    stream_appends,
    switch_leaf,
)
from tests.support.mount import isolated_env, mount_command, stop_mount, wait_for_mount

COUNT = int(os.environ.get("SESSIONFS_AB_COUNT", "1600"))
SLICE = 20
SWITCHES_PER_SLICE = 80


@contextlib.contextmanager
def mounted_from(checkout: Path, root: Path) -> Iterator[Path]:
    """The daemon of ``checkout`` (run from there: its own ``sessionfs`` package) over a
    fresh copy of `bench_writes`' agent dir in ``root``; yields the session dir."""
    agent = make_agent_dir(root)
    mountpoint = root / "mnt"
    mountpoint.mkdir()
    process = subprocess.Popen(
        mount_command(mountpoint, agent),
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=isolated_env(),
    )
    try:
        wait_for_mount(mountpoint, process)
        (session,) = (mountpoint / "sessions" / "--bench-writes--").iterdir()
        yield session
    finally:
        stop_mount(mountpoint, process, timeout=20)


def slices_of(
    kind: str, session: Path, stack: contextlib.ExitStack
) -> tuple[Callable[[int], None], int]:
    """``(run, size)``: ``run(start)`` does one slice of ``kind`` into ``session``, ``size``
    operations numbered from ``start``."""
    if kind == "files":
        return functools.partial(mount_appends, session / "append", SLICE), SLICE
    if kind == "stream":
        stream = stack.enter_context(open_stream(session / "append"))
        return functools.partial(stream_appends, stream, SLICE), SLICE
    mount_appends(session / "append", 800, 10**6)
    names = sorted(os.listdir(session / "entries"))[:10]
    targets = [f"entries/{name}" for name in names]
    return lambda _start: switch_leaf(session, targets, SWITCHES_PER_SLICE), SWITCHES_PER_SLICE


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="checkout of the code before")
    parser.add_argument("new", type=Path, help="checkout of the code after")
    parser.add_argument("kind", nargs="?", default="files", choices=("files", "stream", "switches"))
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="sessionfs-ab-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        sides = []
        for name, checkout in (("old", args.old), ("new", args.new)):
            session = stack.enter_context(mounted_from(checkout.resolve(), Path(tmp) / name))
            sides.append(slices_of(args.kind, session, stack))
        seconds, done = [0.0, 0.0], [0, 0]
        turn = 0
        while min(done) < COUNT:
            for side in (0, 1) if turn % 2 == 0 else (1, 0):
                run, size = sides[side]
                started = time.perf_counter()
                run(done[side])
                seconds[side] += time.perf_counter() - started
                done[side] += size
            turn += 1
    old, new = (seconds[i] / done[i] for i in (0, 1))
    print(
        f"{args.kind}: old {old * 1e6:,.0f} us, new {new * 1e6:,.0f} us an operation "
        f"({done[0]:,} each, alternating): the new code {old / new:.2f}x as fast"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
