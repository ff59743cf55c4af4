"""A close on a ``--read-only`` mount costs no round trip to the daemon (issue 26).

The kernel sends FLUSH at every close, and a writable mount needs it: a file written
through the mount is committed then, so that ``close`` reports a refusal. On a
read-only mount no file is open for writing, so the daemon answers the first FLUSH
with ENOSYS and the kernel sends no more: a cold read of thousands of entry files
makes a quarter fewer requests. The daemon's ``--debug`` log shows the requests it got.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.mount import Mount, MountFactory, run
from support.waiting import eventually

pytestmark = pytest.mark.fuse


def cat_every_entry(mount_path: Path) -> list[Path]:
    """``cat`` of every ``entries/*.json`` of the first session: each file opened,
    read and closed; returns the files."""
    by_id = mount_path / "by-id"
    session = sorted(by_id.iterdir())[0]
    files = sorted((session / "entries").iterdir())
    assert len(files) >= 3, "the demo's first session has a few entries"
    out = run("cat", *files)
    assert out.count('"id"') >= len(files)  # every file's JSON came through
    return files


def counts(mount: Mount, since: int) -> tuple[int, int]:
    """(opens, flushes) among the ``--debug`` log lines from byte ``since`` on."""
    requests = mount.log.read_bytes()[since:].decode(errors="replace")
    return len(re.findall(r"DEBUG open\(", requests)), len(re.findall(r"DEBUG flush\(", requests))


def cat_again(mount: Mount) -> tuple[int, list[Path]]:
    """The log's size, then a second ``cat`` of every entry (the first close of the
    mount may ask: it learns ENOSYS); returns the size and the files."""
    cat_every_entry(mount.path)
    since = mount.log.stat().st_size
    return since, cat_every_entry(mount.path)


def test_closes_on_a_read_only_mount_stop_reaching_the_daemon(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount = mount_factory(demo_agent, "--read-only", "--debug")
    since, files = cat_again(mount)
    # the log is written as requests arrive: once every open is in, so is what came before
    eventually(lambda: counts(mount, since)[0] >= len(files), "every open in the log", 30)
    assert counts(mount, since)[1] == 0, f"FLUSH requests for {len(files)} closes"


def test_a_writable_mount_still_gets_every_close(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    """Writes commit at the close: a writable mount keeps its FLUSH requests."""
    mount = mount_factory(demo_agent, "--debug")
    since, files = cat_again(mount)
    eventually(lambda: counts(mount, since)[1] >= len(files), "a FLUSH per close", 30)
    assert counts(mount, since) == (len(files), len(files))
