"""``sessionfs sync --once`` on a terminal shows the pass as one line rewritten in
place (files done, bytes, rate), erased before the summary; piped or redirected, only
the summary line (with files, bytes and the rate) and never a progress character."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from store_helpers import SYNC_TIMEOUT, S3Server, make_agent_dir, sync_command
from support.tty import run_with_terminal_stderr

SUMMARY = re.compile(
    r"sessionfs sync: shipped \d+ segments, 2 blobs, \d+ bytes; 4 files looked at in "
    r"[\d.]+ s \([\d.]+ (MB|GB)/s\)"
)


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_sync_once_progress(
    s3_server: S3Server, store_prefix: str, tmp_path: Path, terminal: bool
) -> None:
    agent = make_agent_dir(tmp_path, fixture="pi-v1-before-compaction.jsonl", project="--p--",
                           shared_blob=b"blob")  # fmt: skip
    command = sync_command(s3_server, store_prefix, agent, "desk", tmp_path / "state")
    if terminal:
        result = run_with_terminal_stderr(command, env=s3_server.env, timeout=SYNC_TIMEOUT)
        returncode, output = result.returncode, result.terminal
        assert "\r\x1b[Ksessionfs sync: 0/0 files, 0.0 MB, " in output  # the pass begins
        done = r"\r\x1b\[Ksessionfs sync: 4/4 files, [\d.]+ MB, [\d.]+ MB/s\r\x1b\[K"
        assert re.search(done, output), output  # the last file done, then erased
        last = output.rsplit("\r\x1b[K", 1)[1]  # the summary on a clean line
        assert SUMMARY.fullmatch(last.strip()), last
    else:
        done = subprocess.run(command, capture_output=True, text=True, env=s3_server.env,
                              timeout=SYNC_TIMEOUT)  # fmt: skip
        returncode, output = done.returncode, done.stderr
        assert "\r" not in output and "\x1b" not in output
        assert SUMMARY.fullmatch(output.strip().splitlines()[-1]), output
    assert returncode == 0, output
