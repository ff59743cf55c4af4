"""Core engine benchmark: load, context and append costs against plain baselines.

Run from the repo root: ``python -m bench.bench_core`` or ``python bench/bench_core.py``
(``--entries N`` for the generated session, ``--quick`` for a smoke run).

Every figure is a ratio against a baseline measured in the same run on the same data:

* load: ``SessionManager.open(path, browse=True)`` (read + parse + migrate + blob check
  + index) vs reading the file and ``orjson.loads`` of every line. Files: the two real
  v1 fixtures in ``tests/fixtures/`` (migrated on load), and a generated
  session of 100,000 entries, as v3 and as v1 (every id derived by migration).
* context: ``build_session_context()`` at the leaf of a 10,000-deep path vs a bare
  parent-pointer walk over the same dicts.
* append: persisted ``append_message`` on a session already on disk vs a bare loop of
  ``os.write(fd, orjson.dumps(entry) + b"\\n")`` on an ``O_APPEND`` descriptor, with the
  same entries; and the same with ``flush()`` (fsync) after every append vs
  ``os.fsync`` after every write.

Times are the best of a few repetitions (the least disturbed run); for appends only the
loop is timed, not opening or closing the file.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python bench/bench_core.py` puts bench/ on sys.path, not the repo root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from bench.common import FIXTURES
from core import SessionManager
from core.context import path_to_root

FIXTURE_NAMES = ("pi-v1-before-compaction.jsonl", "pi-v1-large-session.jsonl")


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """Fastest of `repeat` runs, in seconds (GC off while timing, as timeit does)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def baseline_parse(path: Path) -> list[Any]:
    with open(path, "rb") as fh:
        data = fh.read()
    return [orjson.loads(line) for line in data.split(b"\n") if line]


# ---------------------------------------------------------------------------- data


def _message(i: int) -> dict[str, Any]:
    """Entries shaped like real turns: prompts, assistant text + tool calls, results."""
    kind = i % 3
    if kind == 0:
        return {
            "role": "user",
            "content": [{"type": "text", "text": f"please look at item {i}"}],
            "timestamp": 1_700_000_000_000 + i,
        }
    if kind == 1:
        return {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Reading the file for step {i} now."},
                {
                    "type": "toolCall",
                    "id": f"call_{i}",
                    "name": "read",
                    "arguments": {"path": f"/work/project/src/module_{i % 97}.py"},
                },
            ],
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {
                "input": 1200,
                "output": 80,
                "cacheRead": 0,
                "cacheWrite": 0,
                "cost": {
                    "input": 0.1,
                    "output": 0.01,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "total": 0.11,
                },
            },
            "stopReason": "toolUse",
            "timestamp": 1_700_000_000_000 + i,
        }
    return {
        "role": "toolResult",
        "toolCallId": f"call_{i - 1}",
        "toolName": "read",
        "content": [{"type": "text", "text": "def f():\n    return 1\n" * 4}],
        "isError": False,
        "timestamp": 1_700_000_000_000 + i,
    }


def write_generated_session(path: Path, entries: int, *, v1: bool) -> None:
    header: dict[str, Any] = {
        "type": "session",
        "id": "bench-session",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/work/project",
    }
    if not v1:
        header["version"] = 3
    lines = [orjson.dumps(header)]
    parent = None
    for i in range(entries):
        entry: dict[str, Any] = {"type": "message"}
        if not v1:
            entry_id = f"{i:08x}"
            entry |= {"id": entry_id, "parentId": parent}
            parent = entry_id
        entry |= {"timestamp": "2025-01-01T00:00:01.000Z", "message": _message(i)}
        lines.append(orjson.dumps(entry))
    path.write_bytes(b"\n".join(lines) + b"\n")


# ---------------------------------------------------------------------------- benches

Row = tuple[str, float, float, str]  # name, ours (s), baseline (s), unit note


def bench_loads(workdir: Path, entries: int, repeat: int) -> list[Row]:
    rows: list[Row] = []
    files: list[tuple[str, Path]] = []
    for name in FIXTURE_NAMES:
        source = FIXTURES / name
        if source.is_file():
            copy = workdir / name
            shutil.copyfile(source, copy)
            files.append((f"load {name} (v1, migrate)", copy))
        else:
            print(f"(fixture {name} not found in {FIXTURES}: skipped)", file=sys.stderr)
    for v1 in (False, True):
        path = workdir / f"generated-{'v1' if v1 else 'v3'}.jsonl"
        write_generated_session(path, entries, v1=v1)
        files.append(
            (f"load generated {entries:,} entries ({'v1, migrate' if v1 else 'v3'})", path)
        )
    for label, path in files:
        ours = best_of(repeat, lambda p=path: SessionManager.open(p, browse=True))  # type: ignore[misc]
        base = best_of(repeat, lambda p=path: baseline_parse(p))  # type: ignore[misc]
        rows.append((label, ours, base, "vs read + orjson.loads per line"))
    return rows


def bench_context(depth: int, repeat: int) -> list[Row]:
    m = SessionManager.in_memory("/bench")
    with m.batch():
        for i in range(depth):
            if i % 500 == 250:
                m.append_thinking_level_change("high")
            m.append_message(_message(i))
    leaf = m.get_leaf_id()
    by_id = {e["id"]: e for e in m.get_entries()}
    ours = best_of(repeat * 3, m.build_session_context)
    base = best_of(repeat * 3, lambda: path_to_root(leaf, by_id))
    assert len(m.build_session_context()["messages"]) == depth
    return [
        (
            f"build_session_context, {depth:,}-deep path",
            ours,
            base,
            "vs bare parent walk (path_to_root)",
        )
    ]


def best_loop(
    repeat: int,
    prepare: Callable[[], Any],
    loop: Callable[[Any], None],
    finish: Callable[[Any], None],
) -> float:
    """Like `best_of`, timing only `loop(prepare())`: opening and closing the file
    (a header rewrite with fsyncs for the manager) are not part of the append rate."""
    best = float("inf")
    for _ in range(repeat):
        state = prepare()
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            loop(state)
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
            finish(state)
    return best


def _entry_like(message: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"{i:08x}",
        "parentId": f"{i - 1:08x}",
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": message,
    }


def bench_appends(workdir: Path, count: int, fsync_count: int, repeat: int) -> list[Row]:
    rows: list[Row] = []
    run = itertools.count()  # a fresh file for every repetition
    for fsync, n in ((False, count), (True, fsync_count)):
        messages = [_message(i) for i in range(n)]
        bare_entries = [_entry_like(msg, i) for i, msg in enumerate(messages)]

        def open_session() -> SessionManager:
            m = SessionManager.create("/bench", workdir / f"sessions-{next(run)}")
            m.ensure_on_disk()
            return m

        def ours(m: SessionManager, messages: list[Any] = messages, fsync: bool = fsync) -> None:
            append, flush = m.append_message, m.flush
            for message in messages:
                append(message)
                if fsync:
                    flush()

        def open_bare() -> int:
            path = workdir / f"bare-{next(run)}.jsonl"
            return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def bare(fd: int, entries: list[Any] = bare_entries, fsync: bool = fsync) -> None:
            dumps, write, sync = orjson.dumps, os.write, os.fsync
            for entry in entries:
                write(fd, dumps(entry) + b"\n")
                if fsync:
                    sync(fd)

        t_ours = best_loop(repeat, open_session, ours, SessionManager.close)
        t_bare = best_loop(repeat, open_bare, bare, os.close)
        label = f"append {n:,} entries" + (", fsync each" if fsync else "")
        rows.append((label, t_ours, t_bare, "vs O_APPEND os.write(orjson.dumps) loop"))
        if not fsync:
            # What the in-memory part (ids, timestamps, index) costs on its own.
            memory = best_loop(
                repeat, lambda: SessionManager.in_memory("/bench"), ours, SessionManager.close
            )
            rows.append(("  of which in memory (in_memory session)", memory, t_bare, "same"))
    return rows


def print_table(rows: list[Row]) -> None:
    print(f"{'benchmark':<58} {'ours':>10} {'baseline':>10} {'ratio':>7}  baseline")
    print("-" * 120)
    for name, ours, base, note in rows:
        ratio = ours / base if base > 0 else float("inf")
        print(f"{name:<58} {ours * 1000:>8.1f}ms {base * 1000:>8.1f}ms {ratio:>6.2f}x  {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000, help="generated session size")
    parser.add_argument("--depth", type=int, default=10_000, help="context path depth")
    parser.add_argument("--appends", type=int, default=20_000, help="appends without fsync")
    parser.add_argument("--fsync-appends", type=int, default=300, help="appends with fsync")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (best is kept)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    args = parser.parse_args(argv)
    if args.quick:
        args.entries, args.depth, args.appends, args.fsync_appends, args.repeat = (
            5_000,
            1_000,
            1_000,
            20,
            1,
        )
    workdir = Path(tempfile.mkdtemp(prefix="bench-core-"))
    try:
        rows = bench_loads(workdir, args.entries, args.repeat)
        rows += bench_context(args.depth, args.repeat)
        rows += bench_appends(workdir, args.appends, args.fsync_appends, args.repeat)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
