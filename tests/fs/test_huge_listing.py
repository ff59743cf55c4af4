"""Acceptance: ``entries/`` of a session of tens of thousands of entries, listed
through a real mount (issue 26 point 6), shows every file at the exact size and time
of the bytes ``cat`` reads -- with ``ls -l``, ``stat`` and ``cat``, before and after
a listing, after another process appends and after the file is replaced -- whether
the listing keeps the entry files it rendered (a small session) or only their sizes
(a big one: its rows are numbered by a block of inodes and their nodes made only when
asked, `sessionfs.fs.row_blocks`). ``path/`` of such a session lists its symlinks the
same way: ``ls -l`` and ``readlink`` show every link's target, ``ls -i`` keeps the
numbers across an append, and moving ``leaf`` or replacing the file changes them."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from support.mount import MountFactory
from support.waiting import eventually

from sessionfs.view.loaded_session import LISTED_FILES_KEPT_FRACTION, LoadedSession, open_browse
from sessionfs.view.session_cache import RENDER_HEADROOM, RENDER_PEAK_FACTOR
from sessionfs.view.session_ref import SessionRef

pytestmark = pytest.mark.fuse

#: With ``--cache-mb 16`` the daemon renders sessions up to ~13 MB and keeps the entry
#: files a listing renders only for a session up to a quarter of that (~3.3 MB):
#: `BIG` (~3.7 MB) keeps only sizes, `SMALL` keeps the files.
CACHE_MB = 16
BIG = 12_000
SMALL = 1_000
#: words that make each entry a few hundred bytes
WORDS = "a session of many entries about the cache, the render path and the listing"


def entry(i: int, words: str) -> dict[str, object]:
    """An entry whose pretty JSON is not its line's length plus a constant: text of
    varying length, escapes, non-ASCII, nesting."""
    return {
        "type": "message",
        "id": f"{i:08x}",
        "parentId": f"{i - 1:08x}" if i else None,
        "timestamp": f"2026-01-{1 + i // 86400 % 28:02d}T{i // 3600 % 24:02d}:"
        f"{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",
        "message": {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"{words} {i} " + 'é\t"q"/' * (i % 7)}],
            "usage": {"input": i % 97, "output": [i % 3, {"cached": i % 5 == 0}]},
        },
    }


def agent_project(tmp_path: Path) -> Path:
    """A project dir of the xcsh agent dir ``tmp_path/agent``, made."""
    project = tmp_path / "agent" / "sessions" / "--work--"
    project.mkdir(parents=True)
    return project


def write_session(path: Path, count: int, words: str) -> None:
    header = {"type": "session", "version": 3, "id": path.stem, "timestamp": "t", "cwd": "/"}
    lines = [orjson.dumps(header)] + [orjson.dumps(entry(i, words)) for i in range(count)]
    path.write_bytes(b"\n".join(lines) + b"\n")


def parsed(path: Path) -> LoadedSession:
    st = os.stat(path)
    ref = SessionRef(path.parent.name, path.stem, path, {}, st.st_mtime_ns, st.st_size)
    return LoadedSession.parsed(ref, open_browse(path))


def expected(path: Path) -> dict[str, bytes]:
    """Every entry file as a parsed session renders it, by name, in file order."""
    session = parsed(path)
    return {name: session.entry_bytes(i) for i, name in enumerate(session.table().names)}


def expected_links(path: Path) -> dict[str, str]:
    """``path/`` as a parsed session shows it: link name -> target, root first."""
    session = parsed(path)
    names, indexes = session.table().names, session.path_indexes()
    width = max(4, len(str(len(indexes) - 1)))
    return {f"{n:0{width}d}-{names[i]}": f"../entries/{names[i]}" for n, i in enumerate(indexes)}


def run(*argv: str | Path, cwd: Path | None = None) -> bytes:
    return subprocess.run(
        [str(a) for a in argv], check=True, capture_output=True, timeout=300, cwd=cwd
    ).stdout


def ls_l(entries: Path) -> dict[str, tuple[int, int]]:
    """``ls -l`` of ``entries/``: name -> (size, mtime in seconds), in listing order."""
    rows = {}
    for line in run("ls", "-ln", "-U", "--time-style=+%s", entries).decode().splitlines()[1:]:
        _mode, _links, _uid, _gid, size, mtime, name = line.split()
        rows[name] = (int(size), int(mtime))
    return rows


def ls_l_links(links: Path) -> dict[str, tuple[str, int]]:
    """``ls -l`` of ``path/``: name -> (target, size), in listing order."""
    rows = {}
    for line in run("ls", "-ln", "-U", "--time-style=+%s", links).decode().splitlines()[1:]:
        mode, _links, _uid, _gid, size, _mtime, name, arrow, target = line.split()
        assert mode.startswith("l") and arrow == "->", line
        rows[name] = (target, int(size))
    return rows


def assert_links_match(links: Path, want: dict[str, str]) -> None:
    """``ls -l`` lists every link of ``want`` (name -> target) in order, at its
    target's length; ``readlink`` of a sample and ``cat`` of the last agree."""
    assert ls_l_links(links) == {name: (t, len(t.encode())) for name, t in want.items()}
    names = list(want)
    sample = names[:: max(1, len(names) // 100)] + names[-3:]
    read = run("readlink", *sample, cwd=links).decode().splitlines()
    assert read == [want[name] for name in sample]
    entries = links.parent / "entries"
    last = names[-1]
    assert run("cat", links / last) == run("cat", entries / want[last].rsplit("/", 1)[1])


def inode_numbers(entries: Path) -> dict[str, int]:
    """``ls -i``: name -> inode number."""
    numbers = {}
    for line in run("ls", "-iU", entries).decode().splitlines():
        number, name = line.split()
        numbers[name] = int(number)
    return numbers


def cat_all(entries: Path, names: list[str]) -> bytes:
    """Every file of ``names`` read by ``cat``, in order (one process, many files)."""
    return subprocess.run(
        ["xargs", "-0", "cat", "--"],
        input=b"\0".join(n.encode() for n in names),
        cwd=entries,
        check=True,
        capture_output=True,
        timeout=300,
    ).stdout


def stat_sizes(entries: Path, names: list[str]) -> list[int]:
    return [int(n) for n in run("stat", "-c", "%s", *names, cwd=entries).split()]


def assert_listing_matches(entries: Path, files: dict[str, bytes], read_all: bool = True) -> None:
    """``ls -l`` lists every file in order with its exact size and its entry's time,
    ``cat`` reads those bytes whole (every file, or the last ones), and ``stat`` of a
    sample says the same sizes."""
    listed = ls_l(entries)
    names = list(files)
    assert list(listed) == names
    assert [size for size, _ in listed.values()] == [len(files[n]) for n in names]
    for name in names[:: max(1, len(names) // 50)]:
        stamp = orjson.loads(files[name])["timestamp"]
        assert listed[name][1] == int(datetime.fromisoformat(stamp).timestamp()), name
    read = names if read_all else names[-5:]
    assert cat_all(entries, read) == b"".join(files[n] for n in read)
    sample = names[:: max(1, len(names) // 200)] + names[-3:]
    assert stat_sizes(entries, sample) == [len(files[n]) for n in sample]


def test_ls_l_stat_and_cat_agree_on_every_entry_of_a_big_listing(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    project = agent_project(tmp_path)
    big, small = project / "big.jsonl", project / "small.jsonl"
    write_session(big, BIG, WORDS)
    write_session(small, SMALL, WORDS)
    renderable = ((CACHE_MB << 20) + RENDER_HEADROOM) // RENDER_PEAK_FACTOR  # the cache's
    kept_up_to = renderable // LISTED_FILES_KEPT_FRACTION
    assert big.stat().st_size > kept_up_to > small.stat().st_size  # the two ways
    mount = mount_factory(tmp_path / "agent", "--cache-mb", str(CACHE_MB))
    sessions = mount.path / "sessions" / "--work--"

    for file in (big, small):
        entries = sessions / file.stem / "entries"
        files = expected(file)
        last = list(files)[-1]
        # looked up before any listing, then listed: the same size and bytes
        assert stat_sizes(entries, [last]) == [len(files[last])]
        assert_listing_matches(entries, files)
        assert run("cat", entries / last) == files[last]

    # Another process appends: the new entries are listed, at their sizes, and the
    # entries listed before keep theirs, and their inode numbers (the kernel keeps them).
    numbers = inode_numbers(sessions / "big" / "entries")
    with open(big, "ab") as f:
        f.write(b"".join(orjson.dumps(entry(i, "appended")) + b"\n" for i in range(BIG, BIG + 3)))
    entries = sessions / "big" / "entries"
    eventually(
        lambda: f"{BIG + 2:08x}.json" in os.listdir(entries), "the appended entries", within=30
    )
    assert_listing_matches(entries, expected(big), read_all=False)
    after = inode_numbers(entries)
    assert {name: after[name] for name in numbers} == numbers
    assert len(set(after.values())) == len(after) == BIG + 3

    # The file is replaced (the same ids, other texts): once the daemon has seen it,
    # every size, time and byte is the new file's, none cut at an old size.
    replacement = project / "big.tmp"
    write_session(replacement, BIG, f"{WORDS}, replaced by a longer text")
    os.replace(replacement, big)
    files = expected(big)
    first = next(iter(files))
    eventually(lambda: run("cat", entries / first) == files[first], "the replaced file", within=30)
    assert_listing_matches(entries, files)


def test_path_of_a_long_session_lists_its_links_and_follows_appends_leaf_and_replace(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    project = agent_project(tmp_path)
    file = project / "long.jsonl"
    write_session(file, BIG, WORDS)
    mount = mount_factory(tmp_path / "agent", "--cache-mb", str(CACHE_MB))
    session_dir = mount.path / "sessions" / "--work--" / "long"
    links = session_dir / "path"

    # looked up before any listing, then listed
    last = f"{BIG - 1:05d}-{BIG - 1:08x}.json"
    assert os.readlink(links / last) == f"../entries/{BIG - 1:08x}.json"
    want = expected_links(file)
    assert len(want) == BIG
    assert_links_match(links, want)

    # Another process appends to the leaf: the path grows, the links listed before
    # keep their inode numbers.
    numbers = inode_numbers(links)
    with open(file, "ab") as f:
        f.write(b"".join(orjson.dumps(entry(i, "appended")) + b"\n" for i in range(BIG, BIG + 3)))
    grown = f"{BIG + 2:05d}-{BIG + 2:08x}.json"
    eventually(lambda: grown in os.listdir(links), "the appended links", within=30)
    want = expected_links(file)
    assert len(want) == BIG + 3
    assert_links_match(links, want)
    after = inode_numbers(links)
    assert {name: after[name] for name in numbers} == numbers
    assert len(set(after.values())) == len(after) == BIG + 3

    # ``leaf`` moved back (in memory, until the next append): path/ ends at it.
    middle = f"{BIG // 2:08x}"
    run("ln", "-sfn", f"entries/{middle}.json", "leaf", cwd=session_dir)
    assert os.readlink(session_dir / "leaf") == f"entries/{middle}.json"
    targets = list(want.values())[: BIG // 2 + 1]  # numbered in 4 digits now
    shorter = {f"{n:04d}-{t.rsplit('/', 1)[1]}": t for n, t in enumerate(targets)}
    eventually(lambda: len(os.listdir(links)) == len(shorter), "the shorter path", within=30)
    assert_links_match(links, shorter)
    assert list(shorter)[-1] == f"{BIG // 2:04d}-{middle}.json"

    # The file is replaced by another session (other ids): its path, its targets.
    replacement = project / "long.tmp"
    write_session(replacement, SMALL, f"{WORDS}, replaced")
    replacement.write_bytes(replacement.read_bytes().replace(b'"0000', b'"ffff'))  # the ids
    os.replace(replacement, file)
    want = expected_links(file)
    assert len(want) == SMALL and next(iter(want)).startswith("0000-f")
    eventually(lambda: sorted(os.listdir(links)) == list(want), "the replaced path", within=30)
    assert_links_match(links, want)
    numbers = inode_numbers(links)
    assert len(set(numbers.values())) == SMALL
