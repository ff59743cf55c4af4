"""Carrying rewrites: replace a session file without losing what others append meanwhile.

An agent appends to its session file by path (open, write one line, close), or keeps a
descriptor open. A rewrite (temp file + rename) has two windows in which such a line
would go to the old, replaced inode and be lost:

* while the temp file is written: lines appended to the source since it was read. They
  are absorbed into the temp file right before the rename;
* after the rename: a writer that opened the old path just before it may still write,
  and so may one whose open() got the old inode before the rename but returns only
  later (it had to wait for a lease, then for a CPU). A descriptor on the old inode is
  kept, and while any other process holds that inode open for writing or is still
  opening it (a read lease is granted only when none does; where leases are not
  granted, a ``/proc`` scan, which cannot see an open() in progress), its new complete
  lines are appended to the new file, for at most `CARRY_SECONDS`. One window remains:
  an open() that got the old inode before the rename and is held up, before it counts
  as a writer, for longer than the carry (see "When may the carry stop?").

A process that keeps the file open for writing for good (not just for one append)
would keep writing to the old inode after the rename, so such a rewrite is refused
with `SessionBusyError` (``EBUSY``) and the file is left untouched. The check is retried
briefly first: an append by path holds the file open for microseconds only.
"""

from __future__ import annotations

import _signal
import contextlib
import errno
import fcntl
import logging
import os
import signal
import time
from collections.abc import Sequence
from typing import Final

from core.jsonl import complete_prefix_length, consumed_length
from core.safe_open import open_regular_fd
from core.storage_api import (
    PathArg,
    RewriteResult,
    SessionStorage,
    Transform,
    atomic_write,
    temp_path_for,
)

__all__ = [
    "APPEND_HARM",
    "BUSY_RETRY_SECONDS",
    "CARRY_SECONDS",
    "SessionBusyError",
    "SourceReplacedError",
    "catch_lease_breaks",
    "complete_lines",
    "refuse_if_held_open",
    "rewrite_file",
    "seems_unshared",
    "writers_of_inode",
]

log = logging.getLogger(__name__)


#: How long a writer seen in the /proc scan may take to close the file before the
#: rewrite is refused as busy (an append by path closes within microseconds).
BUSY_RETRY_SECONDS: Final = 0.3
#: How long, at most, the old inode is watched after the rename for a writer that
#: opened it just before the rename and is still writing.
CARRY_SECONDS: Final = 2.0
_POLL_SECONDS: Final = 0.005
_SPIN_SECONDS: Final = 0.002
_SPIN_POLL_SECONDS: Final = 0.0001
_READ_CHUNK: Final = 1 << 20


_REWRITE_HARM: Final = "rewriting it now would lose that process's later lines"
#: Why an append is refused while an agent holds the file (see `refuse_if_held_open`).
APPEND_HARM: Final = (
    "appending now would put lines that process did not write into the file it is "
    "writing (oh-my-pi then refuses its own next rewrite)"
)


class SessionBusyError(OSError):
    """Another process holds the session file open for writing; a rewrite would lose
    what it writes later, so it was refused and the file is untouched (``EBUSY``)."""

    def __init__(self, path: PathArg, pids: Sequence[int], harm: str = _REWRITE_HARM) -> None:
        self.pids = tuple(pids)
        who = (
            f"pid {', '.join(map(str, self.pids))}"
            if self.pids
            else "a process this one cannot see (still opening it, or in another pid namespace)"
        )
        self.reason = (
            f"{os.path.basename(os.fspath(path))} is held open for writing by {who}; "
            f"{harm}, so the file was left untouched (try again once it closes the file)"
        )
        super().__init__(errno.EBUSY, self.reason, os.fspath(path))

    def __str__(self) -> str:
        return self.reason


class SourceReplacedError(Exception):
    """The file is not the one the caller read (another inode): reload, then retry."""


# ---------------------------------------------------------------------------
# Who writes this file? (Linux /proc, best effort: [] where it is unavailable)
# ---------------------------------------------------------------------------


def _write_flags(pid: str, fd: str) -> int:
    with open(f"/proc/{pid}/fdinfo/{fd}") as info:
        return next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))


def _holds_for_writing(pid: str, device: int, inode: int) -> bool:
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"{fd_dir}/{fd}")
            if (st.st_ino, st.st_dev) != (inode, device):
                continue
            if _write_flags(pid, fd) & (os.O_WRONLY | os.O_RDWR):
                return True
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return False


def writers_of_inode(device: int, inode: int) -> list[int]:
    """Pids (not ours) holding the inode open for writing."""
    own = os.getpid()
    try:
        procs = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != own]
    except OSError:
        return []
    return [int(pid) for pid in procs if _holds_for_writing(pid, device, inode)]


def _nobody_writes(fd: int) -> bool:
    """True when no process (this one included) has the file of ``fd`` (opened
    read-only) open for writing: the kernel grants a read lease only then. A cheap
    probe (microseconds) before the /proc scan (milliseconds per hundred processes);
    False also where leases are not available, and the scan decides. A granted lease
    is left to the caller, who closes ``fd`` at once: closing the only descriptor of
    an open file removes its lease too, so an explicit release would be one more
    system call on every append through the mount."""
    return _take_lease(fd, fcntl.F_RDLCK) is None


def _refuse_if_held_open(
    path: PathArg, st: os.stat_result, fd: int | None = None, harm: str = _REWRITE_HARM
) -> None:
    """Raise `SessionBusyError` when a writer keeps the file open past the grace time.
    ``fd``: the file opened read-only, for the quick lease probe. A writer the probe
    finds and /proc does not show is waited for too: once its open() returns it shows
    in /proc, or it has written and closed the file."""
    deadline = time.monotonic() + BUSY_RETRY_SECONDS
    while True:
        refusal = None if fd is None else _take_lease(fd, fcntl.F_RDLCK)
        if fd is not None and refusal is None:
            _release_opens(fd)
            return
        pids = writers_of_inode(st.st_dev, st.st_ino)
        # A writer the lease sees and /proc does not: still inside its open() (it counts
        # as a writer before it has a descriptor: an agent that will keep the file open
        # may be starting), or in another pid namespace. Wait for it too.
        if not pids and not (refusal is not None and _refused_for_another_writer(refusal, st)):
            return
        if time.monotonic() >= deadline:
            raise SessionBusyError(path, pids, harm)
        time.sleep(0.01)


def _refused_for_another_writer(refusal: OSError, st: os.stat_result) -> bool:
    """Whether a read lease on the file of ``st`` was refused because some other process
    writes it or is opening it for writing: not where leases are not granted at all,
    nor while this process holds the file for writing itself (its own descriptors
    refuse the lease too, and never count)."""
    own = str(os.getpid())
    return refusal.errno == errno.EAGAIN and not _holds_for_writing(own, st.st_dev, st.st_ino)


def seems_unshared(path: PathArg) -> bool:
    """The quick probe alone (no /proc scan, no wait): True when no process has
    ``path`` open for writing right now; False when one has, or when it cannot tell
    (a lease is granted on a regular file only). Opened as `open_regular_fd` opens,
    but left non-blocking: nothing is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return _nobody_writes(fd)
    finally:
        os.close(fd)  # and with it the lease, if one was granted


def refuse_if_held_open(path: PathArg, harm: str = APPEND_HARM) -> None:
    """`SessionBusyError` (``EBUSY``, the pids named) when another process keeps
    ``path`` open for writing: a running agent (omp keeps an ``O_APPEND`` descriptor
    from its first append of a run until it exits) must not find bytes it did not write
    in its file. A writer that
    appends by path holds it for microseconds and is waited for (`BUSY_RETRY_SECONDS`).
    This process's own descriptors never count (close them first for the quick probe)."""
    fd = open_regular_fd(path)
    try:
        _refuse_if_held_open(path, os.fstat(fd), fd, harm)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# Reading the source
# ---------------------------------------------------------------------------


def _read_from(fd: int, offset: int) -> bytes:
    parts: list[bytes] = []
    while True:
        chunk = os.pread(fd, _READ_CHUNK, offset)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        offset += len(chunk)


def complete_lines(data: bytes) -> tuple[bytes, int]:
    """The complete lines of ``data`` and how many bytes of it they use. A last line
    without newline counts when it is a whole object (it is given its newline)."""
    end = complete_prefix_length(data)
    if data[end:].strip() and consumed_length(data) == len(data):
        return data + b"\n", len(data)  # core's rule: a whole object, not a torn line
    return data[:end], end


def _lines_since(fd: int, offset: int, *, final: bool) -> tuple[bytes, int]:
    """`complete_lines` at ``offset`` and after, and the offset past them. With
    ``final`` a torn last line is given up (logged); else it waits for its end."""
    data = _read_from(fd, offset)
    lines, used = complete_lines(data)
    tail = data[used:]
    if tail and final and not tail.isspace():
        log.warning("dropping a torn last line (%d bytes) of a rewritten file", len(tail))
    return lines, offset + used


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# ---------------------------------------------------------------------------
# The rewrite
# ---------------------------------------------------------------------------


def rewrite_file(
    storage: SessionStorage,
    path: PathArg,
    transform: Transform,
    *,
    expected_inode: int | None = None,
    target: PathArg | None = None,
) -> RewriteResult:
    """Replace ``path`` (or move it to ``target``) by ``transform(its complete lines)``,
    carrying over every line other processes append meanwhile.

    ``expected_inode``: the inode the caller's view of the file comes from; another one
    raises `SourceReplacedError`. A missing ``path`` is a new file (``transform(b"")``).
    Raises `SessionBusyError` when another process keeps the file open for writing.
    On any failure before the rename the temp file is removed and nothing changed.
    """
    path = os.fspath(path)
    destination = os.fspath(target) if target is not None else path
    try:
        source = open_regular_fd(path)
    except FileNotFoundError:
        if expected_inode is not None:
            raise SourceReplacedError(f"{path} no longer exists") from None
        return _write_new(storage, destination, transform(b""))
    try:
        return _carrying_rewrite(storage, path, destination, source, transform, expected_inode)
    finally:
        os.close(source)


def _write_new(storage: SessionStorage, destination: str, content: bytes) -> RewriteResult:
    atomic_write(storage, destination, [content])
    return RewriteResult(len(content), 0, storage.stat(destination).inode)


def _carrying_rewrite(
    storage: SessionStorage,
    path: str,
    destination: str,
    source: int,
    transform: Transform,
    expected_inode: int | None,
) -> RewriteResult:
    st = os.fstat(source)
    if expected_inode is not None and st.st_ino != expected_inode:
        raise SourceReplacedError(f"{path} was replaced by another file")
    _refuse_if_held_open(path, st, source)
    current, offset = _lines_since(source, 0, final=False)
    content = transform(current)
    tmp = temp_path_for(destination)
    writer = storage.open_writer(tmp, "w")
    appender: int | None = None
    try:
        storage.copy_permissions(path, tmp)  # before any byte of the content exists
        writer.write(content)
        writer.flush()
        writer.fsync()  # the slow part: lines appended meanwhile are absorbed below
        _refuse_if_held_open(path, st, source)  # a writer that opened since the first check
        absorbed, offset = _lines_since(source, offset, final=False)
        if absorbed:
            writer.write(absorbed)  # made durable with the carried lines, below
        writer.close()
        # One O_APPEND descriptor on the new inode, for lines carried after the rename,
        # holding a write lease when the file system grants one (see `_hold_opens`).
        appender = os.open(tmp, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        leased = _hold_opens(appender)
        # The last look right before the rename keeps the window in which a line can
        # land in the old inode as short as possible.
        late, offset = _lines_since(source, offset, final=False)
        _write_all(appender, late)
        absorbed += late
        storage.rename(tmp, destination)
    except BaseException:
        with contextlib.suppress(BaseException):
            writer.close()
        if appender is not None:
            os.close(appender)
        with contextlib.suppress(OSError):
            storage.unlink(tmp)
        raise
    try:
        try:
            if destination != path:
                # A move: the old name still leads to the old inode. Remove it before
                # the carry's last look, so a line appended by path after that look
                # cannot go to an inode nobody reads any more (it makes a new file at
                # the old name).
                storage.unlink(path)
                storage.fsync_dir(os.path.dirname(path) or ".")
            carried = len(absorbed) + _carry_after_rename(source, offset, st, appender)
        finally:
            if leased:
                _release_opens(appender)
        storage.fsync_dir(os.path.dirname(destination) or ".")
        os.fsync(appender)
        inode = os.fstat(appender).st_ino
    finally:
        os.close(appender)
    return RewriteResult(len(content), carried, inode)


# ---------------------------------------------------------------------------
# Keeping the order of a straddling writer's lines (Linux file leases)
# ---------------------------------------------------------------------------
#
# A writer whose open() of the path comes just before the rename and whose write()
# comes just after puts its line N in the old inode; its line N+1 (opened by path)
# goes to the new file. The carry copies line N over, but if the writer is quicker
# than the carry (a loaded machine, or a daemon thread waiting for the GIL), N lands
# after N+1. A write lease on the new file closes that gap: while it is held, the
# kernel makes every other open() of the new file wait, so the writer's next line
# cannot be written before the carry has copied the old inode's last lines. The lease
# is held only for the carry (milliseconds), and the kernel breaks it by itself after
# /proc/sys/fs/lease-break-time should this process stall. A writer made to wait may
# run again only after the next rewrite has begun replacing the file: that rewrite's
# carry waits for it (see "When may the carry stop?" below).

_F_SETLEASE: Final = getattr(fcntl, "F_SETLEASE", 1024)
_F_SETSIG: Final = getattr(fcntl, "F_SETSIG", 10)


def _hold_opens(fd: int) -> bool:
    """Take a write lease on ``fd`` (ours is then the only open of the file); False
    where the file system or the platform does not grant one."""
    refused = _take_lease(fd, fcntl.F_WRLCK)
    if refused is not None:
        log.debug(
            "no write lease for a rewrite (%s): carried lines keep order best-effort", refused
        )
        return False
    return True


#: (`_take_lease` asks the C module: `signal.getsignal` makes an enum of its answer,
#: which for a Python handler raises and catches an exception: 1.6 µs a lease.)
_SIGIO: Final = int(signal.SIGIO)


def _take_lease(fd: int, kind: int) -> OSError | None:
    """Take a lease of ``kind`` on ``fd``; the refusal, or None when it was granted."""
    try:
        handler = _signal.getsignal(_SIGIO)
        if handler is None or handler == _signal.SIG_DFL:
            # A lease break is announced by a signal, SIGIO unless told otherwise, and
            # SIGIO would end the process: SIGURG is ignored unless handled. (Not
            # needed where SIGIO is caught: `catch_lease_breaks`.)
            fcntl.fcntl(fd, _F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, _F_SETLEASE, kind)
    except OSError as exc:
        return exc
    return None


def _lease_broken_signal(signum: int, frame: object) -> None:
    """SIGIO, a lease break's signal: nothing to do (breaks are looked for with
    ``F_GETLEASE``; a probe's lease goes with its descriptor at once)."""


def catch_lease_breaks() -> None:
    """Catch SIGIO (doing nothing) in a process that takes leases often: the mount's
    daemon probes for other writers with one before every append through it
    (`seems_unshared`). SIGIO's default action would end the process, so otherwise
    each lease first redirects its break signal to SIGURG: one ``fcntl`` less a
    probe. A caught signal is set back to its default at ``exec``, so the agents and
    workers the daemon starts are not changed. Outside the main thread (where no
    handler can be set) it does nothing: the leases keep redirecting the signal."""
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGIO, _lease_broken_signal)


def _release_opens(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)


# ---------------------------------------------------------------------------
# When may the carry stop?
# ---------------------------------------------------------------------------
#
# Two kinds of process may still write the old inode: one holding it open for
# writing, and one whose open() of the path got the old inode before the rename but
# has not returned yet. The second has no descriptor in /proc until its open()
# returns, and that can take long: an open() that had to wait for a lease break (the
# previous rewrite's write lease on this very file) is let go when that lease is
# released, but on a loaded machine it may not run again for tens of milliseconds,
# time enough for the next rewrite to rename and finish its carry; its line then went
# to an inode nobody reads (a /proc scan alone saw nobody). The kernel counts such an
# open() as a writer of the inode before it can wait, and grants no read lease while
# any writer exists. So the carry ends only with a read lease on the old inode:
# granted, nobody has it open for writing or is opening it; held, an open() for
# writing that gets there waits for us, and we see it waiting (`_lease_broken`) and
# carry on. The last read is done while the lease is held.
#
# What remains: an open() that got the old inode before the rename but reaches the
# point where it counts as a writer (a few microseconds of kernel work that normally
# waits for nothing) only after the carry's last look, at least `_SPIN_SECONDS` after
# the rename: only a CPU taken away right there (a preemptible kernel, a hypervisor)
# stretches it that long, and its line would go to the old inode unseen. Where a lease
# cannot tell (not granted on this file system, or this process holds the old inode
# for writing: its own descriptors refuse the lease too), the /proc scan decides, and
# an open() in progress is not seen at all.

_F_GETLEASE: Final = getattr(fcntl, "F_GETLEASE", 1025)


def _leases_tell_writers(fd: int, st: os.stat_result) -> bool:
    """Whether a read lease on ``fd`` (the old inode, opened read-only) tells if
    anybody writes the inode (see above)."""
    refused = _take_lease(fd, fcntl.F_RDLCK)
    if refused is None:
        _release_opens(fd)
        return True
    return _refused_for_another_writer(refused, st)


def _lease_broken(fd: int) -> bool:
    """True when an open() for writing waits for our read lease on ``fd`` (the kernel
    then reports the lease as already gone)."""
    try:
        return bool(fcntl.fcntl(fd, _F_GETLEASE) != fcntl.F_RDLCK)
    except OSError:
        return True


def _carry_after_rename(source: int, offset: int, st: os.stat_result, appender: int) -> int:
    """Copy lines that still land in the old inode to the new file while another
    process holds it open for writing or is opening it (at most `CARRY_SECONDS`)."""
    # A writer that opened the old path just before the rename writes within
    # microseconds, and its line must reach the new file before the writer's next
    # line (opened by path, so written to the new file) does. So the old inode is read
    # in a tight loop (a pread costs microseconds); a lease (microseconds) or the /proc
    # scan (milliseconds) only decides when to stop.
    start = time.monotonic()
    deadline = start + CARRY_SECONDS
    next_look = start + _SPIN_SECONDS
    by_lease: bool | None = None  # known at the first look
    carried = 0
    while True:
        lines, offset = _lines_since(source, offset, final=False)
        _write_all(appender, lines)
        carried += len(lines)
        now = time.monotonic()
        if now >= next_look:
            if by_lease is None:
                by_lease = _leases_tell_writers(source, st)
            if by_lease:
                quiet = _take_lease(source, fcntl.F_RDLCK) is None  # held when granted
            else:
                # Scan first, read after: a writer absent from the scan has finished
                # (its line is visible to the read below), will open the new file,
                # or is inside an open() of the old inode (not seen: see above).
                quiet = not writers_of_inode(st.st_dev, st.st_ino)
            if quiet or now >= deadline:
                try:
                    lines, offset = _lines_since(source, offset, final=True)
                    _write_all(appender, lines)
                    carried += len(lines)
                    opening = by_lease and quiet and _lease_broken(source)
                finally:
                    if by_lease and quiet:
                        _release_opens(source)
                if not opening:
                    if not quiet:
                        log.warning("a writer still holds a replaced session file; giving up")
                    return carried
            next_look = now if by_lease else time.monotonic() + _POLL_SECONDS
        time.sleep(_SPIN_POLL_SECONDS)
