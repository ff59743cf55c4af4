"""Acceptance (issue 26, point 2): a walk of a corpus bigger than ``--cache-mb`` leaves
the daemon holding the inodes (and nodes) of the sessions in its cache, not of every
session read.

A script that lists every ``entries/`` first and then opens each path looks each
name up again after its session was let go: the kernel kept that inode, and the
daemon its node, for good, and the daemon's memory grew with the corpus (about 400 MB
for a walk of 1,000 sessions with ``--cache-mb 256``). The root ``ctl`` counts the
inodes the kernel holds (``kernel_inodes``); here that count must drop back once the
walked sessions are let go."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.mount import MountFactory
from support.waiting import eventually
from support.write_setup import read_ctl
from test_cache_no_reload import ENTRIES, SESSIONS, check_read, mount_corpus

pytestmark = pytest.mark.fuse

#: far less than the corpus: a handful of its sessions fit at a time
CACHE_MB = 2
#: the sessions read again at the end, so that every other one is let go
REREAD = SESSIONS // 2


def kernel_inodes(mount_path: Path) -> int:
    return int(read_ctl(mount_path)["kernel_inodes"])


def test_a_listed_first_walk_lets_the_inodes_of_let_go_sessions_go(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, lines_by_id, dirs = mount_corpus(tmp_path, mount_factory, CACHE_MB)
    before = kernel_inodes(mount.path)

    paths = [d / name for d in dirs for name in os.listdir(d)]
    for path in paths:
        check_read(path, lines_by_id)
    assert len(paths) == SESSIONS * ENTRIES
    after_walk = kernel_inodes(mount.path)
    assert after_walk > before + ENTRIES  # the sessions still cached: their files held
    status = read_ctl(mount.path)
    assert int(status["cache_evictions"]) >= SESSIONS - REREAD, status  # most went
    # Only the entry files of the sessions the cache holds (one more being let go)
    loaded = int(status["cache"].split()[0])  # "<n> sessions loaded, ..."
    held_bound = before + 3 * SESSIONS + ENTRIES * (loaded + 1)
    eventually(
        lambda: kernel_inodes(mount.path) <= held_bound,
        f"kernel_inodes at most {held_bound} with {loaded} sessions loaded",
        within=60.0,
        every=0.5,
    )

    # The first sessions, long let go, read again: the cache lets go of every other.
    for d in dirs[:REREAD]:
        assert (d.parent / "context.json").read_bytes().startswith(b"{")
    # What may stay: dirs (projects, sessions, their entries/ and context.json) and at
    # most one session's entry files besides; not the walk's 12,000.
    bound = before + 3 * SESSIONS + ENTRIES
    eventually(
        lambda: kernel_inodes(mount.path) <= bound,
        f"kernel_inodes at most {bound} (after the walk: {after_walk})",
        within=60.0,
        every=0.5,
    )
    # Each file still reads the same after its inode went.
    for path in (paths[0], paths[len(paths) // 2], paths[-1]):
        check_read(path, lines_by_id)
