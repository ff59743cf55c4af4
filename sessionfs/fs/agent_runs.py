"""The agent runs that ``send`` starts: at most one per session, each watched until it
ends, stopped on timeout and at unmount.

A run is the agent as its own process group (``start_new_session``): a terminal's or
the daemon's signals do not reach it, a daemon killed with SIGKILL leaves it to finish
on its own (it writes the session file itself), and stopping it stops whatever it
started too (``killpg``). Stopping is SIGTERM, then SIGKILL after `KILL_AFTER_SECONDS`.

Everything here runs on the trio event loop: starting a process and waiting for it
never blocks a thread, and a reader waiting for a run (``cat send``) is one sleeping
task. Waiting readers are bounded (`MAX_WAITERS`) because each holds one of the FUSE
worker tasks until the run ends.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import trio

from sessionfs.fs.send_log import SendLogs
from sessionfs.view.refusal import WriteRejected

__all__ = ["KILL_AFTER_SECONDS", "MAX_WAITERS", "AgentRuns", "Run"]

log = logging.getLogger(__name__)

SessionKey = tuple[str, str]

#: After SIGTERM, how long a run has to exit before SIGKILL.
KILL_AFTER_SECONDS = 10.0
#: How often a running agent's log is checked against its bound.
LOG_CHECK_SECONDS = 1.0
#: Readers of ``send`` waiting at once, mount-wide (the FUSE loop runs 64 tasks).
MAX_WAITERS = 16


@dataclass
class Run:
    """One agent run: its process, when it started, and (once over) its status."""

    process: trio.Process
    started_at: float  # wall clock, for ctl
    started: float = field(default_factory=time.monotonic)
    done: trio.Event = field(default_factory=trio.Event)
    #: cancelled to stop the run early (unmount); the watcher then stops the process
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    stop_reason: str | None = None
    status: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at))
        return f"running pid {self.pid} since {since}"


def exit_status(returncode: int, seconds: float) -> str:
    """``exit 0 after 3.2 s``; anything else is ``failed: …``."""
    took = f"after {seconds:.1f} s"
    if returncode == 0:
        return f"exit 0 {took}"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"failed: killed by {name} {took}"
    return f"failed: exit {returncode} {took}"


class AgentRuns:
    """The runs of one mount, by session key; the last status of each session."""

    def __init__(self, logs: SendLogs, *, timeout: float, grace: float) -> None:
        self.logs = logs
        self.timeout = timeout
        self.grace = grace
        self._active: dict[SessionKey, Run] = {}
        self._reserved: set[SessionKey] = set()
        self._last: dict[SessionKey, str] = {}
        self._changed: dict[SessionKey, int] = {}  # when a run last started or ended
        self._nursery: trio.Nursery | None = None
        self._waiters = 0
        self.closing = False
        self._impatient = False  # a second signal: no more grace
        self._grace_scopes: list[trio.CancelScope] = []

    # -- state -------------------------------------------------------------------------

    def active(self, key: SessionKey) -> Run | None:
        return self._active.get(key)

    def busy(self, key: SessionKey) -> bool:
        """A run is active or about to start on the session."""
        return key in self._active or key in self._reserved

    def last_status(self, key: SessionKey) -> str | None:
        return self._last.get(key)

    def changed_ns(self, key: SessionKey) -> int | None:
        """When a run on the session last started or ended (``send``'s mtime)."""
        return self._changed.get(key)

    def any_busy(self) -> bool:
        """Whether a run is active or about to start on any session."""
        return bool(self._active) or bool(self._reserved)

    def check_idle(self, key: SessionKey, what: str) -> None:
        """`WriteRejected` (``EBUSY``) for a write to a session an agent is running on:
        nothing may be mixed into what the agent is writing."""
        run = self._active.get(key)
        if run is not None:
            raise WriteRejected(
                errno.EBUSY,
                f"{what}: an agent is running on this session (pid {run.pid}; "
                "`cat send` waits for it)",
            )
        if key in self._reserved:
            raise WriteRejected(errno.EBUSY, f"{what}: an agent is starting on this session")

    # -- starting ------------------------------------------------------------------------

    def reserve(self, key: SessionKey) -> None:
        """Claim the session for a run about to start (synchronous: of two sends at once,
        exactly one gets it). `release` if the run does not start."""
        if self.closing or self._nursery is None:
            raise WriteRejected(errno.ESHUTDOWN, "send: the mount is being unmounted")
        self.check_idle(key, "send")
        self._reserved.add(key)

    def release(self, key: SessionKey) -> None:
        self._reserved.discard(key)

    async def start(
        self,
        key: SessionKey,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> Run:
        """Start the agent for a reserved session; returns once the process exists. Its
        stdout and stderr go to the session's log, its stdin is ``/dev/null``.
        ``after``: called once the process has ended, before a reader waiting for the
        run is let go (what the run made is then known to the mount)."""
        assert key in self._reserved and self._nursery is not None
        try:
            log_fd = self.logs.open_for_run(key)
            try:
                process = await trio.lowlevel.open_process(
                    list(argv),
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fd,
                    stderr=log_fd,
                    start_new_session=True,
                    close_fds=True,
                    env=env,
                )
            finally:
                os.close(log_fd)
        except OSError as exc:
            reason = f"send: cannot start {argv[0]}: {exc.strerror or exc}"
            self._last[key] = f"failed: cannot start {argv[0]}: {exc.strerror or exc}"
            raise WriteRejected(exc.errno or errno.EIO, reason) from None
        finally:
            self._reserved.discard(key)
        run = Run(process, started_at=time.time())
        self._active[key] = run
        self._changed[key] = time.time_ns()
        log.info("send: started %s (pid %d) for %s", argv[0], run.pid, "/".join(key))
        self._nursery.start_soon(self._watch, key, run, after)
        return run

    async def _watch(
        self, key: SessionKey, run: Run, after: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        try:
            with run.scope:
                with trio.move_on_after(self.timeout) as limit:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._bound_log, key)
                        await run.process.wait()
                        nursery.cancel_scope.cancel()
                if limit.cancelled_caught:
                    run.stop_reason = f"timed out after {self.timeout:g} s (--send-timeout)"
            if run.process.returncode is None:  # timed out, or stopped at unmount
                with trio.CancelScope(shield=True):
                    await self._stop(run)
            took = time.monotonic() - run.started
            returncode = run.process.returncode
            assert returncode is not None
            if run.stop_reason is None:
                run.status = exit_status(returncode, took)
            elif run.stop_reason.startswith("timed out"):
                run.status = run.stop_reason
            else:
                run.status = f"failed: {run.stop_reason} after {took:.1f} s"
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.logs.trim, key)
                if after is not None:
                    try:
                        await after()
                    except Exception:  # the run is over whatever this found
                        log.exception("send: after the run of pid %d", run.pid)
        finally:
            self._last[key] = run.status or "failed: the daemon stopped watching it"
            if self._active.get(key) is run:
                del self._active[key]
            self._changed[key] = time.time_ns()
            run.done.set()
            log.info("send: pid %d for %s: %s", run.pid, "/".join(key), self._last[key])

    async def _bound_log(self, key: SessionKey) -> None:
        """While the run goes on: keep its log's disk use bounded (`SendLogs.bound`)."""
        while True:
            await trio.sleep(LOG_CHECK_SECONDS)
            await trio.to_thread.run_sync(self.logs.bound, key)

    async def _stop(self, run: Run) -> None:
        """SIGTERM to the run's process group, SIGKILL if it is still there later."""
        for signum, then_wait in ((signal.SIGTERM, KILL_AFTER_SECONDS), (signal.SIGKILL, math.inf)):
            if run.process.returncode is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signum)
            with trio.move_on_after(then_wait):
                await run.process.wait()

    # -- waiting -------------------------------------------------------------------------

    async def wait_idle(self, key: SessionKey) -> str | None:
        """Wait until no run is active on the session; its last status (None: never ran)."""
        if self.busy(key):
            if self._waiters >= MAX_WAITERS:
                raise OSError(errno.EAGAIN, "too many readers are waiting for agent runs")
            self._waiters += 1
            try:
                while self.busy(key):
                    run = self._active.get(key)
                    if run is None:  # reserved, about to start: look again shortly
                        await trio.sleep(0.01)
                    else:
                        await run.done.wait()
            finally:
                self._waiters -= 1
        return self._last.get(key)

    # -- the mount's lifetime ---------------------------------------------------------------

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the watchers (in the daemon's nursery) until cancelled; `shutdown` first."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def stop_waiting(self) -> None:
        """End the grace period now (a second SIGINT/SIGTERM): stop the agents."""
        self._impatient = True
        for scope in self._grace_scopes:
            scope.cancel()

    async def shutdown(self) -> None:
        """At unmount: no new runs; wait up to ``grace`` seconds for the running ones,
        then stop the rest (SIGTERM, then SIGKILL) and wait until they are gone."""
        self.closing = True
        runs = list(self._active.values())
        if not runs:
            return
        log.info("unmounting: waiting up to %g s for %d agent run(s)", self.grace, len(runs))
        with trio.move_on_after(0 if self._impatient else self.grace) as grace:
            self._grace_scopes.append(grace)
            for run in runs:
                await run.done.wait()
        for run in runs:
            if not run.done.is_set():
                run.stop_reason = "stopped at unmount"
                run.scope.cancel()
        with trio.CancelScope(shield=True):
            for run in runs:
                await run.done.wait()
