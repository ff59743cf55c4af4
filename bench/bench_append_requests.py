"""Where a one-file append's time goes, request by request, against the ceiling.

    python -m bench.bench_append_requests [CHECKOUT ...]   # e.g. an old worktree, then .

`bench.bench_append_ceiling`'s ratio of wall times swings with the disk (rounds of one
run from 0.5 to 4 on a shared VM), so a change of a few per cent of the daemon's work
cannot show there. This runs the same daemons (the ceiling, `bench.minimal_append_fs`,
and each checkout's mount of `bench_writes`' agent dir) with their request handlers
timed in thread CPU (`bench.timed_requests`), writes `FILES` files into each, `SLICE`
at a time in rotating order, and prints per request the calls a file and the median
CPU of one call, the handlers' sum a file, the daemon's whole CPU a file and the
difference of the two (outside the handlers: pyfuse3's and trio's dispatch, the
inotify watch, the search indexer, the invalidator thread, the garbage collector).
Every column counts the same files: the `WARM_FILES` written first (the session's
load) are left out of the handlers' times as of the daemon's CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import timed_requests
from bench.bench_append_ceiling import daemon_cpu_seconds
from bench.bench_writes import make_agent_dir, mount_appends
from bench.common import mounted

FILES = int(os.environ.get("SESSIONFS_REQUESTS_FILES", "2000"))
SLICE = 10
WARM_FILES = 50


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    args = parser.parse_args(argv)
    script = os.path.abspath(timed_requests.__file__)
    with (
        tempfile.TemporaryDirectory(prefix="sessionfs-requests-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        root = Path(tmp)
        sides: dict[str, tuple[Path, Path, Path]] = {}  # name -> mountpoint, append/, times
        target = root / "ceiling-target.jsonl"
        target.write_bytes(b"")
        times = root / "ceiling.json"
        command = [sys.executable, script, str(times), "ceiling", str(root / "c"), str(target)]
        stack.enter_context(mounted(command, root / "c"))
        sides["ceiling"] = (root / "c", root / "c" / "append", times)
        for n, checkout in enumerate(args.checkouts):
            agent, mountpoint = make_agent_dir(root / f"s{n}"), root / f"m{n}"
            times = root / f"{n}.json"
            command = [sys.executable, script, str(times), "sessionfs", "mount", str(mountpoint)]
            command += ["--foreground", "--agent-dir", str(agent)]
            stack.enter_context(mounted(command, mountpoint, cwd=checkout.resolve()))
            (session,) = (mountpoint / "sessions" / "--bench-writes--").iterdir()
            sides[str(checkout)] = (mountpoint, session / "append", times)
        for _, append_dir, _ in sides.values():  # the first files load the session
            mount_appends(append_dir, WARM_FILES, 10**6)
        names = list(sides)
        cpu = {name: daemon_cpu_seconds(sides[name][0]) for name in names}
        measured_from = time.monotonic_ns()  # the handlers' calls timed from here on
        for turn in range(FILES // SLICE):
            shift = turn % len(names)
            for name in names[shift:] + names[:shift]:
                mount_appends(sides[name][1], SLICE, turn * SLICE)
        cpu = {name: daemon_cpu_seconds(sides[name][0]) - cpu[name] for name in names}
        stack.close()  # unmounted: each daemon has written its times
        times = {
            name: timed_requests.cpu_times(json.loads(sides[name][2].read_text()), measured_from)
            for name in names
        }
        report(names, times, cpu)
    return 0


def report(names: list[str], times: dict[str, dict[str, list[int]]], cpu: dict[str, float]) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{FILES} files each after {WARM_FILES} to warm up, load average {load}")
    print("per file; each request: calls a file x median us of thread CPU a call")
    for name in names:
        cells, handlers = timed_requests.per_unit(times[name], timed_requests.REQUESTS, FILES)
        daemon = cpu[name] / FILES * 1e6
        print(
            f"  {name}: {cells}; handlers {handlers:.0f} us, "
            f"daemon CPU {daemon:.0f} us, outside the handlers {daemon - handlers:.0f} us"
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
