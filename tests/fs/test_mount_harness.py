"""The mount tests' harness (`support.mount`): no mount outlives the test process that
made it, even when that process dies without its teardown (killed by a timeout, the
OOM killer, or a kill of its whole process group, the daemon's included)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.mount import REPO, is_mounted

pytestmark = pytest.mark.fuse

#: A test process in miniature: it mounts through the harness, says where and which
#: daemon, then dies at once (SIGKILL: no teardown, no atexit, no finally).
_DYING_TEST = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from support.mount import start_mount

    mount = start_mount(Path(sys.argv[1]), Path(sys.argv[2]))
    print(mount.process.pid, flush=True)
    if sys.argv[3] == "group":
        os.killpg(os.getpgid(0), signal.SIGKILL)  # the daemon with it: a stale mount
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("killed", ["the test process", "group"])
def test_a_mount_is_undone_when_its_test_process_dies_without_teardown(
    tmp_path: Path, killed: str
) -> None:
    agent = tmp_path / "agent"
    (agent / "sessions").mkdir(parents=True)
    mountpoint = tmp_path / "mnt"
    test = subprocess.run(
        [sys.executable, "-c", _DYING_TEST, str(agent), str(mountpoint), killed],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "tests")},
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,  # (its own group, so that "group" kills only its own)
    )
    assert test.returncode == -signal.SIGKILL, test.stderr
    daemon = int(test.stdout.split()[0])
    try:
        deadline = time.monotonic() + 20
        while is_mounted(mountpoint) or Path(f"/proc/{daemon}").exists():
            assert time.monotonic() < deadline, "the mount outlived its test process"
            time.sleep(0.05)
    finally:  # (this test's own teardown, should the guard have failed)
        if is_mounted(mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)
