"""Nothing of Claude Code's or Codex's is ever written: every write under ``agents/``
is ``EROFS`` (on a writable mount) with the reason in a ``ctl``, and both agents' trees
are byte-for-byte, mtime-for-mtime the same after heavy use of the mount (``ls -R``,
``cat`` of every file, ``grep -r``, ``find``, writes attempted) -- the leaf moves
(``ln -sfn``, ``rm leaf``) included, which the mount holds itself."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from support.file_snapshot import fingerprint
from support.mount import COMMAND_TIMEOUT, Mount, MountFactory, run
from support.other_agents import fake_home, home_env
from support.write_setup import drop, errno_of

pytestmark = pytest.mark.fuse


def _session_dirs(agents: Path) -> list[Path]:
    return [
        Path(p) for p in run("find", agents, "-name", "header.json", "-printf", "%h\n").splitlines()
    ]


def _shell_errno(command: list[str], cwd: Path) -> int:
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )
    return errno.EROFS if "Read-only file system" in done.stderr else done.returncode


def attempt_writes(mount: Mount, session: Path) -> dict[str, int]:
    agents = mount.path / "agents"
    entry = sorted(os.listdir(session / "entries"))[0]
    return {
        "title": errno_of(lambda: drop(session, "title", b"renamed\n")),
        "entry": errno_of(lambda: drop(session / "entries", entry, b"{}")),
        "new file": errno_of(lambda: drop(session, "note.md", b"hello")),
        "append dir": errno_of(lambda: os.mkdir(session / "append")),
        "agents mkdir": errno_of(lambda: os.mkdir(agents / "other")),
        "projects file": errno_of(lambda: drop(agents / "claude" / "sessions", "x.jsonl", b"{}\n")),
        "rm entry": errno_of(lambda: os.unlink(session / "entries" / entry)),
        "rm leaf": errno_of(lambda: os.unlink(session / "leaf")),
        "chmod": errno_of(lambda: os.chmod(session / "context.json", 0o666)),
        "ln -sfn leaf": _shell_errno(["ln", "-sfn", f"entries/{entry}", "leaf"], session),
        "touch": _shell_errno(["touch", "tree.txt"], session),
        "mv": _shell_errno(["mv", "title", "title2"], session),
    }


def test_every_write_under_agents_is_erofs_and_nothing_changes(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    trees = fake_home(tmp_path)
    before = {"claude": fingerprint(trees.claude), "codex": fingerprint(trees.codex)}
    mount = mount_factory(demo_agent, env=home_env(trees.home))
    agents = mount.path / "agents"
    assert run("ls", "-laR", agents)
    run("find", agents, "-type", "f", "-exec", "cat", "{}", "+")
    run("grep", "-r", "-c", "redirect", agents, check=False)
    sessions = _session_dirs(agents)
    assert len(sessions) >= 8  # both agents, sub-agents included
    held_by_the_mount = {"rm leaf": 0, "ln -sfn leaf": 0}
    for session in sessions:
        codes = attempt_writes(mount, session)
        assert codes == dict.fromkeys(codes, errno.EROFS) | held_by_the_mount, session
        ctl = (mount.path / "ctl").read_text()
        assert "last_error: agents/" in ctl and "read-only" in ctl
        # the last refusal, in the session dir itself: its own ctl says why
        assert "last_error: mv agents/" in (session / "ctl").read_text()
    run("find", agents, "-type", "f", "-exec", "cat", "{}", "+")  # warm caches now
    assert (
        "Read-only file system"
        in subprocess.run(
            ["sh", "-c", f"echo x >> '{sessions[0]}/transcript.md'"],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        ).stderr
    )
    # A writable mount: the local agent dir's own writes still work.
    local = Path(os.path.realpath(mount.path / "recent" / "1"))
    drop(local / "append", "ok.txt", b"still writable")
    assert mount.alive()
    mount.unmount()
    assert "Traceback" not in mount.log.read_text(errors="replace")
    after = {"claude": fingerprint(trees.claude), "codex": fingerprint(trees.codex)}
    for agent in ("claude", "codex"):
        assert sorted(after[agent]) == sorted(before[agent]), f"{agent}: files came or went"
        assert after[agent] == before[agent], agent
