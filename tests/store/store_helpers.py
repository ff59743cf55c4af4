"""Helpers of the store tests: agent dirs to ship, the sync command, the mirror, comparisons."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from support.fixture_paths import fixture_path

from sessionfs.store.client import StoreClient
from sessionfs.store.mirror import StoreMirror
from sessionfs.store.url import parse_store_url

SYNC_TIMEOUT = 60


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    #: Environment for the server's clients (credentials; no user AWS config read).
    env: dict[str, str]

    def store_url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def client(self, prefix: str) -> StoreClient:
        return StoreClient(parse_store_url(self.store_url(prefix)), self.endpoint)

    def mirror(self, prefix: str, cache: Path) -> StoreMirror:
        return StoreMirror(self.client(prefix), cache)


def add_blob(agent: Path, data: bytes) -> str:
    sha = hashlib.sha256(data).hexdigest()
    (agent / "blobs").mkdir(parents=True, exist_ok=True)
    (agent / "blobs" / sha).write_bytes(data)
    return sha


def make_agent_dir(root: Path, *, fixture: str, project: str, shared_blob: bytes) -> Path:
    """An agent dir with one real session, a sub-agent session in its artifacts dir, blobs."""
    agent = root / "agent"
    session = agent / "sessions" / project / f"2026-01-01T00-00-00-000Z_{project.strip('-')}.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(fixture_path(fixture).read_bytes())
    sub_agent = session.with_suffix("") / "subagent-1.jsonl"
    sub_agent.parent.mkdir()
    sub_agent.write_bytes(b"".join(fixture_path(fixture).read_bytes().splitlines(True)[:5]))
    (session.with_suffix("") / "notes.txt").write_text("not a session: stays local\n")
    add_blob(agent, shared_blob)
    add_blob(agent, f"only on {project}".encode())
    return agent


def sync_command(
    server: S3Server,
    prefix: str,
    agent: Path,
    machine: str,
    state: Path,
    *extra: str,
    endpoint: str | None = None,
) -> list[str]:
    return [
        sys.executable, "-m", "sessionfs.store.command", "sync",
        "--store", server.store_url(prefix), "--endpoint-url", endpoint or server.endpoint,
        "--machine", machine, "--agent-dir", str(agent), "--state-dir", str(state),
        "--once", *extra,
    ]  # fmt: skip


def run_sync(
    server: S3Server, prefix: str, agent: Path, machine: str, state: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    command = sync_command(server, prefix, agent, machine, state, *extra)
    return subprocess.run(
        command, capture_output=True, text=True, timeout=SYNC_TIMEOUT, env=server.env
    )


def shipped_files(agent: Path) -> dict[str, bytes]:
    """What a full sync ships: every complete line of each ``*.jsonl``, and every blob."""
    files: dict[str, bytes] = {}
    for path in sorted((agent / "sessions").rglob("*.jsonl")):
        data = path.read_bytes()
        files[path.relative_to(agent).as_posix()] = data[: data.rfind(b"\n") + 1]
    for path in sorted((agent / "blobs").iterdir()):
        files[path.relative_to(agent).as_posix()] = path.read_bytes()
    return files


def mirrored_files(mirror: StoreMirror, machine: str) -> dict[str, bytes]:
    root = mirror.machine_dir(machine)
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }


def store_bytes(server: S3Server, prefix: str) -> int:
    return sum(item.size for item in server.client(prefix).list(prefix + "/"))
