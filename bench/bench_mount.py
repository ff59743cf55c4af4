"""Mount benchmark (issue 4): the four read-path measurements, as ratios against
baselines measured in the same run.

Run from the repo root: ``python bench/bench_mount.py [--sessions 200] [--entries 1000]``.

Corpus: ``--sessions`` v3 session files of ``--entries`` entries each, made from the
shapes of the real fixture ``pi-v1-large-session.jsonl`` (its entries, re-identified,
chained, with a branch every 100 entries), spread over 10 projects; plus a copy of the
2.4 MB fixture ``pi-v1-before-compaction.jsonl``.

1. Cold walk + read of every ``entries/*.json`` (fresh daemon): files/s, against a
   bare pyfuse3 filesystem (below) serving the same number and sizes of files from
   memory. Target: at least 50 %.
2. ``grep -rl`` over every ``transcript.md``, cold (fresh daemon) and warm (again),
   against ``grep -rl`` over the raw ``*.jsonl`` files (page cache warm). Targets:
   warm within 2x, cold within 10x.
3. First ``cat context.json`` of the 2.4 MB fixture (fresh daemon) against reading and
   parsing the file with ``core.jsonl.load_entries_from_file``. Target: within 3x.
4. Daemon RSS after reading the whole corpus. Target: under ``--cache-mb`` + 100 MB.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    FIXTURES,
    Row,
    best_of,
    mounted,
    print_table,
    rss_mb,
    sessionfs_args,
    timed,
)
from core import jsonl

NEEDLE = "zebracrossing"  # put into every 10th session, so grep has something to find


# --- corpus -------------------------------------------------------------------------


def shape_entries() -> list[dict]:
    entries = jsonl.load_entries_from_file(FIXTURES / "pi-v1-large-session.jsonl")[1:]
    if not entries:
        raise SystemExit(f"fixture missing: {FIXTURES / 'pi-v1-large-session.jsonl'}")
    return entries


def make_corpus(agent_dir: Path, sessions: int, entries_per: int) -> list[Path]:
    shapes = shape_entries()
    files = []
    for s in range(sessions):
        project = agent_dir / "sessions" / f"--work-project-{s % 10}--"
        project.mkdir(parents=True, exist_ok=True)
        session_id = f"{s:08x}-0000-4000-8000-000000000000"
        stamp = f"2026-01-{1 + s % 28:02d}T10:00:{s % 60:02d}.000Z"
        header = {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": stamp,
            "cwd": f"/work/project-{s % 10}",
        }
        lines = [jsonl.dumps_line(header)]
        parent = None
        for i in range(entries_per):
            entry = dict(shapes[(s * 7 + i) % len(shapes)])
            entry_id = f"{s:03x}{i:05x}"
            if i % 100 == 99:  # a branch: back ten entries
                parent = f"{s:03x}{i - 10:05x}"
            if i == 1 and s % 10 == 0:
                entry = {
                    "type": "message",
                    "timestamp": stamp,
                    "message": {"role": "user", "content": f"find the {NEEDLE}", "timestamp": 0},
                }
            entry.update({"id": entry_id, "parentId": parent})
            lines.append(jsonl.dumps_line(entry))
            parent = entry_id
        path = project / f"{stamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"
        path.write_bytes(b"".join(lines))
        files.append(path)
    big = agent_dir / "sessions" / "--fixture--"
    big.mkdir()
    shutil.copyfile(FIXTURES / "pi-v1-before-compaction.jsonl", big / "before-compaction.jsonl")
    return files


# --- the bare pyfuse3 baseline ------------------------------------------------------


#: A tree the bare fs serves: a dir's names, each a file's bytes or a subdir.
BareTree = dict[bytes, "bytes | BareTree"]


def bare_layout(source: str) -> BareTree:
    """What the bare fs serves: ``/d<n>/<file>``, from a dir of numbered subdirs (their
    files as they are: the same bytes the mount served), or from a sizes file (a line of
    file sizes per dir) files of ``x`` of those sizes."""
    root = Path(source)
    if root.is_dir():
        return {
            f"d{d.name}".encode(): {
                os.fsencode(f.name): f.read_bytes() for f in sorted(d.iterdir())
            }
            for d in sorted(root.iterdir(), key=lambda d: int(d.name))
        }
    sizes = [[int(x) for x in line.split()] for line in root.read_text().splitlines()]
    filler: dict[int, bytes] = {}
    return {
        f"d{d}".encode(): {
            f"f{f}.json".encode(): filler.setdefault(size, b"x" * size)
            for f, size in enumerate(row)
        }
        for d, row in enumerate(sizes)
    }


def tree_as_is(source: str) -> BareTree:
    """Every file and dir below ``source`` under its own name (the same names, sizes
    and bytes as a tree copied out of the mount, e.g. ``transcripts/``)."""
    return {
        os.fsencode(entry.name): tree_as_is(str(entry)) if entry.is_dir() else entry.read_bytes()
        for entry in sorted(Path(source).iterdir())
    }


def serve_bare(mountpoint: str, tree: BareTree, answer_flush: bool = False) -> None:
    """A minimal in-memory pyfuse3 filesystem serving ``tree``. Its ``flush`` is not
    implemented (``ENOSYS``: the kernel sends none after the first) unless
    ``answer_flush``: a filesystem that takes writes must answer each ``close``'s flush."""
    import pyfuse3
    import trio

    names: dict[int, dict[bytes, int]] = {}
    kinds: dict[int, tuple[bool, int]] = {}
    blobs: dict[int, bytes] = {}
    next_inode = pyfuse3.ROOT_INODE

    def add(node: bytes | BareTree) -> int:
        nonlocal next_inode
        inode, next_inode = next_inode, next_inode + 1
        if isinstance(node, bytes):
            kinds[inode] = (False, len(node))
            blobs[inode] = node
        else:
            kinds[inode] = (True, 0)
            names[inode] = {name: add(child) for name, child in node.items()}
        return inode

    add(tree)

    class Bare(pyfuse3.Operations):
        def attrs(self, inode: int) -> pyfuse3.EntryAttributes:
            is_dir, size = kinds[inode]
            a = pyfuse3.EntryAttributes()
            a.st_ino = inode
            a.st_mode = (stat.S_IFDIR | 0o555) if is_dir else (stat.S_IFREG | 0o444)
            a.st_size = size
            a.st_nlink = 1
            a.entry_timeout = a.attr_timeout = 3600
            return a

        async def getattr(self, inode, ctx=None):  # type: ignore[no-untyped-def]
            return self.attrs(inode)

        async def lookup(self, parent, name, ctx=None):  # type: ignore[no-untyped-def]
            inode = names.get(parent, {}).get(name)
            if inode is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            return self.attrs(inode)

        async def opendir(self, inode, ctx):  # type: ignore[no-untyped-def]
            return inode

        async def readdir(self, fh, start, token):  # type: ignore[no-untyped-def]
            items = list(names[fh].items())
            for i in range(start, len(items)):
                name, inode = items[i]
                if not pyfuse3.readdir_reply(token, name, self.attrs(inode), i + 1):
                    break

        async def open(self, inode, flags, ctx):  # type: ignore[no-untyped-def]
            return pyfuse3.FileInfo(fh=inode, keep_cache=True)

        async def read(self, fh, off, size):  # type: ignore[no-untyped-def]
            return blobs[fh][off : off + size]

        async def release(self, fh):  # type: ignore[no-untyped-def]
            return None

        async def releasedir(self, fh):  # type: ignore[no-untyped-def]
            return None

    if answer_flush:

        async def flush(self, fh):  # type: ignore[no-untyped-def]
            return None

        Bare.flush = flush  # type: ignore[method-assign]

    pyfuse3.init(Bare(), mountpoint, set(pyfuse3.default_options) | {"fsname=barefs"})
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


# --- measurements -------------------------------------------------------------------


def walk_and_read(dirs: list[Path]) -> int:
    """List each dir and read every file in it; returns the number of files read."""
    count = 0
    for directory in dirs:
        for name in os.listdir(directory):
            with open(directory / name, "rb") as f:
                while f.read(1 << 20):
                    pass
            count += 1
    return count


def grep_l(*args: str | Path) -> list[str]:
    result = subprocess.run(
        ["grep", "-l", NEEDLE, *map(str, args)], capture_output=True, text=True, timeout=3600
    )
    return sorted(result.stdout.split())


def drop_page_cache() -> bool:
    """Make the next raw read really cold (root only; harmless: caches refill)."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description="sessionfs mount benchmark")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--cache-mb", type=int, default=256)
    parser.add_argument("--serve-bare", nargs=2, help=argparse.SUPPRESS)
    # the bare fs serving a dir's tree under its own names (`tree_as_is`)
    parser.add_argument("--serve-tree", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--answer-flush", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        mountpoint, source = args.serve_bare
        serve_bare(mountpoint, bare_layout(source), args.answer_flush)
        return 0
    if args.serve_tree:
        mountpoint, source = args.serve_tree
        serve_bare(mountpoint, tree_as_is(source), args.answer_flush)
        return 0
    if not (FIXTURES / "pi-v1-before-compaction.jsonl").is_file():
        print(f"bench_mount: fixtures not found in {FIXTURES}; skipped", file=sys.stderr)
        return 0

    work = Path(tempfile.mkdtemp(prefix="sessionfs-bench-"))
    try:
        return run(work, args.sessions, args.entries, args.cache_mb)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, sessions: int, entries: int, cache_mb: int) -> int:
    agent = work / "agent"
    mnt = work / "mnt"
    print(f"corpus: {sessions} sessions x {entries} entries ...", flush=True)
    elapsed, files = timed(lambda: make_corpus(agent, sessions, entries))
    corpus_mb = sum(f.stat().st_size for f in files) / 2**20
    print(f"  {corpus_mb:.0f} MB written in {elapsed:.1f}s", flush=True)
    ours = [*sessionfs_args(mnt, agent, "--cache-mb", str(cache_mb))]
    rows = []

    # 1. cold walk + read of every entries/*.json, vs a bare pyfuse3 filesystem
    with mounted(ours, mnt):
        session_dirs = [mnt / "sessions" / f.parent.name / f.name[:-6] for f in files]
        sizes = [
            [os.stat(d / "entries" / n).st_size for n in os.listdir(d / "entries")]
            for d in session_dirs
        ]
    (work / "sizes.txt").write_text("\n".join(" ".join(map(str, s)) for s in sizes) + "\n")
    bare = mounted(
        [sys.executable, __file__, "--serve-bare", str(mnt), str(work / "sizes.txt")], mnt
    )
    with bare:
        bare_time, bare_files = timed(
            lambda: walk_and_read([mnt / f"d{i}" for i in range(len(sizes))])
        )
    with mounted(ours, mnt) as daemon:
        entry_dirs = [d / "entries" for d in session_dirs]
        our_time, our_files = timed(lambda: walk_and_read(entry_dirs))
        walk_rss = rss_mb(daemon.pid)
    assert our_files == bare_files, (our_files, bare_files)
    ours_rate, bare_rate = our_files / our_time, bare_files / bare_time
    rows.append(
        Row(
            "1. cold walk+read entries/*.json (files/s)",
            f"{ours_rate:,.0f}",
            f"{bare_rate:,.0f} (bare pyfuse3)",
            ours_rate / bare_rate,
            ">= 0.50",
            ours_rate / bare_rate >= 0.5,
        )
    )

    # 2. grep -l over every transcript.md (cold and warm), vs grep -rl over the raw jsonl.
    # The transcripts are named with a glob (sessions/*/*/transcript.md), like the raw
    # files are found by grep -r: a recursive grep of the mount also walks every
    # entries/ and path/ dir (2,000 names per session), which is reported separately.
    def transcripts() -> list[Path]:
        return sorted((mnt / "sessions").glob("*/*/transcript.md"))

    raw_warm, raw_hits = best_of(3, lambda: grep_l("-r", "--include=*.jsonl", agent / "sessions"))
    dropped = drop_page_cache()
    raw_cold, _ = timed(lambda: grep_l("-r", "--include=*.jsonl", agent / "sessions"))
    drop_page_cache()
    with mounted(ours, mnt) as daemon:
        cold_time, hits = timed(lambda: grep_l(*transcripts()))
        warm_time, warm_hits = best_of(3, lambda: grep_l(*transcripts()))
        recursive_time, recursive_hits = timed(
            lambda: grep_l("-r", "--include=transcript.md", mnt / "sessions")
        )
        grep_rss = rss_mb(daemon.pid)
    expected = len([f for f in files if NEEDLE.encode() in f.read_bytes()])
    assert len(hits) == len(warm_hits) == len(recursive_hits) == expected, (len(hits), expected)
    assert len(raw_hits) == expected
    cold_note = "cold page cache" if dropped else "page cache NOT dropped"
    rows.append(
        Row(
            "2a. grep -l */*/transcript.md, warm (s)",
            f"{warm_time:.3f}",
            f"{raw_warm:.3f} (grep -rl raw jsonl)",
            warm_time / raw_warm,
            "<= 2",
            warm_time / raw_warm <= 2,
        )
    )
    rows.append(
        Row(
            "2b. grep -l */*/transcript.md, cold (s)",
            f"{cold_time:.3f}",
            f"{raw_cold:.3f} (same, {cold_note})",
            cold_time / raw_cold,
            "<= 10",
            cold_time / raw_cold <= 10,
        )
    )
    rows.append(
        Row(
            "2c. grep -rl --include=transcript.md, warm (s)",
            f"{recursive_time:.3f}",
            f"{raw_warm:.3f} (grep -rl raw jsonl)",
            recursive_time / raw_warm,
            "(info)",
            True,
        )
    )

    # 3. first cat context.json of the 2.4 MB fixture, vs parsing the file
    fixture = agent / "sessions" / "--fixture--" / "before-compaction.jsonl"
    parse_time, _ = best_of(5, lambda: jsonl.load_entries_from_file(fixture))
    context = mnt / "sessions" / "--fixture--" / "before-compaction" / "context.json"
    firsts = []
    for _ in range(3):
        with mounted(ours, mnt):
            firsts.append(timed(context.read_bytes)[0])
    first = min(firsts)
    rows.append(
        Row(
            "3. first cat context.json, 2.4 MB fixture (s)",
            f"{first:.3f}",
            f"{parse_time:.3f} (parse file)",
            first / parse_time,
            "<= 3",
            first / parse_time <= 3,
        )
    )

    # 4. RSS after reading the whole corpus (after the walk, and after the greps)
    limit = cache_mb + 100
    for label, rss in (("walk", walk_rss), ("greps", grep_rss)):
        rows.append(
            Row(
                f"4. daemon RSS after whole corpus, {label} (MB)",
                f"{rss:.0f}",
                f"{cache_mb} (--cache-mb)",
                rss / limit,
                f"< {limit} MB",
                rss < limit,
            )
        )

    print_table(
        f"sessionfs mount ({sessions} sessions x {entries} entries, "
        f"{corpus_mb:.0f} MB, --cache-mb {cache_mb})",
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
