"""Paths in the mount as users see them: where a new session file shows up, and
which absolute paths name this mount (for absolute symlink targets)."""

from __future__ import annotations

import re
from pathlib import Path

from sessionfs.nodes.base import MountContext
from sessionfs.session_commands import CommandResult

__all__ = ["describe", "session_mount_path", "sessionfs_mountpoints"]

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def sessionfs_mountpoints() -> list[str]:
    """Every sessionfs mount on this machine (``/proc/self/mountinfo``).

    The daemon is not told its own mountpoint, so an absolute symlink target is
    accepted when it lies below ``<a sessionfs mount>/sessions/<project>/<stem>/``:
    the same project and file name is the same session file.
    """
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split(" ")
        if len(parts) >= 5 and rest.split(" ", 1)[0] == "fuse.sessionfs":
            # mountinfo escapes space, tab, newline and backslash as octal
            found.append(_OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), parts[4]))
    return found


def session_mount_path(ctx: MountContext, session_file: str) -> str:
    """Where a session file shows up in the mount (``last_result`` of fork/new)."""
    path = Path(session_file)
    return ctx.mount_path("sessions", path.parent.name, path.name.removesuffix(".jsonl"))


def describe(result: CommandResult, ctx: MountContext) -> str:
    """``last_result`` for a ctl command: a new session's path in the mount, else the
    command's own summary."""
    if result.new_session_file is not None:
        return session_mount_path(ctx, result.new_session_file)
    return result.text
