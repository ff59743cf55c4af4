"""An agent that writes its session file the way the real ones do, as a subprocess.

``by-path``: for every line open the path with O_APPEND, write the line, close (Node's
``appendFileSync``). ``held``: open once and keep the descriptor (some agents do), then
write lines on it until killed. Each line is a ``custom`` entry whose ``data.n`` counts
up from 0, so a test can tell exactly which lines are missing or out of order.

Run: ``python agent_simulator.py <path> <by-path|held> <count> <lines per second>``.
It prints ``started`` once it is about to write, and ``done <n>`` at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

SIMULATOR = Path(__file__).resolve()
MIN_GAP_SECONDS = 0.0005


def agent_line(n: int) -> bytes:
    """The ``n``-th line the simulated agent writes (ids unique: ``a`` + 7 digits)."""
    entry = {
        "type": "custom",
        "id": f"a{n:07d}",
        "parentId": f"a{n - 1:07d}" if n else None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "customType": "agent-sim",
        "data": {"n": n},
    }
    return orjson.dumps(entry) + b"\n"


def agent_numbers(data: bytes) -> list[int]:
    """The ``n`` of every simulated line in ``data``, in file order."""
    out = []
    for line in data.split(b"\n"):
        if b'"agent-sim"' in line:
            out.append(orjson.loads(line)["data"]["n"])
    return out


@contextmanager
def running_agent(
    path: Path, mode: str = "by-path", count: int = 10**6, rate: float = 500
) -> Iterator[subprocess.Popen[bytes]]:
    """The simulator appending to ``path`` as a subprocess, once it has started;
    killed, reaped and its pipe closed on exit."""
    proc = subprocess.Popen(
        [sys.executable, str(SIMULATOR), str(path), mode, str(count), str(rate)],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _write_by_path(path: str, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def main(path: str, mode: str, count: int, rate: float) -> None:
    interval = 1.0 / rate
    held = os.open(path, os.O_WRONLY | os.O_APPEND) if mode == "held" else None
    print("started", flush=True)
    start = time.monotonic()
    for n in range(count):
        line = agent_line(n)
        if held is None:
            _write_by_path(path, line)
        else:
            os.write(held, line)
        # Behind schedule (a loaded machine) the pace catches up, but never as a burst
        # of back-to-back lines: an agent does some work between two entries. Lines
        # closer than that are the one case a rewrite cannot keep in order (see
        # core/rewrite.py: a writer whose open and write straddle the rename).
        delay = start + (n + 1) * interval - time.monotonic()
        time.sleep(max(delay, MIN_GAP_SECONDS))
    print(f"done {count}", flush=True)
    if held is not None:
        time.sleep(3600)  # keep holding it until the test kills us


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
