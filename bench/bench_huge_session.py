"""One very long session (issue 26 point 6: cost grows with the work touched, not
the session): a flat xcsh session of 200,000 short entries (~49 MB), each figure
taken in a fresh daemon once its search index is up to date:

* the first ``ls entries/`` (its load, the names, each entry file's size and time);
* the daemon's RSS (peak and now) after that listing, against ``--cache-mb`` + 100 MB;
* the first append through ``append/`` (``cp`` of a JSON message);
* the first ``ls path/`` (200,000 symlinks) and an ``ls -l path/`` right after (each
  link's ``readlink``), with the daemon's CPU time during each and its RSS after;
* the first ``ls -l entries/`` against the first ``ls entries/``, each in a fresh
  daemon, alternated for ``--rounds`` rounds (medians): the daemon's CPU and the
  command's own CPU during each (``ls -l`` makes no request per file: its extra is
  the kernel's ``statx`` and ``getxattr`` of every file), the daemon's RSS peak;
* a ``stat`` of every entry file by name with no listing before, in a fresh daemon:
  a lookup each, what any command costs once the kernel holds no dentry of them.
* ``--renderings``: the first ``cat`` of each of `RENDERINGS` (``--only NAME``: of
  those named; the render caches emptied, a fresh daemon each), its time, the peak RSS
  of the daemon and of its render workers during it, the daemon's RSS a while after
  (``malloc_trim``) and a hash of the bytes (for old against new: ``--checkout DIR``
  runs another checkout's daemon); and `AFTER_LISTING`'s first read after an
  ``ls entries/``.

The baseline column is one ``orjson`` parse of every line of the file (what any
reader of the whole file pays once); the targets are the issue's absolute ones.

    .venv/bin/python -m bench.bench_huge_session [--entries N] [--work DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.bench_scale import proc_cpu_seconds, proc_status_mb, wait_for_search
from bench.common import REPO, Row, mounted, print_table, sessionfs_args, timed
from bench.worker_rss import WorkersRssSampler

SESSION_ID = "c265bade-a0ed-585f-695d-50f310b4fef7"
PROJECT_DIR = "--work-project-00--"
CACHE_MB = 256
#: How long the mount gets to index the session before the timed figures (the index
#: is kept in the cache dir: the later mounts find it up to date).
INDEX_SETTLE_SECONDS = 3.0
FIRST_LS_TARGET_S = 2.0
FIRST_APPEND_TARGET_S = 0.1
#: issue 26 point 6, as the lead set it: what a user types as often as ``ls``
LONG_LISTING_TARGET_RATIO = 2.0


def write_session(path: Path, entries: int) -> None:
    """A flat chain of ``entries`` short user/assistant messages (~240 bytes a line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "session", "version": 3, "id": SESSION_ID, "cwd": "/work/project-00"}
    header["timestamp"] = "2026-01-01T00:47:19.278Z"
    lines = [orjson.dumps(header)]
    parent = None
    for i in range(entries):
        entry_id = f"{i:08x}"
        text = f"message number {i} about the cache and the render path"
        message = {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": text}],
            "timestamp": 1767228468922 + i * 1000,
        }
        lines.append(
            orjson.dumps(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:"
                    f"{i % 60:02d}.101Z",
                    "message": message,
                }
            )
        )
        parent = entry_id
    path.write_bytes(b"\n".join(lines) + b"\n")


@dataclass
class PathListing:
    """A fresh daemon's first ``ls path/`` and the ``ls -l path/`` after it."""

    ls_s: float
    ls_cpu_s: float
    ls_l_s: float
    ls_l_cpu_s: float
    #: the daemon's RSS peak after both (MB)
    peak_mb: float


def ls_seconds(*argv: str | Path) -> tuple[float, int]:
    """How long ``argv`` took, and how many lines it printed."""
    return timed(
        lambda: subprocess.run(
            [str(a) for a in argv], capture_output=True, check=True, timeout=300
        ).stdout.count(b"\n")
    )


def first_path_listing(
    mount_args: list[str], mnt: Path, links: Path, expected: int, checkout: Path = REPO
) -> PathListing:
    """`PathListing` of ``links`` (``path/`` of one session of ``expected`` links), in a
    fresh daemon of ``checkout`` once its search index is up to date."""
    with mounted(mount_args, mnt, cwd=checkout) as daemon:
        time.sleep(INDEX_SETTLE_SECONDS)
        wait_for_search(mnt, 300)  # the file was rewritten since its last index
        cpu = proc_cpu_seconds(daemon.pid)
        ls_s, listed = ls_seconds("ls", links)
        ls_cpu = proc_cpu_seconds(daemon.pid) - cpu
        cpu = proc_cpu_seconds(daemon.pid)
        ls_l_s, long_listed = ls_seconds("ls", "-l", links)
        ls_l_cpu = proc_cpu_seconds(daemon.pid) - cpu
        peak = proc_status_mb(daemon.pid, "VmHWM") or 0.0
    assert listed == expected and long_listed == expected + 1, (listed, long_listed)
    return PathListing(ls_s, ls_cpu, ls_l_s, ls_l_cpu, peak)


@dataclass
class FirstListing:
    """One fresh daemon's first listing of ``entries/``: the command's wall time, the
    daemon's CPU and the command's own (user + system: the kernel's work for it)
    during it, and the daemon's RSS peak after it."""

    wall_s: float
    daemon_cpu_s: float
    command_cpu_s: float
    peak_mb: float


def children_cpu_seconds() -> float:
    """User + system CPU of this process's children waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_listing(
    mount_args: list[str], mnt: Path, argv: list[str | Path], expected: int, checkout: Path = REPO
) -> FirstListing:
    """`FirstListing` of ``argv`` (an ``ls`` of ``entries/`` printing ``expected``
    lines) in a fresh daemon of ``checkout`` once its search index is up to date."""
    with mounted(mount_args, mnt, cwd=checkout) as daemon:
        time.sleep(INDEX_SETTLE_SECONDS)
        wait_for_search(mnt, 300)
        cpu, own = proc_cpu_seconds(daemon.pid), children_cpu_seconds()
        wall, listed = ls_seconds(*argv)
        cpu, own = proc_cpu_seconds(daemon.pid) - cpu, children_cpu_seconds() - own
        peak = proc_status_mb(daemon.pid, "VmHWM") or 0.0
    assert listed == expected, (argv, listed, expected)
    return FirstListing(wall, cpu, own, peak)


def long_listing_rows(
    mount_args: list[str],
    mnt: Path,
    entries: Path,
    count: int,
    rounds: int,
    bound_mb: int,
    checkout: Path = REPO,
) -> list[Row]:
    """The first ``ls -l entries/`` against the first ``ls entries/``, each in a fresh
    daemon, alternated (``ls`` first in even rounds) over ``rounds``: medians."""
    plain: list[FirstListing] = []
    long: list[FirstListing] = []
    for round_ in range(rounds):
        steps: list[tuple[list[FirstListing], list[str | Path], int]] = [
            (plain, ["ls", entries], count),
            (long, ["ls", "-l", entries], count + 1),  # and its "total" line
        ]
        for into, argv, expected in steps if round_ % 2 == 0 else steps[::-1]:
            listing = first_listing(mount_args, mnt, argv, expected, checkout)
            into.append(listing)
            print(
                f"  round {round_}, {' '.join(map(str, argv[:-1]))}: {listing.wall_s:.2f} s,"
                f" daemon CPU {listing.daemon_cpu_s:.2f} s, its own {listing.command_cpu_s:.2f} s,"
                f" daemon peak {listing.peak_mb:.0f} MB, load {os.getloadavg()[0]:.1f}",
                flush=True,
            )

    def median(side: list[FirstListing], figure: str) -> float:
        return statistics.median(getattr(listing, figure) for listing in side)

    ratio = statistics.median(b.wall_s / a.wall_s for a, b in zip(plain, long, strict=True))
    walls = ", ".join(f"{b.wall_s:.2f}" for b in long)
    peak = max(listing.peak_mb for listing in long)
    return [
        Row(
            f"first ls -l entries/, {rounds} fresh daemons (median)",
            f"{median(long, 'wall_s'):.2f} s ({walls})",
            f"first ls {median(plain, 'wall_s'):.2f} s",
            ratio,
            f"<= {LONG_LISTING_TARGET_RATIO:.0f}x first ls",
            ratio <= LONG_LISTING_TARGET_RATIO,
        ),
        Row(
            "  daemon CPU during ls -l / during ls",
            f"{median(long, 'daemon_cpu_s'):.2f} s",
            f"{median(plain, 'daemon_cpu_s'):.2f} s",
            median(long, "daemon_cpu_s") / max(median(plain, "daemon_cpu_s"), 1e-3),
            "none: no request per file",
            None,
        ),
        Row(
            "  ls -l's own CPU / ls's (statx, getxattr)",
            f"{median(long, 'command_cpu_s'):.2f} s",
            f"{median(plain, 'command_cpu_s'):.2f} s",
            median(long, "command_cpu_s") / max(median(plain, "command_cpu_s"), 1e-3),
            "none: the kernel's and ls's",
            None,
        ),
        Row(
            "daemon RSS peak after ls -l",
            f"{peak:.0f} MB",
            f"{max(listing.peak_mb for listing in plain):.0f} MB after ls",
            peak / max(max(listing.peak_mb for listing in plain), 1.0),
            f"<= {bound_mb} MB",
            peak <= bound_mb,
        ),
    ]


def stat_by_name(
    mount_args: list[str], mnt: Path, entries: Path, count: int, checkout: Path = REPO
) -> FirstListing:
    """A fresh daemon's ``stat`` of every entry file by its name, with no listing
    before: a lookup each, what the kernel asks when it holds no dentry from a
    listing (it let them go, or a script names the files); as a `FirstListing`
    (the command's own CPU: this process's, the loop included)."""
    with mounted(mount_args, mnt, cwd=checkout) as daemon:
        time.sleep(INDEX_SETTLE_SECONDS)
        wait_for_search(mnt, 300)
        cpu, own = proc_cpu_seconds(daemon.pid), time.process_time()
        start = time.perf_counter()
        # by path, as a shell's commands name them (an open dir handle would list the
        # dir in the daemon, and the lookups would find the listing's rows)
        sizes = [os.stat(f"{entries}/{i:08x}.json").st_size for i in range(count)]
        wall = time.perf_counter() - start
        cpu, own = proc_cpu_seconds(daemon.pid) - cpu, time.process_time() - own
        peak = proc_status_mb(daemon.pid, "VmHWM") or 0.0
    assert len(sizes) == count and min(sizes) > 0
    return FirstListing(wall, cpu, own, peak)


#: The renderings `first_reads` reads, each once in a fresh daemon ...
RENDERINGS = ("context.json", "transcript.md", "transcript.html", "tree.txt", "stats.json")
#: ... and those it reads again after an ``ls entries/`` (the session then held compact).
AFTER_LISTING = ("context.json",)
#: How long after a read the daemon's RSS is read again (its trim runs within a second).
SETTLED_SECONDS = 3.0
#: The render workers' caches under the cache dir (the search index there is kept).
RENDER_CACHES = ("renders", "pages", "contexts")


@dataclass
class FirstRead:
    """A fresh daemon's first ``cat`` of one rendering of the session."""

    name: str
    seconds: float
    #: the daemon's peak (VmHWM) and its RSS `SETTLED_SECONDS` after the read (MB)
    daemon_peak_mb: float
    daemon_after_mb: float
    #: the render workers' largest RSS seen during the read (MB; 0: none ran)
    workers_peak_mb: float
    digest: str


def first_reads(
    mount_args: list[str],
    mnt: Path,
    session_dir: Path,
    cache: Path,
    checkout: Path = REPO,
    only: tuple[str, ...] = RENDERINGS,
) -> list[FirstRead]:
    """`FirstRead` of each of `RENDERINGS` (those in ``only``), each in a fresh daemon
    of ``checkout`` once its search index is up to date, with the render caches emptied
    before."""
    reads = []
    wanted = [(n, False) for n in RENDERINGS] + [(n, True) for n in AFTER_LISTING]
    for name, listed in [(n, listed) for n, listed in wanted if n in only]:
        for rendered in (c for agent in cache.glob("agent-*") for c in agent.iterdir()):
            if rendered.name in RENDER_CACHES:
                shutil.rmtree(rendered)
        with mounted(mount_args, mnt, cwd=checkout) as daemon:
            time.sleep(INDEX_SETTLE_SECONDS)
            wait_for_search(mnt, 300)
            if listed:
                ls_seconds("ls", session_dir / "entries")
            sampler = WorkersRssSampler(daemon.pid)
            try:
                sampler.reset()
                seconds, data = timed((session_dir / name).read_bytes)
                workers = sampler.workers_max
            finally:
                sampler.stop()
            peak = proc_status_mb(daemon.pid, "VmHWM") or 0.0
            time.sleep(SETTLED_SECONDS)
            after = proc_status_mb(daemon.pid, "VmRSS") or 0.0
        digest = hashlib.sha256(data).hexdigest()[:16]
        label = f"{name} after ls entries/" if listed else name
        reads.append(FirstRead(label, seconds, peak, after, workers, digest))
    return reads


def rendering_rows(reads: list[FirstRead], bound: int) -> list[Row]:
    return [
        Row(
            f"first cat {r.name} (sha256 {r.digest})",
            f"{r.seconds:.2f} s",
            f"peak {r.daemon_peak_mb:.0f} MB, after {r.daemon_after_mb:.0f}, "
            f"workers {r.workers_peak_mb:.0f}",
            max(r.daemon_peak_mb, r.workers_peak_mb) / bound,
            f"<= {bound} MB",
            max(r.daemon_peak_mb, r.workers_peak_mb) <= bound,
        )
        for r in reads
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--work", type=Path, default=None, help="default: a temp dir")
    parser.add_argument(
        "--rounds", type=int, default=2, help="fresh daemons for ls and for ls -l (default 2)"
    )
    parser.add_argument(
        "--renderings", action="store_true", help="only the first reads of RENDERINGS"
    )
    parser.add_argument(
        "--checkout", type=Path, default=REPO, help="the checkout whose daemon runs"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=RENDERINGS,
        help="with --renderings: read only this one (repeat for more; default: all)",
    )
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="sessionfs-huge-"))
    agent = work / "agent"
    session_file = agent / "sessions" / PROJECT_DIR / f"2026-01-01T00-47-19-278Z_{SESSION_ID}.jsonl"
    write_session(session_file, args.entries)
    pristine = session_file.read_bytes()
    size_mb = len(pristine) / 1e6
    mnt, cache = work / "mnt", work / "cache"
    mount_args = sessionfs_args(
        mnt,
        agent,
        "--no-agents",
        "--no-archive",
        "--cache-mb",
        str(CACHE_MB),
        "--cache-dir",
        str(cache),
    )
    session_dir = mnt / "sessions" / PROJECT_DIR / session_file.stem

    parse_s, _ = timed(lambda: [orjson.loads(x) for x in pristine.splitlines()])
    with mounted(mount_args, mnt, cwd=args.checkout):
        time.sleep(INDEX_SETTLE_SECONDS)  # the search index's first build
        wait_for_search(mnt, 300)  # a loaded machine takes longer than the settle
    bound = CACHE_MB + 100
    if args.renderings:
        only = tuple(args.only or RENDERINGS)
        reads = first_reads(mount_args, mnt, session_dir, cache, args.checkout, only)
        print_table(
            f"First reads of one session of {args.entries:,} entries ({size_mb:.0f} MB), "
            f"--cache-mb {CACHE_MB}, {args.checkout.resolve().name}",
            rendering_rows(reads, bound),
        )
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
        return 0

    rows: list[Row] = []
    with mounted(mount_args, mnt, cwd=args.checkout) as daemon:
        time.sleep(INDEX_SETTLE_SECONDS)
        ls_s, listed = timed(
            lambda: subprocess.run(
                ["ls", str(session_dir / "entries")], capture_output=True, check=True, timeout=300
            ).stdout.count(b"\n")
        )
        peak = proc_status_mb(daemon.pid, "VmHWM") or 0.0
        now = proc_status_mb(daemon.pid, "VmRSS") or 0.0
    assert listed == args.entries, listed
    rows.append(
        Row(
            "first ls entries/",
            f"{ls_s:.2f} s",
            f"{parse_s:.2f} s",
            ls_s / parse_s,
            f"<= {FIRST_LS_TARGET_S:.0f} s",
            ls_s <= FIRST_LS_TARGET_S,
        )
    )
    rows.append(
        Row(
            "daemon RSS peak / now after it",
            f"{peak:.0f} / {now:.0f} MB",
            f"{size_mb:.0f} MB file",
            peak / size_mb,
            f"<= {bound} MB",
            peak <= bound,
        )
    )

    message = work / "msg.json"
    message.write_bytes(orjson.dumps({"role": "user", "content": "hello from the bench"}))
    with mounted(mount_args, mnt, cwd=args.checkout):
        time.sleep(INDEX_SETTLE_SECONDS)
        wait_for_search(mnt, 300)
        append_s, _ = timed(
            lambda: subprocess.run(
                ["cp", str(message), str(session_dir / "append" / "msg.json")],
                check=True,
                timeout=300,
            )
        )
    last = orjson.loads(session_file.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[1])
    assert last["message"]["content"] == "hello from the bench", last
    assert last["parentId"] == f"{args.entries - 1:08x}", last
    session_file.write_bytes(pristine)
    rows.append(
        Row(
            "first append through append/",
            f"{append_s * 1000:.0f} ms",
            f"{parse_s:.2f} s",
            append_s / parse_s,
            f"<= {FIRST_APPEND_TARGET_S * 1000:.0f} ms",
            append_s <= FIRST_APPEND_TARGET_S,
        )
    )
    path = first_path_listing(mount_args, mnt, session_dir / "path", args.entries, args.checkout)
    rows.append(
        Row(
            "first ls path/ (daemon CPU)",
            f"{path.ls_s:.2f} s ({path.ls_cpu_s:.2f} s)",
            f"{parse_s:.2f} s",
            path.ls_s / parse_s,
            f"<= {FIRST_LS_TARGET_S:.0f} s",
            path.ls_s <= FIRST_LS_TARGET_S,
        )
    )
    rows.append(
        Row(
            "ls -l path/ after it (daemon CPU)",
            f"{path.ls_l_s:.2f} s ({path.ls_l_cpu_s:.2f} s)",
            f"{parse_s:.2f} s",
            path.ls_l_s / parse_s,
            "none: a readlink each",  # pyfuse3 offers no kernel symlink cache
            None,
        )
    )
    rows.append(
        Row(
            "daemon RSS peak after them",
            f"{path.peak_mb:.0f} MB",
            f"{size_mb:.0f} MB file",
            path.peak_mb / size_mb,
            f"<= {bound} MB",
            path.peak_mb <= bound,
        )
    )
    rows += long_listing_rows(
        mount_args, mnt, session_dir / "entries", args.entries, args.rounds, bound, args.checkout
    )
    by_name = stat_by_name(mount_args, mnt, session_dir / "entries", args.entries, args.checkout)
    rows.append(
        Row(
            "stat of each entry by name, no listing (daemon CPU)",
            f"{by_name.wall_s:.2f} s ({by_name.daemon_cpu_s:.2f} s), peak {by_name.peak_mb:.0f} MB",
            f"{parse_s:.2f} s",
            by_name.wall_s / parse_s,
            "none: a lookup each",
            None,
        )
    )
    print_table(
        f"One session of {args.entries:,} entries ({size_mb:.0f} MB), --cache-mb {CACHE_MB}", rows
    )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
