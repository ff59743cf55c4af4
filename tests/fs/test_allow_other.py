"""Issue 17, point 1: under ``--allow-other`` another user reads through the mount
exactly what the files' modes let them read on disk, by every path (``search/``,
``transcripts/``, ``by-id/``, ``recent/``, ``blobs/``, ``artifacts/``, ``subagents/``,
``history/``), and writes nothing they could not write on disk.

The mount is made by root (the tests run as root); the readers are other uids, run with
``setpriv`` (``cat``, ``ls``, ``grep``, ``sh``). The mountpoint lies in a dir they can
enter; the agent dir does not, so whatever they read came through the mount."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from support.mount import Mount, run, start_mount
from support.waiting import search_ready

from core.history import HistoryStorage

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts for other uids"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)"),
]

PROJECT = "--perm--"
OTHER = 65534  # nobody: in no group of these files
TEAM_GID = 4242
PRIVATE_BLOB = b"\x89PNG private pixels"
SHARED_BLOB = b"\x89PNG shared pixels"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def line(obj: dict) -> bytes:
    return orjson.dumps(obj) + b"\n"


def write_session(path: Path, session_id: str, words: str, blob: bytes | None = None) -> None:
    """A header and one user message holding ``words`` (and an image blob ref)."""
    content: list[dict] = [{"type": "text", "text": f"{words} common"}]
    if blob is not None:
        content.append(
            {"type": "image", "data": f"blob:sha256:{sha(blob)}", "mimeType": "image/png"}
        )
    header = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/x",
    }
    message = {
        "type": "message",
        "id": f"{session_id}-1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": content, "timestamp": 0},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(line(header) + line(message))


@dataclass
class Agent:
    root: Path
    sessions: Path  # the project dir

    def session(self, stem: str) -> Path:
        return self.sessions / f"{stem}.jsonl"


def make_agent(root: Path) -> Agent:
    """Three sessions: ``private`` (0600), ``shared`` (0644), ``team`` (0640, group
    TEAM_GID); the shared one has a private artifact and a private sub-agent run, and
    uses a private blob; ``history.db`` is 0600."""
    agent = Agent(root / "agent", root / "agent" / "sessions" / PROJECT)
    write_session(agent.session("private"), "private-id", "privateword", PRIVATE_BLOB)
    write_session(agent.session("shared"), "shared-id", "sharedword", PRIVATE_BLOB)
    write_session(agent.session("team"), "team-id", "teamword", SHARED_BLOB)
    write_session(agent.sessions / "private" / "0-Task.jsonl", "ptask-id", "privatetaskword")
    artifacts = agent.sessions / "shared"
    write_session(artifacts / "0-Task.jsonl", "stask-id", "subagentword")
    (artifacts / "open.log").write_text("openartifact\n")
    (artifacts / "secret.log").write_text("secretartifact\n")
    blobs = agent.root / "blobs"
    blobs.mkdir()
    (blobs / sha(PRIVATE_BLOB)).write_bytes(PRIVATE_BLOB)
    (blobs / sha(SHARED_BLOB)).write_bytes(SHARED_BLOB)
    history = HistoryStorage(agent.root / "history.db")
    history.add("historyword typed", "/x")
    history.close()
    modes = {
        agent.session("private"): 0o600,
        agent.sessions / "private" / "0-Task.jsonl": 0o644,  # inside a private session
        agent.session("shared"): 0o644,
        artifacts / "0-Task.jsonl": 0o600,
        artifacts / "open.log": 0o644,
        artifacts / "secret.log": 0o600,
        agent.session("team"): 0o640,
        blobs / sha(PRIVATE_BLOB): 0o600,
        blobs / sha(SHARED_BLOB): 0o644,
        agent.root / "history.db": 0o600,
    }
    for path, mode in modes.items():
        path.chmod(mode)
    os.chown(agent.session("team"), 0, TEAM_GID)
    return agent


@dataclass
class Reader:
    """Runs a command through the mount as another user."""

    mount: Path
    uid: int
    groups: tuple[int, ...] = ()

    def run(self, *cmd: str) -> subprocess.CompletedProcess[bytes]:
        groups = (
            [f"--groups={','.join(map(str, self.groups))}"] if self.groups else ["--clear-groups"]
        )
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", *groups, *cmd],
            cwd=self.mount,
            capture_output=True,
            timeout=60,
            check=False,
        )

    def cat(self, path: str) -> bytes | None:
        """The file's bytes, or None when the reader may not open it."""
        result = self.run("cat", path)
        if result.returncode != 0:
            assert b"Permission denied" in result.stderr, (path, result.stderr)
            return None
        return result.stdout


@pytest.fixture
def mounted(tmp_path: Path, public_dir: Path) -> Iterator[tuple[Agent, Mount]]:
    agent = make_agent(tmp_path)
    mount = start_mount(agent.root, public_dir / "mnt", "--allow-other")
    try:
        yield agent, mount
    finally:
        mount.unmount()


def test_another_user_reads_what_the_modes_allow_by_every_path(
    mounted: tuple[Agent, Mount],
) -> None:
    agent, mount = mounted
    search_ready(mount.path, within=60)
    # The owner (root) first: what it reads must not be served to the others.
    every = run("cat", mount.path / "search" / "common")
    assert {"private", "shared", "team"} <= {row.split("/")[2] for row in every.splitlines()}
    other = Reader(mount.path, OTHER)
    s = f"sessions/{PROJECT}"
    for word in ("privateword", "teamword", "privatetaskword", "subagentword"):
        assert other.cat(f"search/{word}") == b"", word
    hits = (other.cat("search/common") or b"").decode()
    assert [row.split("\t")[1].split("/")[2] for row in hits.splitlines()] == ["shared"]
    size = other.run("stat", "-c", "%s", "search/common").stdout.decode().strip()
    assert int(size) == len(hits.encode())  # its own size, not the owner's
    assert b"sharedword" in (other.cat("search/sharedword") or b"")
    assert other.run("grep", "-rl", "privateword", "transcripts").stdout == b""
    refused = [
        f"transcripts/{PROJECT}/private.md",
        f"transcripts/{PROJECT}/team.md",
        f"transcripts/{PROJECT}/shared/0-Task.md",
        f"transcripts/{PROJECT}/private/0-Task.md",
        "by-id/private-id/transcript.md",
        "by-id/ptask-id/transcript.md",
        f"{s}/private/transcript.md",
        f"{s}/private/artifacts/0-Task.jsonl",
        f"{s}/private/subagents/0-Task/transcript.md",
        f"{s}/shared/subagents/0-Task/transcript.md",
        f"{s}/shared/artifacts/secret.log",
        f"{s}/shared/artifacts/0-Task.jsonl",
        f"{s}/shared/blobs/{sha(PRIVATE_BLOB)}",
        f"blobs/{sha(PRIVATE_BLOB)}",
        "history/recent.txt",
        "history/search/historyword",
    ]
    recent = {os.readlink(mount.path / "recent" / n).rsplit("/", 1)[-1]: n for n in "123"}
    refused.append(f"recent/{recent['private']}/context.json")
    assert {path: other.cat(path) for path in refused} == dict.fromkeys(refused)
    readable = {
        f"transcripts/{PROJECT}/shared.md": b"sharedword",
        "by-id/shared-id/transcript.md": b"sharedword",
        f"recent/{recent['shared']}/transcript.md": b"sharedword",
        f"{s}/shared/artifacts/open.log": b"openartifact",
        f"blobs/{sha(SHARED_BLOB)}": SHARED_BLOB,
    }
    for path, expected in readable.items():
        assert expected in (other.cat(path) or b""), path
    assert other.run("ls", f"{s}/private").returncode != 0
    # A member of the team's group reads the team's session, still not the private one.
    member = Reader(mount.path, OTHER, (TEAM_GID,))
    assert b"teamword" in (member.cat(f"transcripts/{PROJECT}/team.md") or b"")
    assert b"teamword" in (member.cat("search/teamword") or b"")
    assert member.cat("search/privateword") == b""
    # The owner still sees everything, after the others (no per-user result leaks back).
    assert run("cat", mount.path / "search" / "common") == every
    # history/ follows history.db: readable by others once the file is.
    (agent.root / "history.db").chmod(0o644)
    deadline = time.monotonic() + 5
    while (found := other.cat("history/search/historyword")) is None:
        assert time.monotonic() < deadline, "history/ never followed history.db's mode"
        time.sleep(0.2)
    assert b"historyword typed" in found


def test_another_user_writes_nothing_through_the_mount(mounted: tuple[Agent, Mount]) -> None:
    agent, mount = mounted
    other = Reader(mount.path, OTHER)
    shared = f"sessions/{PROJECT}/shared"
    before = {p: p.read_bytes() for p in agent.sessions.rglob("*.jsonl")}
    attempts = {
        "title": f"echo x > {shared}/title",
        "ctl": f"echo fork > {shared}/ctl",
        "append": f"echo hi > {shared}/append/m.txt",
        "label": f"ln -s ../entries/shared-id-1.json {shared}/labels/mine",
        "leaf": f"ln -sfn entries/shared-id-1.json {shared}/leaf",
        "new": "echo 'new /tmp/x' > ctl",
    }
    for name, command in attempts.items():
        result = other.run("sh", "-c", command)
        assert result.returncode != 0, name
        assert b"Permission denied" in result.stderr, (name, result.stderr)
    assert {p: p.read_bytes() for p in agent.sessions.rglob("*.jsonl")} == before
    assert sorted(agent.sessions.rglob("*.jsonl")) == sorted(before)
    # The owner can: what the mount shows is what the kernel enforces.
    run("sh", "-c", f"echo mine > '{mount.path / shared / 'title'}'")
    assert b'"mine' in agent.session("shared").read_bytes()
