"""Greps over ``transcripts/`` at page-cache speed (issue 26, point 5): the mount against
raw ``grep`` over the JSONL and against the ceiling, a bare pyfuse3 fs serving the same
transcript bytes under the same names from memory.

    python bench/grep_ceiling.py [--sessions 60] [--entries 400] [--rounds 15]
                                 [--old CHECKOUT] [--new CHECKOUT]
                                 [--first-rounds N] [--no-first | --no-warm] [--runs N]

The `bench.corpus` agent dir is mounted by each checkout (``--new``: this one by
default; ``--old``: a second one, e.g. ``git worktree add --detach ../before main``),
each with a fresh cache dir after the page cache is dropped, and its first
``grep -rl WORD transcripts/`` is timed against raw ``grep -rl WORD`` over the session
files, cold too. Then what the mount serves (``transcripts/`` and every
``sessions/*/*/transcript.md``) is copied out and served by two bare pyfuse3 fs
(`bench_mount.serve_bare`): one whose ``flush`` is not implemented (the kernel then
sends none: the protocol's floor) and one answering it (what a filesystem that takes
writes, like sessionfs, must do). Warm, each grep runs once per round in an order that
alternates by round, for ``--rounds`` rounds, once each daemon's search index is
built: ``grep -rl WORD transcripts/`` and
``grep -l WORD sessions/*/*/transcript.md`` (the shell's glob included) over each
mount, raw over the session files. Prints medians, the ratio to raw warm, the share of
each ceiling reached (ceiling seconds / mount seconds) and the CPU time each daemon
spent per grep (the process's CPU clock: ns, not 10 ms ticks, every thread's, those
that ended during the grep included, and its render workers'), the median over the
rounds (steadier than wall time on a shared machine).
What the bare fs serve is copied out through every checkout's mount (the daemon that
served the copy alone was slower afterwards: the slots were not equal), and with
``--runs N`` the warm measurement is taken N times, the checkouts' slots (which is
mounted first) swapped from run to run, then summarized: median (range) of the runs.
A round during which the machine's page cache shrank (another process dropped it) is
discarded and run again. ``--first-rounds N`` takes the first greps N times, alternated,
and prints their medians; ``--no-warm`` stops after them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_mount, corpus
from bench.ab_reads import mounted_from
from bench.bench_scale import wait_for_search
from bench.common import mounted
from bench.entries_walk import process_cpu_seconds

TIMEOUT = 600.0
#: The bare fs serving the same bytes: the arguments each is served with.
CEILINGS = {"bare": [], "bare+flush": ["--answer-flush"]}
#: A round whose page cache shrank below this share of what it was is done again.
DISTURBED = 0.8
#: ``grep -l`` over every session dir's transcript, as a user types it (glob in $2)
SESSION_DIRS_GREP = 'grep -l "$1" "$2"/sessions/*/*/transcript.md'


@dataclass
class Target:
    """One tree grepped: its root, and the pid whose CPU time a grep costs (None: raw)."""

    name: str
    root: Path
    pid: int | None
    seconds: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def page_cache_kb() -> int:
    """The machine's page cache (``Cached``): another process's ``drop_caches`` or
    memory pressure empties it, and a warm grep is then cold."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1])
    raise RuntimeError("no Cached in /proc/meminfo")


def reaped_children_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process's children that ended and were waited for
    (clock ticks): a render worker that exited during a round."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process's live descendants (the daemon's render workers
    and multiprocessing's resource tracker)."""
    total = 0.0
    with contextlib.suppress(OSError):  # (ended meanwhile)
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    total += process_cpu_seconds(int(child)) + children_cpu_seconds(int(child))
    return total


def daemon_cpu_seconds(pid: int) -> float:
    """What a daemon has cost so far: its own CPU and its render workers', live and
    ended."""
    return process_cpu_seconds(pid) + children_cpu_seconds(pid) + reaped_children_cpu_seconds(pid)


def grep_command(kind: str, word: str, root: Path) -> list[str]:
    if kind == "transcripts":
        return ["grep", "-rl", word, str(root / "transcripts")]
    return ["sh", "-c", SESSION_DIRS_GREP, "sh", word, str(root)]


def raw_command(word: str, agent: Path) -> list[str]:
    return ["grep", "-rl", word, str(agent / "sessions")]


def timed(args: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):  # 1: no match
        raise RuntimeError(f"{args} exited {result.returncode}: {result.stderr[-300:]}")
    return elapsed, result.stdout


def run_once(target: Target, kind: str, args: list[str]) -> str:
    before = daemon_cpu_seconds(target.pid) if target.pid is not None else 0.0
    elapsed, out = timed(args)
    target.seconds.setdefault(kind, []).append(elapsed)
    if target.pid is not None:
        target.cpu.setdefault(kind, []).append(daemon_cpu_seconds(target.pid) - before)
    return out


def first_greps(
    checkouts: dict[str, Path], built: corpus.Corpus, word: str, work: Path, rounds: int = 1
) -> None:
    """Each checkout's first grep of ``transcripts/`` (fresh daemon and cache dir, page
    cache dropped) against raw cold, taken right before each; ``rounds`` times, the
    order alternating by round, medians. Also the mount's start (from the daemon's
    launch to a ready mount point) and the CPU the daemon (since its start) and its
    render workers (their start-up included) spent by the grep's end."""
    print("\nfirst grep -rl WORD transcripts/ (fresh daemon and cache dir, page cache dropped)")
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    names = list(checkouts)
    for at in range(rounds):
        for name in names if at % 2 == 0 else names[::-1]:
            bench_mount.drop_page_cache()
            raw, _ = timed(raw_command(word, built.agent_dir))
            bench_mount.drop_page_cache()
            launched = time.perf_counter()
            with mounted_from(checkouts[name], built.agent_dir, work / f"first-{name}", 256) as (
                mnt,
                pid,
            ):
                ready = time.perf_counter() - launched
                first, out = timed(grep_command("transcripts", word, mnt))
                cpu = process_cpu_seconds(pid)
                workers = children_cpu_seconds(pid) + reaped_children_cpu_seconds(pid)
            row = {"first": first, "raw": raw, "ratio": first / raw, "cpu": cpu, "ready": ready}
            row["workers"] = workers
            for key, value in row.items():
                figures[name].setdefault(key, []).append(value)
            print(
                f"  {name}: {first:.2f} s vs {raw:.3f} s raw cold = {first / raw:.2f}x "
                f"(aim <= 5x); daemon CPU {cpu:.2f} s, its workers' {workers:.2f} s; "
                f"mount ready in {ready:.2f} s; "
                f"{len(out.split())} files found; load {load_average()}"
            )
    if rounds > 1:
        print(f"  medians of {rounds} rounds:")
        for name, samples in figures.items():
            med = {key: statistics.median(values) for key, values in samples.items()}
            print(
                f"  {name}: {med['first']:.3f} s vs {med['raw']:.3f} s raw cold; ratio "
                f"{med['ratio']:.2f}x; daemon CPU {med['cpu']:.2f} s, its workers' "
                f"{med['workers']:.2f} s; mount ready in {med['ready']:.2f} s"
            )


def copy_out(mnt: Path, dest: Path) -> Path:
    """What the bare fs serves: ``transcripts/`` and each session dir's
    ``transcript.md``, the same bytes under the same names."""
    shutil.copytree(mnt / "transcripts", dest / "transcripts")
    for transcript in mnt.glob("sessions/*/*/transcript.md"):
        target = dest / transcript.relative_to(mnt)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(transcript, target)
    return dest


def warm_rounds(targets: list[Target], agent: Path, word: str, rounds: int) -> None:
    raw = next(t for t in targets if t.pid is None)

    def read_all() -> None:
        """A read of each, unrecorded: what the warm ones find in the page cache."""
        for target in targets:
            for kind in ("transcripts", "session dirs"):
                if target is not raw:
                    timed(grep_command(kind, word, target.root))
        timed(raw_command(word, agent))

    read_all()
    for target in targets:  # its first build would compete with the greps
        if (target.root / "ctl").exists():
            wait_for_search(target.root, TIMEOUT)
    done = discarded = 0
    while done < rounds and discarded < 2 * rounds:
        order = targets if (done + discarded) % 2 == 0 else targets[::-1]
        cached = page_cache_kb()
        for target in order:
            if target is raw:
                run_once(raw, "raw", raw_command(word, agent))
                continue
            for kind in ("transcripts", "session dirs"):
                run_once(target, kind, grep_command(kind, word, target.root))
        if page_cache_kb() >= DISTURBED * cached:
            done += 1
            continue
        discarded += 1  # the page cache was dropped meanwhile: "warm" was not
        for target in targets:
            for samples in (*target.seconds.values(), *target.cpu.values()):
                samples.pop()
        read_all()
    print(f"\n{discarded} rounds discarded: the page cache shrank during them")


def report(targets: list[Target], ceilings: list[Target], rounds: int) -> None:
    raw = statistics.median(next(t for t in targets if t.pid is None).seconds["raw"])
    print(f"\nwarm, median of {rounds} rounds (alternated); raw grep -rl WORD: {raw * 1000:.1f} ms")
    for kind in ("transcripts", "session dirs"):
        print(f"  {'grep -rl WORD transcripts/' if kind == 'transcripts' else SESSION_DIRS_GREP}")
        for target in targets:
            if target.pid is None:
                continue
            mine = statistics.median(target.seconds[kind])
            cpu = statistics.median(target.cpu[kind])
            shares = ", ".join(
                f"{statistics.median(c.seconds[kind]) / mine:.2f} of {c.name}"
                for c in ceilings
                if c is not target
            )
            print(
                f"    {target.name:>12}: {mine * 1000:6.1f} ms = {mine / raw:.2f}x raw warm; "
                f"daemon CPU {cpu * 1000:5.1f} ms a grep{'; ' + shares if shares else ''}"
            )


def warm_run(
    order: list[tuple[str, Path]],
    built: corpus.Corpus,
    word: str,
    work: Path,
    args: argparse.Namespace,
) -> tuple[list[Target], list[Target]]:
    """One warm measurement: each checkout mounted (in ``order``), the ceilings beside
    them, `warm_rounds`; returns every target and the ceilings."""
    with ExitStack() as stack:
        targets = [Target("raw", built.agent_dir, None)]
        for name, checkout in order:
            mnt, pid = stack.enter_context(
                mounted_from(checkout, built.agent_dir, work / f"warm-{name}", 256)
            )
            targets.append(Target(name, mnt, pid))
        # Copied out through every mount, the same requests in each: a daemon that
        # served the copy was slower afterwards than one that did not (the slots'
        # bias, docs/benchmarks.md). The bare fs serve the last copy.
        for at, target in enumerate(targets[1:]):
            tree = copy_out(target.root, work / f"tree-{at}")
            if at < len(targets) - 2:
                shutil.rmtree(tree)
        ceilings = []
        for name, extra in CEILINGS.items():
            if args.ceiling not in ("both", name):
                continue
            mnt = work / name / "mnt"
            serve = [sys.executable, bench_mount.__file__, "--serve-tree", str(mnt), str(tree)]
            daemon = stack.enter_context(mounted([*serve, *extra], mnt))
            ceilings.append(Target(name, mnt, daemon.pid))
        targets += ceilings
        warm_rounds(targets, built.agent_dir, word, args.rounds)
    return targets, ceilings


def summarize(runs: list[list[Target]]) -> None:
    """Each mount's medians over the runs of its per-run medians."""
    print(f"\nover the {len(runs)} runs (slots swapped from run to run): median (range)")
    names = [t.name for t in runs[0] if t.pid is not None]
    ceiling = "bare+flush" if "bare+flush" in names else names[-1]
    for kind in ("transcripts", "session dirs"):
        print(f"  {'grep -rl WORD transcripts/' if kind == 'transcripts' else SESSION_DIRS_GREP}")
        for name in names:
            walls, cpus, shares = [], [], []
            for targets in runs:
                mine = next(t for t in targets if t.name == name)
                top = next(t for t in targets if t.name == ceiling)
                walls.append(statistics.median(mine.seconds[kind]))
                cpus.append(statistics.median(mine.cpu[kind]))
                shares.append(statistics.median(top.seconds[kind]) / walls[-1])
            print(
                f"    {name:>12}: {_spread(walls, 1000, 1)} ms; daemon CPU "
                f"{_spread(cpus, 1000, 2)} ms a grep; {_spread(shares, 1, 2)} of {ceiling}"
            )


def _spread(values: list[float], scale: float, digits: int) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid * scale:.{digits}f} ({low * scale:.{digits}f}-{high * scale:.{digits}f})"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--entries", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--new", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--old", type=Path, help="a checkout of the code before")
    parser.add_argument("--no-first", action="store_true", help="skip the cold first greps")
    parser.add_argument(
        "--first-rounds", type=int, default=1, help="first greps of each checkout (medians)"
    )
    parser.add_argument("--no-warm", action="store_true", help="the first greps only")
    parser.add_argument(
        "--runs", type=int, default=1, help="warm runs, the checkouts' slots swapped each run"
    )
    parser.add_argument(
        "--ceiling", choices=["both", *CEILINGS], default="both", help="the bare fs to mount"
    )
    args = parser.parse_args(argv)
    built, _ = corpus.ensure(corpus.CorpusParams(args.sessions, args.entries))
    word = corpus.RARE_WORD
    checkouts = {"new": args.new.resolve()}
    if args.old is not None:
        checkouts = {"old": args.old.resolve(), **checkouts}
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="sessionfs-grep-ceiling-") as tmp:
        work = Path(tmp)
        if not args.no_first:
            first_greps(checkouts, built, word, work, args.first_rounds)
        if args.no_warm:
            print(f"\nload average before {load_before}, after {load_average()}")
            return 0
        runs: list[list[Target]] = []
        for run in range(args.runs):
            # The slots swap from run to run: each checkout is mounted first as often
            # as second (the order the rounds alternate in starts with the first).
            order = list(checkouts.items())
            if run % 2 == 1:
                order.reverse()
            load_run = load_average()
            targets, ceilings = warm_run(order, built, word, work / f"run-{run}", args)
            print(
                f"\nrun {run + 1} of {args.runs}: {len(built.files)} sessions x {args.entries} "
                f"entries; load average before {load_run}, after {load_average()}"
            )
            report(targets, ceilings, args.rounds)
            runs.append(targets)
        if args.runs > 1:
            summarize(runs)
        print(f"\nload average before {load_before}, after {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
