"""Writing through the mount (issue 5), against baselines measured in the same run.

1. Durable appends: files dropped into ``append/`` (each ``close()`` returns only after
   the entry is fsynced) vs a Python loop doing open + ``O_APPEND`` write + fsync +
   close of a JSONL line on the same disk. Target: at least 50% of the baseline rate.
   Also the same appends as lines written to one open ``append/feed.stream`` (each
   ``write()`` returns once its line is fsynced; aim, issue 19: at least 0.4x the
   baseline), and the floor a
   FUSE daemon cannot go below: a bare pyfuse3 filesystem's round trip, measured in
   the same run, times the five requests a file costs (lookup, create, write, flush,
   and the getattr of ``append/`` that the create makes the next path walk need).
   Beside them the ceiling of any pyfuse3 daemon: the same files into
   `bench.minimal_append_fs`, which answers those requests and appends each file with
   an fdatasync but checks, parses and keeps nothing. The files are written with a
   shell's system calls (no ``isatty`` ioctl), and the baseline, the files, the
   ceiling's files, the stream's lines and the round trips are taken in alternating
   slices, so the appends against the floor (aim: 0.9) and the stream against the
   baseline compare figures of the same moments.
2. Branch switches with GNU ``ln -sfn``'s system calls (symlink to a temp name, rename
   over ``leaf``) through the mount. Target: at least 1,000 switches/s. The baseline is
   the same calls in a plain directory on the same disk.
3. The ``ln -sfn`` command itself (one process per switch), mount vs plain directory:
   a ratio only, since process start-up dominates both.

Everything lives in one temp dir (``SESSIONFS_BENCH_DIR`` or the system temp dir), so
the baseline and the mount write to the same disk.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_mount, minimal_append_fs
from bench.common import Row, mounted, print_table, sessionfs_args, timed
from core import SessionManager
from core.jsonl import dumps_line

APPENDS = int(os.environ.get("SESSIONFS_BENCH_APPENDS", "400"))
ROUND_TRIPS = 2000
#: Slices the appends, the baseline's and the round trips are taken in, alternating.
ROUNDS = 8
#: FUSE requests one file in append/ costs that must be answered before close() returns
REQUESTS_PER_FILE = 5
SWITCHES = int(os.environ.get("SESSIONFS_BENCH_SWITCHES", "2000"))
LN_COMMANDS = int(os.environ.get("SESSIONFS_BENCH_LN", "200"))


def make_agent_dir(root: Path) -> Path:
    agent = root / "agent"
    manager = SessionManager.create("/bench/writes", agent / "sessions" / "--bench-writes--")
    with manager:
        for n in range(20):
            manager.append_message(
                {"role": "user", "content": [{"type": "text", "text": f"q{n}"}], "timestamp": n}
            )
            manager.append_message(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"a{n}"}],
                    "provider": "p",
                    "model": "m",
                    "timestamp": n,
                }
            )
        manager.ensure_on_disk()
    return agent


def message_line(n: int) -> bytes:
    return dumps_line({"role": "user", "content": [{"type": "text", "text": f"bench message {n}"}]})


def baseline_appends(path: Path, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, message_line(n))
            os.fsync(fd)
        finally:
            os.close(fd)


def mount_appends(append_dir: Path, count: int, start: int = 0) -> None:
    """One file per entry with the system calls of a shell's ``> file`` (open, write,
    close): Python's ``open()`` would add an ``isatty`` ioctl, a FUSE round trip that
    neither a shell nor the floor's five requests make."""
    for n in range(start, start + count):
        fd = os.open(append_dir / f"m{n}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, message_line(n))
        finally:
            os.close(fd)


def stream_appends(fd: int, count: int, start: int = 0) -> None:
    """Lines written to an open ``append/*.stream``: each ``write()`` returns once its
    line is fsynced."""
    for n in range(start, start + count):
        os.write(fd, message_line(n))


@contextlib.contextmanager
def open_stream(append_dir: Path) -> Iterator[int]:
    fd = os.open(append_dir / "feed.stream", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def bare_filesystem(root: Path) -> Iterator[Callable[[int], float]]:
    """A bare pyfuse3 filesystem, mounted for the block; yields ``round_trips(count)``:
    the seconds of ``count`` requests to it (lookups that find nothing; their parent's
    attributes are cached, so each ``stat`` is exactly one round trip)."""
    sizes = root / "bare-sizes"
    sizes.write_text("\n")
    mountpoint = root / "bare"
    args = [sys.executable, bench_mount.__file__, "--serve-bare", str(mountpoint), str(sizes)]
    with mounted(args, mountpoint):
        os.stat(mountpoint / "d0")

        def round_trips(count: int) -> float:
            def lookups() -> None:
                for n in range(count):
                    with contextlib.suppress(FileNotFoundError):
                        os.stat(mountpoint / "d0" / f"missing{n}")

            return timed(lookups)[0]

        yield round_trips


@contextlib.contextmanager
def minimal_append_filesystem(root: Path) -> Iterator[Path]:
    """`bench.minimal_append_fs` mounted for the block, appending to a file in ``root``;
    yields its ``append/`` dir."""
    target = root / "minimal-target.jsonl"
    target.write_bytes(b"")
    mountpoint = root / "minimal"
    args = [sys.executable, minimal_append_fs.__file__, str(mountpoint), str(target)]
    with mounted(args, mountpoint):
        yield mountpoint / "append"


@dataclass
class AppendSeconds:
    """Seconds each kind of append took in total (`interleaved_appends`)."""

    baseline: float = 0.0
    ours: float = 0.0
    ceiling: float = 0.0
    stream: float = 0.0
    round_trips: float = 0.0


def interleaved_appends(
    plain: Path, append_dir: Path, ceiling_dir: Path, round_trips: Callable[[int], float]
) -> AppendSeconds:
    """`APPENDS` baseline appends, `APPENDS` files into ``append_dir`` and as many into
    ``ceiling_dir``, `APPENDS` lines into one open stream in ``append_dir``, and
    `ROUND_TRIPS` bare round trips, taken in `ROUNDS` alternating slices: on a shared
    machine the load drifts within seconds, and a ratio of figures taken at different
    moments measures the drift."""
    took = AppendSeconds()
    bounds = [APPENDS * slice_ // ROUNDS for slice_ in range(ROUNDS + 1)]
    with open_stream(append_dir) as stream:
        for start, stop in itertools.pairwise(bounds):
            count = stop - start
            took.baseline += timed(functools.partial(baseline_appends, plain, count, start))[0]
            took.ours += timed(functools.partial(mount_appends, append_dir, count, start))[0]
            took.ceiling += timed(functools.partial(mount_appends, ceiling_dir, count, start))[0]
            took.stream += timed(functools.partial(stream_appends, stream, count, start))[0]
            took.round_trips += round_trips(ROUND_TRIPS // ROUNDS)
    return took


def switch_leaf(directory: Path, targets: list[str], count: int) -> None:
    """What ``ln -sfn TARGET leaf`` does once ``leaf`` exists: temp link + rename."""
    leaf = directory / "leaf"
    temp = directory / "CuBench0"
    for n in range(count):
        os.symlink(targets[n % len(targets)], temp)
        os.rename(temp, leaf)


def ln_commands(directory: Path, targets: list[str], count: int) -> None:
    for n in range(count):
        subprocess.run(["ln", "-sfn", targets[n % len(targets)], "leaf"], cwd=directory, check=True)


def main() -> int:
    base = Path(os.environ.get("SESSIONFS_BENCH_DIR", tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix="sessionfs-bench-writes-", dir=base) as tmp:
        root = Path(tmp)
        agent = make_agent_dir(root)
        plain = root / "plain"
        plain.mkdir()
        mountpoint = root / "mnt"
        with (
            mounted(sessionfs_args(mountpoint, agent), mountpoint),
            bare_filesystem(root) as round_trips,
            minimal_append_filesystem(root) as ceiling_dir,
        ):
            (session,) = (mountpoint / "sessions" / "--bench-writes--").iterdir()
            ids = [name[: -len(".json")] for name in os.listdir(session / "entries")]
            targets = [f"entries/{entry_id}.json" for entry_id in ids[:10]]

            took = interleaved_appends(
                plain / "baseline.jsonl", session / "append", ceiling_dir, round_trips
            )
            entries_after = len(os.listdir(session / "entries"))

            os.symlink(targets[0], plain / "leaf")
            plain_switch_s, _ = timed(lambda: switch_leaf(plain, targets, SWITCHES))
            mount_switch_s, _ = timed(lambda: switch_leaf(session, targets, SWITCHES))
            leaf_now = os.readlink(session / "leaf")

            plain_ln_s, _ = timed(lambda: ln_commands(plain, targets, LN_COMMANDS))
            mount_ln_s, _ = timed(lambda: ln_commands(session, targets, LN_COMMANDS))

        round_trip = took.round_trips / (ROUND_TRIPS // ROUNDS * ROUNDS)
        if entries_after != len(ids) + 2 * APPENDS:
            print(f"error: {entries_after} entries, expected {len(ids) + 2 * APPENDS}")
            return 1
        if leaf_now != targets[(SWITCHES - 1) % len(targets)]:
            print(f"error: leaf is {leaf_now}")
            return 1

        append_rate, base_rate = APPENDS / took.ours, APPENDS / took.baseline
        stream_rate, ceiling_rate = APPENDS / took.stream, APPENDS / took.ceiling
        floor_rate = 1 / (took.baseline / APPENDS + REQUESTS_PER_FILE * round_trip)
        switch_rate, plain_switch_rate = SWITCHES / mount_switch_s, SWITCHES / plain_switch_s
        ln_rate, plain_ln_rate = LN_COMMANDS / mount_ln_s, LN_COMMANDS / plain_ln_s
        rows = [
            Row(
                f"durable appends ({APPENDS} files into append/)",
                f"{append_rate:,.0f}/s",
                f"{base_rate:,.0f}/s open+write+fsync+close",
                append_rate / base_rate,
                ">= 0.50",
                append_rate / base_rate >= 0.5,
            ),
            Row(
                f"durable appends ({APPENDS} lines into one open append/*.stream)",
                f"{stream_rate:,.0f}/s",
                f"{base_rate:,.0f}/s open+write+fsync+close",
                stream_rate / base_rate,
                ">= 0.40",
                stream_rate / base_rate >= 0.4,
            ),
            Row(
                f"floor for files: baseline + {REQUESTS_PER_FILE} bare pyfuse3 round trips",
                f"{floor_rate:,.0f}/s",
                f"{round_trip * 1e6:.0f} us a round trip",
                floor_rate / base_rate,
                "(info)",
                True,
            ),
            Row(
                "the same files into a minimal pyfuse3 append fs (the ceiling)",
                f"{ceiling_rate:,.0f}/s",
                f"{floor_rate:,.0f}/s floor",
                ceiling_rate / floor_rate,
                "(info)",
                True,
            ),
            Row(
                f"durable appends ({APPENDS} files into append/) against the ceiling",
                f"{append_rate:,.0f}/s",
                f"{ceiling_rate:,.0f}/s ceiling",
                append_rate / ceiling_rate,
                "(info)",
                True,
            ),
            Row(
                f"durable appends ({APPENDS} files into append/) against the floor",
                f"{append_rate:,.0f}/s",
                f"{floor_rate:,.0f}/s floor",
                append_rate / floor_rate,
                ">= 0.90 (aim)",
                append_rate / floor_rate >= 0.9,
            ),
            Row(
                f"branch switches ({SWITCHES}x symlink+rename over leaf)",
                f"{switch_rate:,.0f}/s",
                f"{plain_switch_rate:,.0f}/s plain dir",
                switch_rate / plain_switch_rate,
                ">= 1,000/s",
                switch_rate >= 1000,
            ),
            Row(
                f"`ln -sfn` commands ({LN_COMMANDS} processes)",
                f"{ln_rate:,.0f}/s",
                f"{plain_ln_rate:,.0f}/s plain dir",
                ln_rate / plain_ln_rate,
                "(ratio only)",
                True,
            ),
        ]
        print_table(f"writes through the mount (temp dir on {base})", rows)
        return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
