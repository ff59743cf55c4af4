"""Run a command with its stderr on a pseudo-terminal (what a user's terminal is to
it) and its stdout on a pipe: tests of progress lines shown only on a terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class TtyRun:
    returncode: int
    stdout: str
    #: everything written to the terminal, escape sequences and carriage returns kept
    terminal: str


def run_with_terminal_stderr(
    command: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 120
) -> TtyRun:
    main, side = pty.openpty()
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=side, stdin=subprocess.DEVNULL, env=env
    ) as process:
        os.close(side)
        seen = bytearray()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([main], [], [], 0.5)
                if not ready:
                    if process.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the command closed its end
                    break
                if not chunk:
                    break
                seen += chunk
            assert process.stdout is not None
            stdout = process.stdout.read()
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            os.close(main)
            if process.poll() is None:
                process.kill()
    return TtyRun(process.returncode, stdout.decode(), seen.decode(errors="replace"))
