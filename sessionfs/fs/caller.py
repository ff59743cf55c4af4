"""Who sent a FUSE request: the `Caller` that ``search/`` filters its hits for.

The request context has the caller's file-system uid and gid and its pid (the thread
id); the supplementary groups, which decide group access as much as the primary one,
are read from ``/proc/<pid>/status`` (``Groups:``). A process gone by then (or a pid
from another namespace) leaves only the primary group: never more access than the
caller has.
"""

from __future__ import annotations

import contextlib

import pyfuse3

from sessionfs.view.access import Caller

__all__ = ["caller_of", "supplementary_groups"]


def supplementary_groups(pid: int) -> frozenset[int]:
    """The ``Groups:`` of ``/proc/<pid>/status``; empty when it cannot be read."""
    if pid <= 0:
        return frozenset()
    with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/status", "rb") as status:
        for line in status:
            if line.startswith(b"Groups:"):
                return frozenset(int(gid) for gid in line.split()[1:])
    return frozenset()


def caller_of(ctx: pyfuse3.RequestContext) -> Caller:
    return Caller(ctx.uid, frozenset({ctx.gid}) | supplementary_groups(ctx.pid))
