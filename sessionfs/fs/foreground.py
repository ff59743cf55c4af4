"""How busy the mount is serving requests: `Foreground`, so that background work (the
search indexer) waits for a quiet moment instead of competing with the request a
user is waiting for.

The daemon has two cores and one GIL. A first ``cat`` right after mounting parses its
session while the indexer's first build parses every session: each slows the other,
and only one of them has someone waiting. The ops layer notes every request
(`started` / `finished`: a counter and a clock read, on the event loop only); work
that can wait awaits `quiet` before each step. The wait is bounded (`MAX_DEFER_SECONDS`)
so that a client polling without pause (``watch cat ...``, a long ``grep -r``) delays
background work but never starves it.

Background work also runs at a lower CPU priority (`run_in_background_thread`): when
the machine is busy, the kernel gives the cores to the threads serving requests first.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import trio

from sessionfs.view.priority import lower_own_priority

__all__ = [
    "MAX_DEFER_SECONDS",
    "QUIET_SECONDS",
    "STARTUP_GRACE_SECONDS",
    "Foreground",
    "run_in_background_thread",
]

T = TypeVar("T")

#: A mount is quiet once no request has been served for this long. The requests of one
#: command come back to back (lookup, getattr, open, reads: gaps well under a
#: millisecond), so a short pause already means the command is done.
QUIET_SECONDS = 0.04
#: When the mount comes up, its first request is this close (a command started once
#: ``mount`` returns, a script polling for the mount every few milliseconds).
STARTUP_GRACE_SECONDS = 0.1
#: The longest background work waits for a quiet moment.
MAX_DEFER_SECONDS = 1.0


class Foreground:
    """Requests in flight and when the last one ended (event loop only: no locks)."""

    def __init__(
        self, quiet_seconds: float = QUIET_SECONDS, max_defer: float = MAX_DEFER_SECONDS
    ) -> None:
        self.quiet_seconds = quiet_seconds
        self.max_defer = max_defer
        self.in_flight = 0
        self.last_active = time.monotonic()
        #: requests served so far (tests and ``ctl`` may show it)
        self.served = 0
        #: `give_way` does not wait again before this time (`time.monotonic`)
        self._work_until = 0.0
        #: when the mount last took a write request (`wrote`; `time.monotonic`)
        self.last_write = -math.inf

    def started(self) -> None:
        self.in_flight += 1

    def finished(self) -> None:
        self.in_flight -= 1
        self.served += 1
        now = time.monotonic()
        if now > self.last_active:  # never shortens a grace given by `touch`
            self.last_active = now

    def wrote(self) -> None:
        """A write request is being served (``write()`` to a file of the mount)."""
        self.last_write = time.monotonic()

    def writing(self, within: float) -> bool:
        """Whether the mount took a write request in the last ``within`` seconds (the
        inotify watch then gathers its events for longer: most are the mount's own)."""
        return time.monotonic() - self.last_write < within

    def touch(self, ahead: float = 0.0) -> None:
        """Count now, and ``ahead`` seconds more, as activity: e.g. the mount just came
        up and the first requests of a command run right after ``mount`` returned are
        on their way."""
        self.last_active = max(self.last_active, time.monotonic() + ahead)

    def idle_for(self) -> float:
        """Seconds since the last request ended (0 while one is being served)."""
        if self.in_flight > 0:
            return 0.0
        return max(0.0, time.monotonic() - self.last_active)

    async def quiet(self) -> bool:
        """Return once no request has been served for ``quiet_seconds``, or after
        ``max_defer`` whatever happens; True when it was quiet."""
        seconds = self.quiet_seconds
        deadline = time.monotonic() + self.max_defer
        while True:
            idle = self.idle_for()
            if idle >= seconds:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await trio.sleep(min(seconds - idle, left))

    def give_way(self, poll: float = 0.005) -> None:
        """From a background thread, in the middle of its work: sleep (letting go of
        the GIL) while the mount serves requests, until it has been quiet for
        ``quiet_seconds``, at most ``max_defer``. After a wait that ran out (a mount
        that is never quiet), the work goes on for ``max_defer`` before waiting again,
        so it gets at least half the time.

        Waiting before a step (`quiet`) is not enough: the search index's first build
        starts as the mount comes up and parses a session file for 100 ms or more,
        and a first ``cat context.json`` arriving meanwhile shared the GIL with it
        (issue 26: the indexer's thread took 70% of the daemon's samples during it).
        Reads two attributes the event loop writes: a stale reading only costs one
        more poll."""
        now = time.monotonic()
        if now < self._work_until:
            return
        deadline = now + self.max_defer
        while self.idle_for() < self.quiet_seconds:
            if time.monotonic() >= deadline:
                self._work_until = time.monotonic() + self.max_defer
                return
            time.sleep(poll)


async def run_in_background_thread(
    fn: Callable[[], T], name: str = "sessionfs-background", lower_priority: bool = True
) -> T:
    """``fn()`` in a new daemon thread at a lower priority (unless ``lower_priority`` is
    False: a request waits for it), awaited without blocking the event loop. Not trio's
    thread cache: a niced thread would go back to the cache and later serve a request
    at that priority. Cancelled, the caller stops waiting and the thread finishes on its
    own (a daemon thread: it never holds up the exit)."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    results: list[T] = []
    errors: list[BaseException] = []

    def body() -> None:
        if lower_priority:
            lower_own_priority()
        try:
            results.append(fn())
        except BaseException as exc:  # handed to the awaiting task
            errors.append(exc)
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(done.set)

    threading.Thread(target=body, name=name, daemon=True).start()
    await done.wait()
    if errors:
        raise errors[0]
    return results[0]
