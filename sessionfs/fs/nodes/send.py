"""``send`` and ``send.log``: run the user's agent on a session from the mount's leaf.

Writing a prompt to ``send`` and closing it starts the agent (`AgentRuns`) and returns
as soon as the process exists; before that, a leaf chosen through the mount that is not
the file's last entry is recorded in the file (`session_writer.record_branch_point`),
because the agents continue a file from its last entry. An agent the mount did not
start that holds the file open for writing (oh-my-pi between its turns) makes ``send``
``EBUSY``: the agent started would append to that one's file. Reading ``send`` waits
until no run is active on the session, then gives the last run's status, so
``echo "try X" > send; cat send`` runs and waits. An ``O_NONBLOCK`` read does not wait:
it shows the run in progress. ``send.log`` is the last run's stdout and stderr.

A mount that runs no agents (``MountContext.runs`` is None: session kinds that are
read-only by nature) refuses ``send`` with ``EROFS``; ``--read-only`` and store mounts
are refused before any node is asked (``ops``).
"""

from __future__ import annotations

import errno
import os
import shutil
from typing import Any, ClassVar, TypeVar

import trio

from core.rewrite import SessionBusyError, refuse_if_held_open
from sessionfs.fs.agent_branching import BranchingCommand
from sessionfs.fs.agent_command import AgentCommand
from sessionfs.fs.agent_runs import AgentRuns
from sessionfs.fs.nodes.base import (
    VOLATILE,
    BytesHandle,
    FileNode,
    OpenFile,
    Permissions,
    Stat,
    allow_truncate_to_zero,
)
from sessionfs.fs.nodes.in_session import InSession, opened_for_writing
from sessionfs.fs.nodes.write_handles import BufferedWriteHandle
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes import session_writer

__all__ = ["PROMPT_LIMIT", "SendFile", "SendLogFile"]

C = TypeVar("C", bound=AgentCommand | BranchingCommand)

#: The largest prompt ``send`` takes (``EFBIG`` beyond).
PROMPT_LIMIT = 1024 * 1024
#: The most one program argument can hold on Linux (``MAX_ARG_STRLEN``, 32 pages,
#: with its NUL): a longer prompt cannot reach the agent as its last argument.
ARGUMENT_LIMIT = 32 * 4096 - 1
#: What reading ``send`` shows before the session's first run.
NEVER_RAN = "no run yet"
#: Why ``send`` is refused while another process holds the session file open for writing.
SEND_HARM = (
    "an agent started now would append to it too, two agents in one file (oh-my-pi then "
    "refuses its own next rewrite, and continues without the other's turns)"
)


def _prompt_too_big(size: int) -> None:
    if size > PROMPT_LIMIT:
        raise WriteRejected(errno.EFBIG, f"send: a prompt is at most {PROMPT_LIMIT} bytes")


def prompt_of(data: bytes) -> str:
    """The prompt in what was written: UTF-8 text, not empty, without the newline
    ``echo`` ends it with; `WriteRejected` (``EINVAL``/``E2BIG``) otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise WriteRejected(errno.EINVAL, "send: the prompt is not UTF-8 text") from None
    text = text.rstrip("\n")
    if not text.strip():
        raise WriteRejected(errno.EINVAL, "send: the prompt is empty")
    if "\0" in text:
        raise WriteRejected(errno.EINVAL, "send: a prompt cannot hold NUL bytes")
    if len(text.encode("utf-8")) > ARGUMENT_LIMIT:
        raise WriteRejected(
            errno.E2BIG,
            f"send: the prompt is passed as one argument, which holds at most "
            f"{ARGUMENT_LIMIT} bytes on Linux",
        )
    return text


def _run_dir(cwd: object) -> str:
    """Where the agent runs: the header's cwd when it is a directory, else home."""
    if isinstance(cwd, str) and cwd and os.path.isdir(cwd):
        return cwd
    return os.path.expanduser("~")


class SendFile(InSession, FileNode):
    """``send``: a prompt written and closed runs the agent; a read waits for it."""

    __slots__ = ()

    tier = VOLATILE  # direct_io: every read comes here, never a stale page
    mode = 0o644
    owner_only_writes = True  # it runs a program as the user who mounted
    #: why a run is refused while another process holds the file open for writing
    send_harm: ClassVar[str] = SEND_HARM

    def _runs(self) -> AgentRuns:
        runs = self.ctx.runs
        if runs is None:
            raise WriteRejected(errno.EROFS, "send: this session is read-only")
        return runs

    async def permissions(self) -> Permissions:
        shown = await super().permissions()
        if self.ctx.runs is not None:
            return shown
        return Permissions(shown.mask & ~0o222, shown.uid, shown.gid)

    def _now_text(self) -> str:
        runs = self.ctx.runs
        if runs is None:
            return NEVER_RAN
        run = runs.active(self.session_key)
        if run is not None:
            return run.describe()
        return runs.last_status(self.session_key) or NEVER_RAN

    async def stat(self) -> Stat:
        await self.require_session_file()
        runs = self.ctx.runs
        changed = runs.changed_ns(self.session_key) if runs is not None else None
        mtime = changed or self.ctx.started_ns
        if runs is not None and runs.busy(self.session_key):
            return Stat(0, mtime, exact=False)  # a read waits and shows what is not known yet
        return Stat(len(self._now_text()) + 1, mtime)

    async def open(self, flags: int) -> OpenFile:
        if opened_for_writing(flags):
            self._runs().check_idle(self.session_key, "send")  # fail at open, not at close
            await self._refuse_if_held_open()
            await self.check_at_open()
            return BufferedWriteHandle(
                self._send, too_big=_prompt_too_big, on_error=self.record_refusal
            )
        await self.require_session_file()
        runs = self.ctx.runs
        if runs is not None and not flags & os.O_NONBLOCK:
            await runs.wait_idle(self.session_key)
            # What the run wrote shows from the next read on, not a moment later.
            await self.ctx.sessions.recheck(*self.session_key)
        return BytesHandle((self._now_text() + "\n").encode("utf-8"))

    async def setattr(self, attr: Any, fields: Any) -> None:
        await allow_truncate_to_zero(self, attr, fields)

    async def check_at_open(self) -> None:
        """More that refuses ``send`` before a prompt is written (a kind of session
        adds what it knows then)."""

    async def _refuse_if_held_open(self) -> None:
        """`WriteRejected` (``EBUSY``, the pids named) while a process the mount did not
        start holds the session file open for writing (its own runs: `check_idle`)."""
        session = await self.session()
        try:
            await trio.to_thread.run_sync(refuse_if_held_open, session.ref.path, self.send_harm)
        except SessionBusyError as exc:
            raise WriteRejected(errno.EBUSY, f"send: {exc.reason}") from None

    def _command(self, kind: type[C]) -> C:
        """The mount's command for ``send`` when it is a ``kind`` and its program can be
        found (`WriteRejected` otherwise, saying why: nothing has been done yet)."""
        command = self.ctx.agent_command
        if not isinstance(command, kind):
            raise WriteRejected(errno.EOPNOTSUPP, f"send: {command or 'no agent to run'}")
        program = command.words[0]
        if shutil.which(program) is None:
            raise WriteRejected(
                errno.ENOENT, f"send: cannot start {program}: not found or not executable"
            )
        return command

    async def _send(self, data: bytes) -> None:
        runs = self._runs()
        prompt = prompt_of(data)
        command = self._command(AgentCommand)  # before the branch point: nothing written
        session = await self.session()
        key = self.session_key
        for record in list(self.ctx.sessions.pending_labels(*key).values()):
            await record.commit(record)  # a label made just before is the user's too
        runs.reserve(key)
        try:
            await self._refuse_if_held_open()  # again: it may have opened it since `open`
            branch_id = None
            if session.pinned_leaf is not None:  # the leaf was moved through the mount
                branch_id = await self.ctx.sessions.write(
                    session, session_writer.record_branch_point, leaf="recorded"
                )
            header = await self.ctx.sessions.run(session, session.header)
            cwd = header.get("cwd")
            argv = command.argv(
                os.path.abspath(session.ref.path), cwd if isinstance(cwd, str) else "", prompt
            )
            env = command.environment(os.environ)
            run = await runs.start(key, argv, _run_dir(cwd), env)
        finally:
            runs.release(key)
        noted = f"; branch point {branch_id}" if branch_id else ""
        session.last_result = f"send: started pid {run.pid}{noted}"


class SendLogFile(InSession, FileNode):
    """``send.log``: the last run's output (its tail, at most `LOG_LIMIT` bytes)."""

    __slots__ = ()

    tier = VOLATILE

    async def stat(self) -> Stat:
        await self.require_session_file()
        runs = self.ctx.runs
        if runs is None:
            return Stat(0, self.ctx.started_ns)
        size, mtime_ns = runs.logs.size(self.session_key)
        return Stat(size, mtime_ns or self.ctx.started_ns)

    async def content(self) -> bytes:
        await self.require_session_file()
        runs = self.ctx.runs
        if runs is None:
            return b""
        return await trio.to_thread.run_sync(runs.logs.tail, self.session_key)
