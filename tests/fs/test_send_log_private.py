"""Issue 17, point 2, for ``send.log``: the agent's output is kept private on disk
(``0700`` dirs, ``0600`` files, whatever the umask), and a name in the cache dir is
never written through a planted symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessionfs.fs.send_log import LOG_LIMIT, SendLogs

KEY = ("--p--", "s")


def test_send_logs_are_private_under_umask_022(tmp_path: Path) -> None:
    logs = SendLogs(tmp_path / "cache" / "send-logs")  # the cache dir is not there yet
    old = os.umask(0o022)
    try:
        fd = logs.open_for_run(KEY)
        os.write(fd, b"x" * (LOG_LIMIT + 10))
        os.close(fd)
        logs.trim(KEY)  # rewritten through a temp file
    finally:
        os.umask(old)
    found = {p.name: p.stat().st_mode & 0o777 for p in [tmp_path / "cache", *tmp_path.rglob("*")]}
    assert set(found.values()) <= {0o700, 0o600} and len(found) == 3, found
    assert logs.tail(KEY) == b"x" * LOG_LIMIT


def test_a_symlink_planted_at_a_log_name_is_not_followed(tmp_path: Path) -> None:
    logs = SendLogs(tmp_path / "send-logs")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    logs.directory.mkdir()
    logs.path(KEY).symlink_to(victim)
    with pytest.raises(OSError):
        logs.open_for_run(KEY)
    assert victim.read_bytes() == b"keep me"
    assert logs.tail(KEY) == b""
