"""Where a warm grep's time goes in the daemon, request by request, against the bare
pyfuse3 fs serving the same transcript bytes (issue 26, point 5).

    python -m bench.bench_grep_requests [CHECKOUT ...] [--sessions 60] [--greps 150]
                                        [--kind transcripts|session-dirs]

`bench.grep_ceiling`'s wall-time share of the ceiling swings from run to run by more
than a change of the daemon's work per request, so this runs the same daemons (each
checkout's mount of the `bench.corpus` agent dir, and `bench_mount`'s bare fs with
``flush`` answered, serving what the mount serves) with their request handlers timed
in thread CPU (`bench.timed_requests`), warms them up, then greps each ``--greps``
times in alternating order and prints per request the calls a grep and the median CPU
of one call, the handlers' sum a grep, and the daemon's whole CPU a grep (its process
CPU clock: the rest is pyfuse3's and trio's dispatch, the same code in both). What the
bare fs serves is copied out through every mount, as `bench.grep_ceiling` does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import corpus, timed_requests
from bench.bench_scale import wait_for_search
from bench.common import mounted
from bench.grep_ceiling import copy_out, daemon_cpu_seconds, grep_command

WARM_GREPS = 3


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--entries", type=int, default=400)
    parser.add_argument("--greps", type=int, default=150)
    parser.add_argument("--kind", choices=["transcripts", "session-dirs"], default="transcripts")
    args = parser.parse_args(argv)
    kind = "transcripts" if args.kind == "transcripts" else "session dirs"
    built, _ = corpus.ensure(corpus.CorpusParams(args.sessions, args.entries))
    script = os.path.abspath(timed_requests.__file__)
    with (
        tempfile.TemporaryDirectory(prefix="sessionfs-grep-requests-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        root = Path(tmp)
        sides: dict[str, tuple[Path, int, Path]] = {}  # name -> mountpoint, pid, times
        for n, checkout in enumerate(args.checkouts):
            mnt, times, cache = root / f"m{n}", root / f"{n}.json", root / f"cache{n}"
            command = [sys.executable, script, str(times), "sessionfs-reads", "mount", str(mnt)]
            command += ["--foreground", "--agent-dir", str(built.agent_dir), "--read-only"]
            command += ["--no-agents", "--cache-dir", str(cache)]
            daemon = stack.enter_context(mounted(command, mnt, cwd=checkout.resolve()))
            sides[f"{n}: {checkout}"] = (mnt, daemon.pid, times)
        tree: Path | None = None
        for n, (mnt, _, _) in enumerate(sides.values()):  # the same copy through each
            if tree is not None:
                shutil.rmtree(tree)  # only the last copy is served
            tree = copy_out(mnt, root / f"tree{n}")
        assert tree is not None
        bare, times = root / "bare", root / "bare.json"
        command = [sys.executable, script, str(times), "bare-tree", str(bare), str(tree)]
        daemon = stack.enter_context(mounted([*command, "--answer-flush"], bare))
        sides["bare+flush"] = (bare, daemon.pid, times)
        word = corpus.RARE_WORD
        for mnt, _, _ in sides.values():
            for each in ("transcripts", "session dirs"):
                _grep(each, word, mnt)
        for mnt, _, _ in list(sides.values())[:-1]:
            wait_for_search(mnt, 600)
        for _ in range(WARM_GREPS):
            for mnt, _, _ in sides.values():
                _grep(kind, word, mnt)
        for _, pid, _ in sides.values():
            os.kill(pid, signal.SIGUSR1)  # what was timed so far is dropped
        time.sleep(0.2)
        names = list(sides)
        cpu = {name: daemon_cpu_seconds(sides[name][1]) for name in names}
        walls: dict[str, list[float]] = {name: [] for name in names}
        for turn in range(args.greps):
            for name in names if turn % 2 == 0 else names[::-1]:
                walls[name].append(_grep(kind, word, sides[name][0]))
        cpu = {name: daemon_cpu_seconds(sides[name][1]) - cpu[name] for name in names}
        stack.close()  # unmounted: each daemon has written its times
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{args.greps} warm greps ({args.kind}) each, alternated; load average {load}")
        print("per grep; each request: calls a grep x median us of thread CPU a call")
        for name in names:
            took = timed_requests.cpu_times(json.loads(sides[name][2].read_text()))
            report(name, took, args.greps, cpu[name], statistics.median(walls[name]))
    return 0


def _grep(kind: str, word: str, mnt: Path) -> float:
    start = time.perf_counter()
    subprocess.run(grep_command(kind, word, mnt), capture_output=True, check=False, timeout=600)
    return time.perf_counter() - start


def report(name: str, took: dict[str, list[int]], greps: int, cpu: float, wall: float) -> None:
    # (a request made less than every other grep is a stray: other work shrank the
    # page cache)
    cells, handlers = timed_requests.per_unit(took, timed_requests.READ_REQUESTS, greps, greps / 2)
    print(
        f"  {name}: {cells}; handlers {handlers:.0f} us, daemon CPU "
        f"{cpu / greps * 1e6:.0f} us, wall {wall * 1e3:.1f} ms (median)"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
