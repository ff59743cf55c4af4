"""A lower CPU priority for the daemon's background threads and worker processes:
when the machine is busy, the kernel gives the cores to the threads serving requests
first (``sessionfs.fs.foreground``, ``sessionfs.view.prerender``)."""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["BACKGROUND_NICENESS", "lower_own_priority"]

#: How much nicer than the daemon background threads and worker processes run.
BACKGROUND_NICENESS = 10


def lower_own_priority(niceness: int = BACKGROUND_NICENESS) -> None:
    """Make the calling thread ``niceness`` nicer (Linux: a priority is per thread, and
    threads it starts inherit it); best effort: elsewhere, or refused, nothing changes.
    There is no way back without privileges, so only threads and processes that do
    background work and nothing else call this."""
    with contextlib.suppress(OSError, AttributeError):
        thread = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + niceness))
