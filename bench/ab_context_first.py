"""A/B of the first ``cat context.json`` of the 2.4 MB v1 fixture (issue 26 point 3):
the code of two checkouts, each in a fresh daemon, read alternately.

    python bench/ab_context_first.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 7]

`bench.bench_scale`'s ``--only-fixture`` gives one build's best of 3 against the orjson
parse; this compares two builds at the same moments. In each round, for each checkout
(which goes first alternates by round): the first orjson parse of the file in a fresh
process (`bench_scale.fresh_parse_seconds`, the baseline), then a fresh daemon of the
checkout (run from there: its own ``sessionfs`` and ``core``) with a fresh cache dir,
and the first read of ``sessions/<project>/<session>/context.json`` through it (the
path's lookups included, as ``cat`` does). Prints, per checkout, the median
milliseconds, the median ratio of each read to the parse taken just before it, the
median CPU the daemon spent on the read (from ``/proc/<pid>/task/*/schedstat``:
nanoseconds, where ``/proc/<pid>/stat``'s ticks are 10 ms), and whether both
checkouts served the same bytes. Not part of ``make bench``: it needs two checkouts,
e.g. ``git worktree add --detach ../before <rev>``.

``--in-process``: the daemon's own work alone, without FUSE, threads or the event loop
(which a busy machine stretches most): in a fresh interpreter run from the checkout,
what a first lookup of ``context.json`` does (`LoadedSession.load` warming it, then its
bytes), wall and CPU time, against the same parse in a fresh interpreter (CPU time too).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ab_reads import checkouts_parser, mounted_from
from bench.bench_scale import FIXTURE, FIXTURES, fresh_parse_seconds, fresh_run, load_line

PROJECT = "--fixture--"

#: `LoadedSession.load` of the fixture warming ``context.json``, then its bytes: what the
#: daemon's lookup and read do, run from a checkout (its own sessionfs); prints wall and
#: CPU seconds and the bytes' length.
IN_PROCESS = """
import os, sys, time
from pathlib import Path
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.session_ref import SessionRef
path = Path(sys.argv[1])
st = os.stat(path)
session = LoadedSession(ref=SessionRef("p", path.stem, path, {}, st.st_mtime_ns, st.st_size))
session.whole_read_limit = 1 << 30
start, cpu = time.perf_counter(), time.thread_time()
session.load("context.json")
data = session.rendered("context.json")
print(time.perf_counter() - start, time.thread_time() - cpu, len(data))
"""
#: `bench_scale.FRESH_PARSE`, with the CPU time too.
PARSE = """
import sys, time
from core import jsonl
start, cpu = time.perf_counter(), time.thread_time()
jsonl.load_entries_from_file(sys.argv[1])
print(time.perf_counter() - start, time.thread_time() - cpu)
"""


@dataclass
class Side:
    """One checkout's figures, a value per round."""

    name: str
    checkout: Path
    seconds: list[float] = field(default_factory=list)
    parses: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    served: set[bytes] = field(default_factory=set)
    #: ``--in-process``: the parse's CPU seconds (``cpu`` is then the render's)
    parse_cpu: list[float] = field(default_factory=list)


def cpu_seconds(pid: int) -> float:
    """CPU seconds every thread of ``pid`` ran so far (schedstat's first field, ns)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def read_side(side: Side, agent: Path, work: Path, cache_mb: int) -> None:
    """One baseline parse, then one first read of the fixture's context.json."""
    side.parses.append(fresh_parse_seconds(agent / "sessions" / PROJECT / FIXTURE))
    with mounted_from(side.checkout, agent, work / side.name, cache_mb) as (mnt, pid):
        context = mnt / "sessions" / PROJECT / FIXTURE.removesuffix(".jsonl") / "context.json"
        before = cpu_seconds(pid)
        start = time.perf_counter()
        data = context.read_bytes()
        side.seconds.append(time.perf_counter() - start)
        side.cpu.append(cpu_seconds(pid) - before)
    side.served.add(data)


def run_side_in_process(side: Side, agent: Path) -> None:
    """One fresh parse, then one fresh in-process first ``context.json``."""
    path = agent / "sessions" / PROJECT / FIXTURE
    seconds, cpu = fresh_run(PARSE, side.checkout, path)
    side.parses.append(seconds)
    side.parse_cpu.append(cpu)
    seconds, cpu, size = fresh_run(IN_PROCESS, side.checkout, path)
    side.seconds.append(seconds)
    side.cpu.append(cpu)
    side.served.add(str(int(size)).encode())  # the length: the bytes stay in the child


def report(sides: list[Side], rounds: int, loads: list[str]) -> None:
    in_process = bool(sides[0].parse_cpu)
    how = "in-process, a fresh interpreter" if in_process else "a fresh daemon and cache dir"
    size = (FIXTURES / FIXTURE).stat().st_size
    print(
        f"\nfirst cat context.json of {FIXTURE} ({size:,} bytes), {rounds} rounds, "
        f"{how} each; load avg {' | '.join(loads)}"
    )
    for side in sides:
        ratios = [s / p for s, p in zip(side.seconds, side.parses, strict=True)]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(
            f"  {side.name}: {statistics.median(side.seconds) * 1000:.1f} ms, "
            f"{statistics.median(ratios):.2f}x the orjson parse (each round: {each}; parse "
            f"{statistics.median(side.parses) * 1000:.1f} ms); "
            f"{'CPU' if in_process else 'daemon CPU'} {statistics.median(side.cpu) * 1000:.1f} ms"
        )
        if in_process:
            cpu_ratios = [c / p for c, p in zip(side.cpu, side.parse_cpu, strict=True)]
            print(
                f"    CPU: {statistics.median(cpu_ratios):.2f}x the parse's "
                f"({statistics.median(side.parse_cpu) * 1000:.1f} ms)"
            )
    old, new = sides
    what = "length" if in_process else "bytes"
    print(f"  same {what} from both: {'yes' if len(old.served | new.served) == 1 else 'NO'}")
    print(
        f"the new code {statistics.median(old.seconds) / statistics.median(new.seconds):.2f}x "
        "as fast as the old"
    )


def main(argv: list[str]) -> int:
    parser = checkouts_parser(__doc__.splitlines()[0], rounds=7)
    parser.add_argument(
        "--in-process", action="store_true", help="the daemon's work alone, no mount"
    )
    args = parser.parse_args(argv)
    sides = [Side("old", args.old.resolve()), Side("new", args.new.resolve())]
    loads = [load_line()]
    with tempfile.TemporaryDirectory(prefix="sessionfs-ab-context-") as tmp:
        work = Path(tmp)
        project = work / "agent" / "sessions" / PROJECT
        project.mkdir(parents=True)
        shutil.copyfile(FIXTURES / FIXTURE, project / FIXTURE)
        for round_ in range(args.rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                if args.in_process:
                    run_side_in_process(side, work / "agent")
                else:
                    read_side(side, work / "agent", work, args.cache_mb)
            print(f"round {round_ + 1}/{args.rounds} done", flush=True)
        loads.append(load_line())
    report(sides, args.rounds, loads)
    return 0


if __name__ == "__main__":
    os.umask(0o077)
    sys.exit(main(sys.argv[1:]))
