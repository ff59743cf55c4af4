"""Waiting for what the mount shows to change: poll until true or fail the test."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], bool], what: str, within: float, every: float = 0.05) -> None:
    """Return once ``check()`` is true; fail the test naming ``what`` after ``within`` s."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not seen within {within}s: {what}"
        time.sleep(every)
