"""``send`` under ``agents/<agent>/sessions/<project>/<session>/``: the user's real
Claude Code or Codex continues the session from the mount's leaf
(`sessionfs.fs.agent_branching` says how, and when it cannot).

Everything else is ``send`` as for an xcsh session (`sessionfs.fs.nodes.send`): one
run per session, ``cat send`` waits and reports, ``send.log`` holds the run's output,
``EBUSY`` while a process the mount did not start holds the session file open for
writing, ``--send-timeout`` and the unmount rules. What differs: nothing is written to
the session file before the run (the agent gets the leaf on its command line), the
agent runs in the session's cwd, which must still exist (the agents find a session by
its cwd), and a run that forks is looked for once it ended: the new session is
remembered as a fork of this one (`sessionfs.view.agent_notes`), listed at once, and
its ``header.json`` and both ``tree.txt`` files show the link.
"""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import trio

from sessionfs.fs.agent_branching import BranchingCommand, find_fork, session_files
from sessionfs.fs.nodes.send import SendFile, prompt_of
from sessionfs.view.agent_notes import ForkLink
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.other_agent_index import OtherAgentIndex
from sessionfs.view.refusal import WriteRejected

__all__ = ["AgentSendFile"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Plan:
    """One run ``send`` is about to start."""

    session: LoadedSession
    command: BranchingCommand
    session_id: str
    cwd: str
    #: the entry the run forks the session at (None: it continues the session itself)
    fork_at: str | None
    argv: list[str]

    @property
    def forks(self) -> bool:
        return self.fork_at is not None


class AgentSendFile(SendFile):
    """``send`` of another agent's session (module docstring)."""

    __slots__ = ()

    send_harm = (
        "the agent started now would write this session while the other one does: two "
        "writers of one conversation, each continuing without the other's turns"
    )

    def read_only_reason(self) -> str | None:
        return None  # writable under agents/: the agent writes, never the mount

    async def check_at_open(self) -> None:
        await self._plan("")  # the leaf, the cwd: refused before a prompt is written

    async def _plan(self, prompt: str) -> _Plan:
        """The run ``prompt`` makes, or `WriteRejected` saying why there can be none."""
        if "/" in self.stem:
            raise WriteRejected(
                errno.EOPNOTSUPP, "send: a sub-agent's session continues through its parent's"
            )
        command = self._command(BranchingCommand)
        session = await self.session()

        def facts() -> tuple[dict[str, object], str | None, str | None]:
            return session.header(), session.leaf_id(), session.own_leaf_name()

        header, leaf, own_leaf = await self.ctx.sessions.run(session, facts)
        session_id, cwd = header.get("id"), header.get("cwd")
        if not isinstance(session_id, str) or not session_id:
            raise WriteRejected(errno.EINVAL, "send: the session file names no session id")
        argv, forks = command.argv(session_id, leaf, own_leaf, prompt)  # may refuse the leaf
        if not isinstance(cwd, str) or not os.path.isdir(cwd):
            raise WriteRejected(
                errno.ENOENT,
                f"send: the session's cwd {cwd!r} is not a directory any more; the agent "
                "finds a session by the directory it ran in",
            )
        return _Plan(session, command, session_id, cwd, leaf if forks else None, argv)

    async def _send(self, data: bytes) -> None:
        runs = self._runs()
        plan = await self._plan(prompt_of(data))
        directory = plan.session.ref.path.parent
        before = await trio.to_thread.run_sync(session_files, directory) if plan.forks else set()
        key = self.session_key

        async def after() -> None:
            if plan.fork_at is not None:
                await self._remember_fork(plan, plan.fork_at, directory, before)
            index = self.ctx.index
            if isinstance(index, OtherAgentIndex):
                index.rescan()

        runs.reserve(key)
        try:
            await self._refuse_if_held_open()  # again: it may have opened it since `open`
            env = plan.command.environment(os.environ)
            run = await runs.start(key, plan.argv, plan.cwd, env, after=after)
        finally:
            runs.release(key)
        noted = f"; forking at {plan.fork_at}" if plan.forks else ""
        plan.session.last_result = f"send: started pid {run.pid}{noted}"

    async def _remember_fork(
        self, plan: _Plan, leaf: str, directory: Path, before: set[str]
    ) -> None:
        """Find the session the run forked and remember it as this one's fork."""
        session, session_id = plan.session, plan.session_id
        path = await trio.to_thread.run_sync(find_fork, directory, before, leaf)
        if path is None:
            log.warning("send: no fork of %s at %s was written in %s", session_id, leaf, directory)
            session.last_result = f"send: the run wrote no fork at {leaf} (see send.log)"
            return
        project, stem = self.session_key
        link = ForkLink(
            parent_project=project,
            parent_stem=stem,
            parent_id=session_id,
            parent_file=str(session.ref.path),
            at=leaf,
            child_project=project,
            child_stem=path.name.removesuffix(".jsonl"),
            child_id=path.name.removesuffix(".jsonl"),
        )
        await self.ctx.sessions.record_fork(link)
        session.last_result = f"send: forked at {leaf} into {link.child_id}"
