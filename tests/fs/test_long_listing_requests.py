"""Acceptance: ``ls -l entries/`` costs the daemon what ``ls entries/`` does (issue 26
point 6: the long listing is typed as often as the short one); a file named without a
listing before (a script, or a kernel that let the listing's names go) is answered
from the sizes the session's load measured, at the same exact size.

The kernel gets every file's attributes with its name (readdirplus), and keeps them
(an entry file never changes under its name): ``ls -l``, ``stat``, ``find -ls`` and
``du`` of every file then send the daemon no request per file -- no lookup, no
getattr, and no extended-attribute request (the daemon answers the first with ENOSYS
and the kernel asks no more) -- while every size they show is the number of bytes
``cat`` and ``wc -c`` read. The daemon's ``--debug`` log shows the requests it got."""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, MountFactory
from support.waiting import eventually
from test_huge_listing import (
    WORDS,
    agent_project,
    cat_all,
    entry,
    expected,
    ls_l,
    run,
    write_session,
)

pytestmark = pytest.mark.fuse

#: a few hundred entries: a request per file would stand out of the few the path's
#: directories cost
ENTRIES = 400
#: what listing requests are (every other request counts against the files)
LISTING = {"opendir", "readdir", "releasedir"}


def requests_since(mount: Mount, since: int) -> Counter[str]:
    """The requests of the ``--debug`` log from byte ``since`` on, by name."""
    lines = mount.log.read_bytes()[since:].decode(errors="replace")
    return Counter(re.findall(r" DEBUG (\w+)\(", lines))


def assert_asked_nothing_per_file(mount: Mount, since: int, what: str) -> None:
    """The requests since ``since`` are listings plus a handful (the path's dirs), not
    one per file."""
    asked = requests_since(mount, since)
    others = {name: n for name, n in asked.items() if name not in LISTING}
    assert sum(others.values()) < ENTRIES // 10, f"{what}: {others}"


def mounted_session(
    tmp_path: Path, mount_factory: MountFactory, *options: str
) -> tuple[Path, dict[str, bytes], Mount, Path]:
    """A session of `ENTRIES` entries, mounted fresh with ``options``: its file, its
    entry files (name -> bytes, in order), the mount and the session's ``entries/``."""
    session = agent_project(tmp_path) / "long.jsonl"
    write_session(session, ENTRIES, WORDS)
    mount = mount_factory(tmp_path / "agent", *options)
    entries = mount.path / "sessions" / "--work--" / "long" / "entries"
    return session, expected(session), mount, entries


def test_ls_l_stat_find_and_du_of_entries_ask_the_daemon_nothing_per_file(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _session, files, mount, entries = mounted_session(tmp_path, mount_factory, "--debug")
    names = list(files)

    # The first `ls -l` of a fresh daemon: every size exact, in file order.
    since = mount.log.stat().st_size
    listed = ls_l(entries)
    assert list(listed) == names
    assert [size for size, _ in listed.values()] == [len(files[n]) for n in names]
    assert requests_since(mount, since)["readdir"] >= 1  # the log holds the listing
    assert_asked_nothing_per_file(mount, since, "ls -l")

    # What else stats every file of a listing: the same sizes, no request per file.
    since = mount.log.stat().st_size
    stat_sizes = run("find", entries, "-type", "f", "-exec", "stat", "-c", "%n %s", "{}", "+")
    by_stat = dict(line.rsplit(" ", 1) for line in stat_sizes.decode().splitlines())
    assert {Path(p).name: int(s) for p, s in by_stat.items()} == {n: len(files[n]) for n in names}
    found = run("find", entries, "-type", "f", "-ls").decode().splitlines()
    assert sorted(int(line.split()[6]) for line in found) == sorted(len(b) for b in files.values())
    du_total = int(run("du", "-sb", entries).split()[0])
    assert du_total == sum(len(b) for b in files.values())
    assert_asked_nothing_per_file(mount, since, "stat, find -ls, du")

    # The sizes are what the reads return: `wc -c` of each file, `cat` of them all.
    counted = run("wc", "-c", *names, cwd=entries).decode().splitlines()[:-1]  # no total
    assert [int(line.split()[0]) for line in counted] == [len(files[n]) for n in names]
    assert cat_all(entries, names) == b"".join(files.values())


def stat_by_path(entries: Path, names: list[str]) -> list[tuple[int, int]]:
    """(size, mtime in seconds) of each file, each ``stat``'s path naming it (no
    listing: the kernel looks each name up)."""
    out = run("stat", "-c", "%s %Y", *(entries / name for name in names))
    return [(int(size), int(mtime)) for size, mtime in (line.split() for line in out.splitlines())]


def entry_time(data: bytes) -> int:
    return int(datetime.fromisoformat(orjson.loads(data)["timestamp"]).timestamp())


def test_entries_named_before_any_listing_show_their_exact_sizes(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    session, files, _mount, entries = mounted_session(tmp_path, mount_factory)
    names = list(files)

    assert stat_by_path(entries, names) == [(len(b), entry_time(b)) for b in files.values()]
    assert cat_all(entries, names) == b"".join(files.values())
    listed = ls_l(entries)
    assert [size for size, _ in listed.values()] == [len(files[n]) for n in names]

    # Another process appends: the new files, named before the next listing, too.
    with open(session, "ab") as f:
        f.write(
            b"".join(
                orjson.dumps(entry(i, "appended")) + b"\n" for i in range(ENTRIES, ENTRIES + 3)
            )
        )
    files = expected(session)
    new = list(files)[ENTRIES:]
    assert len(new) == 3
    eventually(lambda: (entries / new[-1]).exists(), "the appended entries", within=30)
    assert stat_by_path(entries, new) == [(len(files[n]), entry_time(files[n])) for n in new]
    assert cat_all(entries, new) == b"".join(files[n] for n in new)

    # The file is replaced (the same ids, longer texts): once the daemon has seen it,
    # a name looked up shows the new file's size, none an old one.
    replacement = session.with_suffix(".tmp")
    write_session(replacement, ENTRIES, f"{WORDS}, replaced by a longer text")
    os.replace(replacement, session)
    files = expected(session)
    names = list(files)
    want = [(len(b), entry_time(b)) for b in files.values()]
    eventually(lambda: stat_by_path(entries, names[:1]) == want[:1], "the replaced file", 30)
    assert stat_by_path(entries, names) == want
    assert cat_all(entries, names) == b"".join(files.values())
