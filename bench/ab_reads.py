"""A/B of the read path: the code of two checkouts, mounted side by side over the same
corpus, read alternately, each read cold.

    python bench/ab_reads.py OLD_CHECKOUT NEW_CHECKOUT [--sessions 60] [--entries 400]
                             [--rounds 3] [--cache-mb 256]

Issue 26: a 4x regression of the cold read of every ``entries/*.json`` went unseen,
because nothing compared two builds on the same machine at the same moments. Here, in
each round, each checkout's daemon (run from its checkout: its own ``sessionfs`` and
``core``) mounts the `bench.corpus` agent dir with a fresh cache dir after the page
cache is dropped, and a script reads every ``entries/*.json`` in both `ORDERS`
(`bench.entries_walk`); right after each, a bare pyfuse3 fs serving the same bytes under
the same names (mounted afresh: cold too) is read the same way, so each ratio is taken
under the same load. Which checkout goes first alternates by round. Prints, per order,
each checkout's median seconds, its median ratio to the bare fs (bare seconds over its
seconds: 1.0 is as fast as FUSE gets from Python), the daemons' RSS and session loads,
and the median CPU seconds of the daemon and of the bare fs (steadier than the wall
time when other work shares the machine). Not part of ``make bench``: it needs two checkouts, e.g.
``git worktree add --detach ../before <rev>``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_mount, corpus
from bench.common import mounted
from bench.entries_walk import (
    ORDERS,
    cache_loads,
    cpu_seconds,
    daemon_memory_mb,
    entries_dirs,
    snapshot,
    walk,
)
from tests.support.mount import isolated_env, mount_command, stop_mount, wait_for_mount

WALK_TIMEOUT = 600.0


@dataclass
class Side:
    """One checkout's figures: per order, the seconds of each round."""

    name: str
    checkout: Path
    seconds: dict[str, list[float]] = field(default_factory=lambda: {o: [] for o in ORDERS})
    #: the bare fs's seconds, read right after each of ``seconds``
    bare: dict[str, list[float]] = field(default_factory=lambda: {o: [] for o in ORDERS})
    rss: dict[str, list[float]] = field(default_factory=lambda: {o: [] for o in ORDERS})
    peak: dict[str, list[float]] = field(default_factory=lambda: {o: [] for o in ORDERS})
    loads: dict[str, list[int | None]] = field(default_factory=lambda: {o: [] for o in ORDERS})
    #: CPU seconds the daemon spent on each walk, and the bare fs on the one after it
    cpu: dict[str, list[float]] = field(default_factory=lambda: {o: [] for o in ORDERS})
    bare_cpu: dict[str, list[float]] = field(default_factory=lambda: {o: [] for o in ORDERS})


@contextlib.contextmanager
def mounted_from(
    checkout: Path, agent: Path, work: Path, cache_mb: int
) -> Iterator[tuple[Path, int]]:
    """The daemon of ``checkout`` over ``agent``, with a fresh cache dir; yields the
    mount point and the daemon's pid."""
    mnt = work / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    args = ["--cache-mb", str(cache_mb), "--cache-dir", str(cache), "--read-only", "--no-agents"]
    process = subprocess.Popen(
        mount_command(mnt, agent, *args),
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=isolated_env(),
    )
    try:
        wait_for_mount(mnt, process, 60)
        yield mnt, process.pid
    finally:
        stop_mount(mnt, process, timeout=20)


def read_side(
    side: Side, order: str, agent: Path, files: list[Path], work: Path, cache_mb: int
) -> None:
    """One cold read of every entry file through ``side``'s daemon."""
    bench_mount.drop_page_cache()
    with mounted_from(side.checkout, agent, work / side.name, cache_mb) as (mnt, pid):
        cpu = cpu_seconds(pid)
        done = walk(entries_dirs(mnt, files), order, WALK_TIMEOUT)
        side.cpu[order].append(cpu_seconds(pid) - cpu)
        rss, peak = daemon_memory_mb(pid)
        side.loads[order].append(cache_loads(mnt))
    side.seconds[order].append(done.seconds)
    side.rss[order].append(rss)
    side.peak[order].append(peak)


def read_bare(order: str, tree: Path, sessions: int, work: Path) -> tuple[float, float]:
    """The bare fs's seconds and CPU seconds for one cold read."""
    mnt = work / "bare" / "mnt"
    args = [sys.executable, bench_mount.__file__, "--serve-bare", str(mnt), str(tree)]
    with mounted(args, mnt) as process:
        cpu = cpu_seconds(process.pid)
        seconds = walk([mnt / f"d{n}" for n in range(sessions)], order, WALK_TIMEOUT).seconds
        return seconds, cpu_seconds(process.pid) - cpu


def report(sides: list[Side], files: int, cache_mb: int) -> None:
    for order in ORDERS:
        print(f"\n{order}: {files:,} files")
        for side in sides:
            mine = statistics.median(side.seconds[order])
            ratios = [b / s for b, s in zip(side.bare[order], side.seconds[order], strict=True)]
            loads = sorted({str(n) if n is not None else "n/a" for n in side.loads[order]})
            print(
                f"  {side.name}: {mine:.2f} s, {statistics.median(ratios):.2f}x bare (each "
                f"round: {', '.join(f'{r:.2f}' for r in ratios)}; bare "
                f"{statistics.median(side.bare[order]):.2f} s); daemon RSS "
                f"{max(side.rss[order]):.0f} MB, peak {max(side.peak[order]):.0f} MB (bound "
                f"{cache_mb + 100}); sessions loaded {'/'.join(loads)}; daemon CPU "
                f"{statistics.median(side.cpu[order]):.2f} s, bare "
                f"{statistics.median(side.bare_cpu[order]):.2f} s"
            )
    old, new = sides
    for order in ORDERS:
        speedup = statistics.median(old.seconds[order]) / statistics.median(new.seconds[order])
        print(f"{order}: the new code {speedup:.2f}x as fast as the old")


def checkouts_parser(description: str, rounds: int) -> argparse.ArgumentParser:
    """The arguments of an A/B of two checkouts: OLD NEW [--rounds] [--cache-mb]."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("old", type=Path, help="checkout of the code before")
    parser.add_argument("new", type=Path, help="checkout of the code after")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--cache-mb", type=int, default=256)
    return parser


def main(argv: list[str]) -> int:
    parser = checkouts_parser(__doc__.splitlines()[0], rounds=3)
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--entries", type=int, default=400)
    args = parser.parse_args(argv)
    built, _ = corpus.ensure(corpus.CorpusParams(args.sessions, args.entries))
    files = built.files
    sides = [Side("old", args.old.resolve()), Side("new", args.new.resolve())]
    with tempfile.TemporaryDirectory(prefix="sessionfs-ab-reads-") as tmp:
        work = Path(tmp)
        with mounted_from(sides[1].checkout, built.agent_dir, work / "snapshot", args.cache_mb) as (
            mnt,
            _,
        ):
            tree = snapshot(entries_dirs(mnt, files), work / "tree")
        count = sum(1 for _ in tree.glob("*/*"))
        for round_ in range(args.rounds):
            turn = sides if round_ % 2 == 0 else sides[::-1]
            for order in ORDERS:
                for side in turn:
                    read_side(side, order, built.agent_dir, files, work, args.cache_mb)
                    seconds, cpu = read_bare(order, tree, len(files), work)
                    side.bare[order].append(seconds)
                    side.bare_cpu[order].append(cpu)
            print(f"round {round_ + 1}/{args.rounds} done", flush=True)
        print(
            f"\ncold read of every entries/*.json: {len(files)} sessions x {args.entries} "
            f"entries, --cache-mb {args.cache_mb}, {args.rounds} rounds (page cache dropped, "
            "fresh daemon and cache dir each)"
        )
        report(sides, count, args.cache_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
