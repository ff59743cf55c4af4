"""The command language of the mount's ``ctl`` files.

Session ``ctl`` (one command per line)::

    branch <id>                 move the leaf (any form a ``leaf`` symlink accepts)
    reset                       leaf = none; the next append is a new root
    summary <id|root> <text>    branch_with_summary: leaf = <id>, then a branch_summary
    fork                        copy the session into a new file in the same project
    extract <id>                new file holding the root -> <id> path
    flush                       fsync everything

Root ``ctl``: ``new <cwd> [title]``. The cwd must be absolute and short enough that
its project directory name (``--a-b-c--``, one name for the whole path) fits the
file system: a longer one is ``ENAMETOOLONG`` before anything is created.

A write is parsed whole before anything runs, so one unknown or malformed line
(or a NUL byte anywhere: no id, path or text means one) refuses the whole write
(``EINVAL``) and nothing happens. Then the commands run in
order; each is its own operation (``summary`` appends, ``fork`` creates a file), and
the first failing one stops the rest. Arguments are plain text split on whitespace:
there is no shell here, so ``;``, ``$(...)``, quotes and backticks mean nothing — a
summary text is stored exactly as written, a cwd is a path like any other.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass

from core import paths
from core.manager import SessionManager
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes import session_writer
from sessionfs.writes.append_parse import AppendOp, entry_op
from sessionfs.writes.link_targets import SESSION_DIR

__all__ = [
    "CommandResult",
    "RootCommand",
    "SessionCommand",
    "parse_root_commands",
    "parse_session_commands",
    "run_root_command",
    "run_session_command",
]

_SESSION_USAGE = "branch <id> | reset | summary <id|root> <text> | fork | extract <id> | flush"
_ROOT_USAGE = "new <cwd> [title]"

# The longest file name the usual Linux file systems take (ext4, xfs, btrfs, tmpfs).
# A file system with a smaller limit (eCryptfs: 143) is asked when the command runs.
_LINUX_NAME_MAX = 255


@dataclass(frozen=True, slots=True)
class SessionCommand:
    """One parsed session ``ctl`` line: ``name`` plus its arguments as written."""

    name: str
    target: str | None = None  # branch / summary / extract: the entry (or "root")
    text: str | None = None  # summary: the summary text


@dataclass(frozen=True, slots=True)
class RootCommand:
    """One parsed root ``ctl`` line (only ``new`` exists)."""

    cwd: str
    title: str | None


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command did, for ``ctl``'s ``last_result``.

    ``text`` describes it (``leaf: 1a2b3c4d``); ``new_session_file`` is set by
    ``fork``/``extract``/``new`` so the node layer can show the new session's path
    in the mount instead.
    """

    text: str
    new_session_file: str | None = None


def _invalid(reason: str) -> WriteRejected:
    return WriteRejected(errno.EINVAL, reason)


def _lines(data: bytes, usage: str) -> list[tuple[int, str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(f"ctl: not UTF-8 text (byte {exc.start})") from None
    out = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if "\x00" in line:
            # No id, path or text means a NUL; it would only be cut off (or rejected
            # by the OS as "embedded null byte") somewhere further down.
            raise _invalid(f"ctl line {number}: a NUL byte is not allowed")
        if line:
            out.append((number, line))
    if not out:
        raise _invalid(f"ctl: no command (write one of: {usage})")
    return out


def _parse_session_line(number: int, line: str) -> SessionCommand:
    name, _, rest = line.partition(" ")
    rest = rest.strip()
    where = f"ctl line {number}"
    if name in ("reset", "fork", "flush"):
        if rest:
            raise _invalid(f"{where}: {name} takes no arguments")
        return SessionCommand(name)
    if name in ("branch", "extract"):
        if not rest or len(rest.split()) != 1:
            raise _invalid(f"{where}: usage: {name} <id>")
        return SessionCommand(name, target=rest)
    if name == "summary":
        target, _, text = rest.partition(" ")
        text = text.strip()
        if not target or not text:
            raise _invalid(f"{where}: usage: summary <id|root> <text>")
        return SessionCommand(name, target=target, text=text)
    raise _invalid(f"{where}: unknown command {name!r} (commands: {_SESSION_USAGE})")


def parse_session_commands(data: bytes) -> list[SessionCommand]:
    """Every command of a session ``ctl`` write, or ``EINVAL`` for the first bad line."""
    return [_parse_session_line(number, line) for number, line in _lines(data, _SESSION_USAGE)]


def _parse_root_line(number: int, line: str) -> RootCommand:
    where = f"ctl line {number}"
    name, *rest = line.split(maxsplit=1)
    if name != "new":
        raise _invalid(f"{where}: unknown command {name!r} (command: {_ROOT_USAGE})")
    cwd, *title = rest[0].split(maxsplit=1) if rest else [""]
    if not cwd.startswith("/"):
        raise _invalid(f"{where}: usage: {_ROOT_USAGE} (cwd an absolute path, not {cwd!r})")
    _check_project_name_fits(cwd, _LINUX_NAME_MAX, where)
    return RootCommand(cwd, title[0] if title else None)


def parse_root_commands(data: bytes) -> list[RootCommand]:
    """Every command of a root ``ctl`` write, or ``EINVAL``/``ENAMETOOLONG`` for the
    first bad line."""
    return [_parse_root_line(number, line) for number, line in _lines(data, _ROOT_USAGE)]


def _check_project_name_fits(cwd: str, name_max: int, where: str) -> None:
    """``ENAMETOOLONG`` unless the project directory for ``cwd`` (the whole path
    encoded as one name) is at most ``name_max`` bytes; that also covers every
    component of the cwd, since each is part of that name."""
    project = paths.encode_cwd(os.path.normpath(cwd))
    size = len(project.encode("utf-8"))
    if size > name_max:
        raise WriteRejected(
            errno.ENAMETOOLONG,
            f"{where}: cwd too long: its project directory name would be {size} bytes,"
            f" the file system takes at most {name_max}",
        )


def _entry_id(manager: SessionManager, target: str, session_dirs: Iterable[str]) -> str:
    # The same spellings a leaf symlink accepts: bare id, entries/<id>.json, path/...,
    # and the short names of ids too long for a file name.
    with manager.lock:
        manager.catch_up()
        return session_writer.entry_of_link(manager, target, SESSION_DIR, session_dirs)


def _summary_op(from_id: str, text: str) -> AppendOp:
    return entry_op({"type": "branch_summary", "fromId": from_id, "summary": text})


def run_session_command(
    manager: SessionManager, command: SessionCommand, *, session_dirs: Iterable[str] = ()
) -> CommandResult:
    """Run one parsed command against the mounted session's manager."""
    dirs = tuple(session_dirs)
    if command.name == "reset":
        session_writer.reset_leaf(manager)
        return CommandResult("leaf: none")
    if command.name == "flush":
        session_writer.flush_session(manager)
        return CommandResult("flushed")
    if command.name == "fork":
        path = session_writer.fork_session(manager)
        return CommandResult(f"forked: {path}", new_session_file=path)
    assert command.target is not None
    if command.name == "branch":
        entry_id = session_writer.set_leaf_from_link(manager, command.target, session_dirs=dirs)
        return CommandResult(f"leaf: {entry_id}")
    if command.name == "extract":
        entry_id = _entry_id(manager, command.target, dirs)
        path = session_writer.extract_session(manager, entry_id)
        return CommandResult(f"extracted: {path}", new_session_file=path)
    if command.name == "summary":
        assert command.text is not None
        from_id = "root" if command.target == "root" else _entry_id(manager, command.target, dirs)
        result = session_writer.append_ops(manager, [_summary_op(from_id, command.text)])
        return CommandResult(f"leaf: {result.leaf_id}")
    raise _invalid(f"unknown command {command.name!r}")


def _name_max(directory: str | os.PathLike[str]) -> int:
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return _LINUX_NAME_MAX  # no answer: the parse-time check stands


def run_root_command(agent_dir: str | os.PathLike[str], command: RootCommand) -> CommandResult:
    """``new <cwd> [title]``: the new session file, already on disk."""
    _check_project_name_fits(command.cwd, _name_max(agent_dir), "new")
    path = session_writer.create_session(agent_dir, command.cwd, command.title)
    return CommandResult(f"created: {path}", new_session_file=path)
