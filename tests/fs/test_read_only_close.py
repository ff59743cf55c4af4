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
from support.mount import MountFactory, run
from support.watched import requests_during

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


def counts(requests: str) -> tuple[int, int]:
    """(opens, flushes) among ``--debug`` log lines."""
    return len(re.findall(r"DEBUG open\(", requests)), len(re.findall(r"DEBUG flush\(", requests))


def test_closes_on_a_read_only_mount_stop_reaching_the_daemon(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount = mount_factory(demo_agent, "--read-only", "--debug")
    cat_every_entry(mount.path)  # the first close may still ask (and learns ENOSYS)
    files: list[Path] = []
    requests = requests_during(mount, lambda: files.extend(cat_every_entry(mount.path)))
    opens, flushes = counts(requests)
    assert opens >= len(files), "the log shows the opens (page cache kept: at least one each)"
    assert flushes == 0, f"{flushes} FLUSH requests for {opens} closes"


def test_a_writable_mount_still_gets_every_close(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    """Writes commit at the close: a writable mount keeps its FLUSH requests."""
    mount = mount_factory(demo_agent, "--debug")
    cat_every_entry(mount.path)
    files: list[Path] = []
    requests = requests_during(mount, lambda: files.extend(cat_every_entry(mount.path)))
    opens, flushes = counts(requests)
    assert opens >= len(files)
    assert flushes == opens
