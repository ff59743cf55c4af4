"""omp 18's publish lock: the lock file ``.<file name>.lock`` beside a session file.

omp takes it around each append and each rewrite of a session file, so an append made
inside it is never interleaved with omp's own publishing: omp waits for it (at most
500 ms), as it waits for its own processes. The protocol, as omp implements it:

* create the file with ``O_EXCL`` (mode 0600) and write ``<pid>:<ms since epoch>\\n``;
  read it back (a concurrent steal may have removed it between create and write);
* a lock whose pid is dead is stale and may be removed (re-read first: remove only
  what was verified); one without a readable pid counts as stale once it is older
  than the wait;
* poll every 2 ms for at most 500 ms, then give up (`PublishLockBusy`, ``EBUSY``);
* remove the file when done.

omp 18.2 also takes an OS lock before the lock file. On Linux that is an abstract Unix
socket (``@omp-file-lock-<hash>``, traced from omp 18.2.3): nothing on disk. Where omp's
OS lock is a file lock it is taken on a sidecar, ``.<file name>.lock.os``, which stays:
where that exists, omp has published the file. The lock file stays the protocol every
omp version honours on every platform, so it is what we take.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import time
from collections.abc import Iterator
from typing import Final

from core.rewrite import SessionBusyError

__all__ = [
    "LOCK_WAIT_SECONDS",
    "PublishLockBusy",
    "is_locked",
    "lock_path_for",
    "omp_has_published",
    "publish_lock",
]

LOCK_WAIT_SECONDS: Final = 0.5
_POLL_SECONDS: Final = 0.002
_RECORD: Final = re.compile(r"^(\d+):(\d+)\s*$")


class PublishLockBusy(SessionBusyError):
    """Another process held the session's publish lock for the whole wait (``EBUSY``;
    nothing was written)."""

    def __init__(self, path: str, holder: int | None) -> None:
        super().__init__(path, () if holder is None else (holder,))
        who = f"pid {holder}" if holder is not None else "another process"
        self.reason = (
            f"{os.path.basename(path)}'s publish lock ({os.path.basename(lock_path_for(path))}) "
            f"is held by {who}; nothing was written (try again once it is released)"
        )
        self.strerror = self.reason


@functools.lru_cache(maxsize=1024)
def lock_path_for(path: str) -> str:
    """``path``'s lock file (kept: the guest checks of every append through the mount
    ask for the same few files' locks)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.lock")


def _there(path: str) -> bool:
    """Whether ``path`` exists, a dangling link included. Any error other than "absent"
    counts as there: a lock check must never fail open (``os.access`` answers False for
    any error, such as a sandbox refusing ``faccessat2``)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def is_locked(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``'s lock file exists now (someone publishes, or crashed doing so)."""
    return _there(lock_path_for(os.fspath(path)))


def omp_has_published(path: str | os.PathLike[str]) -> bool:
    """Whether omp's lock file or its OS lock's sidecar is beside ``path`` now: omp
    publishes the file, or has (the sidecar stays), or crashed doing so."""
    lock = lock_path_for(os.fspath(path))
    return _there(lock) or _there(f"{lock}.os")


def _read(lock: str) -> str | None:
    try:
        with open(lock, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _holder(content: str | None) -> int | None:
    match = _RECORD.match(content or "")
    pid = int(match.group(1)) if match else 0
    return pid if pid > 0 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    return True


def _try_create(lock: str) -> bool:
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    record = f"{os.getpid()}:{int(time.time() * 1000)}\n"
    try:
        os.write(fd, record.encode())
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(lock)
        raise
    os.close(fd)
    return _read(lock) == record  # a steal between create and write leaves us nothing


def _steal_if_stale(lock: str) -> bool:
    """Remove a lock whose holder is dead; True when the caller should try again."""
    content = _read(lock)
    if content is None:
        return True
    pid = _holder(content)
    if pid is not None and _alive(pid):
        return False
    if pid is None:
        try:
            age = time.time() - os.stat(lock).st_mtime
        except FileNotFoundError:
            return True
        if age <= LOCK_WAIT_SECONDS:  # a live holder may be between create and write
            return False
    if _read(lock) != content:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock)
    return True


@contextlib.contextmanager
def publish_lock(path: str | os.PathLike[str], wait: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold ``path``'s publish lock for the block (raises `PublishLockBusy` after
    ``wait`` seconds of someone else holding it)."""
    target = os.fspath(path)
    lock = lock_path_for(target)
    deadline = time.monotonic() + wait
    while not (_try_create(lock) or (_steal_if_stale(lock) and _try_create(lock))):
        if time.monotonic() >= deadline:
            raise PublishLockBusy(target, _holder(_read(lock)))
        time.sleep(_POLL_SECONDS)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
