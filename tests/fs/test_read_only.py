"""``sessionfs mount --read-only`` writes nothing under the agent dir.

The agent dir is fingerprinted before the mount and after the unmount: every path,
its type, size, mtime and (for files) sha256, and every directory's mtime too, so a
file that was created and removed again while mounted (SQLite's ``-wal``/``-shm``,
a temporary file) shows up as a changed directory.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from support.file_snapshot import fingerprint
from support.mount import COMMAND_TIMEOUT, Mount, MountFactory, run
from support.write_setup import drop, errno_of

pytestmark = pytest.mark.fuse


def browse_everything(mount: Mount) -> None:
    """What a curious user does: list it all, read every file, follow the links."""
    assert run("ls", "-laR", mount.path)
    run("find", mount.path, "-type", "f", "-exec", "cat", "{}", "+")
    for link in ("recent/1", "recent/2"):
        target = mount.path / link
        for name in ("context.json", "transcript.md", "tree.txt", "header.json", "ctl"):
            assert (target / name).read_bytes(), (link, name)
    for session in (mount.path / "by-id").iterdir():
        assert (session / "transcript.md").read_bytes()
        assert run("ls", session / "entries")
    blobs = list((mount.path / "blobs").iterdir())
    assert blobs, "the demo stores an image blob"
    for blob in blobs:
        assert blob.read_bytes()


def read_history(mount: Mount) -> None:
    """The read-only mount still shows the prompt history and searches it."""
    recent = (mount.path / "history" / "recent.txt").read_text()
    assert "Add a --json flag to the list command." in recent.splitlines()[0]
    assert len(recent.splitlines()) == 4
    found = run("cat", mount.path / "history" / "search" / "redirect")
    assert [line.split("\t")[2] for line in found.splitlines()] == [
        "Write a regression test for the redirect loop.",
        "The login page redirects forever after a session expires.",
    ]
    assert (mount.path / "history" / "search" / "x").read_bytes() == b""


def attempt_writes(mount: Mount) -> dict[str, int]:
    session = Path(os.path.realpath(mount.path / "recent" / "1"))
    first_entry = sorted(os.listdir(session / "entries"))[0]
    ln = subprocess.run(
        ["ln", "-sfn", f"entries/{first_entry}", "leaf"],
        cwd=session,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    return {
        "title": errno_of(lambda: drop(session, "title", b"renamed\n")),
        "append": errno_of(lambda: drop(session / "append", "a.txt", b"hello")),
        "session ctl": errno_of(lambda: drop(session, "ctl", b"flush\n")),
        "root ctl": errno_of(lambda: drop(mount.path, "ctl", b"new /tmp/x\n")),
        "new file": errno_of(lambda: drop(mount.path / "sessions", "x.jsonl", b"{}\n")),
        "mkdir": errno_of(lambda: os.mkdir(session / "labels" / "d")),
        "rm leaf": errno_of(lambda: os.unlink(session / "leaf")),
        "ln -sfn leaf": errno.EROFS if "Read-only file system" in ln.stderr else ln.returncode,
    }


def test_a_read_only_mount_leaves_every_byte_of_the_agent_dir_as_it_was(
    demo_agent: Path,
    mount_factory: MountFactory,
) -> None:
    assert (demo_agent / "history.db").is_file()
    before = fingerprint(demo_agent)
    mount = mount_factory(demo_agent, "--read-only")
    browse_everything(mount)
    read_history(mount)
    codes = attempt_writes(mount)
    assert codes == dict.fromkeys(codes, errno.EROFS)
    browse_everything(mount)  # a second pass reads from warm caches
    assert mount.alive()
    mount.unmount()
    assert mount.process.returncode == 0
    assert "Traceback" not in mount.log.read_text(errors="replace")
    after = fingerprint(demo_agent)
    assert sorted(after) == sorted(before), "files appeared or vanished"
    assert after == before
