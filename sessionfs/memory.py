"""Keep the daemon's resident memory close to what its caches account for.

glibc's defaults suit short programs, not a long-running cache: every worker thread
that parses a session gets its own malloc arena, and large buffers (renderings,
file contents) move the mmap threshold up so they later come from the heap, where
freed memory is rarely given back. Both make RSS grow far past the ``--cache-mb``
budget. Here: two arenas, a fixed mmap threshold (large buffers are returned to the
OS on free), and ``malloc_trim`` after the cache drops something big.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import time

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
TRIM_INTERVAL = 1.0

_libc: ctypes.CDLL | None = None
_last_trim = 0.0


def _load_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name) if name else None
        except OSError:
            libc = None
        if libc is None or not hasattr(libc, "mallopt"):
            return None  # not glibc (musl, macOS): nothing to tune
        _libc = libc
    return _libc


def tune_malloc() -> None:
    """Call once at start-up, before worker threads exist."""
    libc = _load_libc()
    if libc is None:
        return
    for option, value in (
        (_M_ARENA_MAX, 2),
        (_M_MMAP_THRESHOLD, 128 * 1024),
        (_M_TRIM_THRESHOLD, 128 * 1024),
    ):
        if libc.mallopt(option, value) != 1:
            log.debug("mallopt(%d, %d) refused", option, value)


def tune_gc() -> None:
    """Collect cycles far less often. Parsed sessions are millions of small dicts and
    lists without cycles; with the default thresholds every load triggers full
    collections that walk all cached sessions, which made loads about 1.7x slower."""
    gc.freeze()  # everything imported so far is permanent
    gc.set_threshold(100_000, 50, 1000)


def release_free_memory() -> None:
    """Give freed heap pages back to the OS (rate-limited; cheap when nothing is free)."""
    global _last_trim
    libc = _load_libc()
    now = time.monotonic()
    if libc is None or not hasattr(libc, "malloc_trim") or now - _last_trim < TRIM_INTERVAL:
        return
    _last_trim = now
    libc.malloc_trim(0)
