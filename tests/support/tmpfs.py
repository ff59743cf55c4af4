"""Small tmpfs mounts for the full-disk tests (they need root; otherwise the test skips)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fill", "tmpfs"]

#: No mount or umount may hang a test.
_COMMAND_TIMEOUT = 30


@contextmanager
def tmpfs(target: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``mount -o size=``) mounted on the new dir ``target``;
    unmounted on exit even when the test fails. Skips the test where it cannot mount."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    target.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
        capture_output=True,
        timeout=_COMMAND_TIMEOUT,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield target
    finally:
        _unmount(target)


def _unmount(target: Path) -> None:
    # A mount that just stopped may still hold a file open for a moment: retry, and
    # detach lazily as a last resort rather than leave the tmpfs behind.
    for _ in range(50):
        umount = ["umount", str(target)]
        if subprocess.run(umount, capture_output=True, timeout=_COMMAND_TIMEOUT).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=_COMMAND_TIMEOUT)


def fill(directory: Path) -> Path:
    """Fill the file system to the last byte; returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler
