"""Waiting for what the mount shows to change: poll until true or fail the test."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from support.write_setup import read_ctl


def eventually(check: Callable[[], bool], what: str, within: float, every: float = 0.05) -> None:
    """Return once ``check()`` is true; fail the test naming ``what`` after ``within`` s."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not seen within {within}s: {what}"
        time.sleep(every)


def search_ready(mount_path: Path, within: float = 30.0) -> None:
    """Return once the mount's root ``ctl`` says its search index is ready: a search
    read before that answers from a partial index (no hits yet is not a failure)."""
    eventually(
        lambda: read_ctl(mount_path)["search"].startswith("ready"), "the search index", within
    )


def agent_search_ready(mount_path: Path, agent: str, within: float = 30.0) -> None:
    """Return once the root ``ctl`` says ``agent``'s search index (``search_<agent>``)
    is ready."""
    eventually(
        lambda: str(read_ctl(mount_path).get(f"search_{agent}", "")).startswith("ready"),
        f"the {agent} search index",
        within,
    )
