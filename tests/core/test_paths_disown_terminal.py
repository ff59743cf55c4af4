"""core.paths.disown_terminal: a process (the mount daemon) without a terminal of its own.

The switch is process-wide and one-way, so it is exercised in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    from core import paths
    before = paths.terminal_id()
    paths.disown_terminal()
    print(before, paths.terminal_id(), paths.terminal_id(env={"TMUX_PANE": "%2"}),
          paths.terminal_id(stdin_tty="/dev/pts/9"))
    """
)


def test_after_disowning_the_own_stdin_and_environment_name_no_terminal() -> None:
    leader, follower = os.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-c", CHILD],
            cwd=REPO,
            stdin=follower,
            env={**os.environ, "TMUX_PANE": "%7", "KITTY_WINDOW_ID": "3"},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    finally:
        os.close(leader)
        os.close(follower)
    before, after, explicit_env, explicit_tty = result.stdout.split()
    assert before.startswith("pts-")  # the child's own terminal, before disowning it
    assert after == "None"
    # Asking about another terminal explicitly still works.
    assert explicit_env == "tmux-%2"
    assert explicit_tty == "pts-9"
