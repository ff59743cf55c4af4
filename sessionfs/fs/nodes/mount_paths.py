"""Paths in the mount as users see them: where a new session file shows up."""

from __future__ import annotations

from pathlib import Path

from sessionfs.fs.nodes.base import MountContext
from sessionfs.view.session_keys import mount_parts, stem_of_file
from sessionfs.writes.session_commands import CommandResult

__all__ = ["describe", "session_mount_path"]


def session_mount_path(ctx: MountContext, session_file: str) -> str:
    """Where a session file shows up in the mount (``last_result`` of fork/new): a
    file in an artifacts dir (a fork of a sub-agent session) is a sub-agent session."""
    found = stem_of_file(ctx.index.sessions_root, session_file)
    if found is not None:
        return ctx.mount_path(*mount_parts(*found))
    path = Path(session_file)  # outside the mounted agent dir: its last two names
    return ctx.mount_path("sessions", path.parent.name, path.name.removesuffix(".jsonl"))


def describe(result: CommandResult, ctx: MountContext) -> str:
    """``last_result`` for a ctl command: a new session's path in the mount, else the
    command's own summary."""
    if result.new_session_file is not None:
        return session_mount_path(ctx, result.new_session_file)
    return result.text
