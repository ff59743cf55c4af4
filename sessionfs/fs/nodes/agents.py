"""``agents/<agent>/``: the sessions of Claude Code and Codex, read-only.

``agents/<agent>/`` is a local root's tree (``sessions/``, ``transcripts/``, ``by-id/``,
``recent/``) over that agent's sessions, with a `MountContext` of its own whose
``prefix`` is ``("agents", agent)`` and whose index lists the agent's files: the same
node classes and renderers as the local agent dir, the same bytes for the same
session. A session dir shows what reading can show (``header.json``, ``title``,
``entries/``, ``context.json``, ``transcript.md``, ``leaf``, ``path/``, ``tree.txt``,
``stats.json``, ``subagents/``); what exists to write into an xcsh file (``labels/``,
``blobs/``, ``append/``) is absent. Every write below ``agents/`` is ``EROFS``
whatever the mount's flags (``ops`` checks `Node.read_only_reason`), and the reason is
in the root ``ctl`` -- except, for an agent ``send`` can run (Claude Code, Codex:
`sessionfs.fs.agent_branching`), the two things that write nothing into the agent's
files: moving ``leaf`` (``ln -sfn``, ``rm leaf``: a choice the mount holds, see
`SessionCache.choose_leaf`) and ``send`` (`sessionfs.fs.nodes.agent_send`), whose
sessions also show ``send.log`` and a read-only ``ctl`` (the leaf, the runs, the last
refusal's reason).
"""

from __future__ import annotations

import errno
from typing import Any

from sessionfs.fs.nodes.agent_send import AgentSendFile
from sessionfs.fs.nodes.base import STATIC, DirNode, Node, OpenFile
from sessionfs.fs.nodes.generations import GENERATIONS, GenerationsDir, has_generations
from sessionfs.fs.nodes.index import ByIdDir, RecentDir
from sessionfs.fs.nodes.send import SendLogFile
from sessionfs.fs.nodes.session import (
    ProjectDir,
    SessionCtl,
    SessionDir,
    SessionsDir,
    SubagentsDir,
    session_children,
)
from sessionfs.fs.nodes.transcripts import TranscriptsDir
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.refusal import READ_ONLY_REASON, WriteRejected
from sessionfs.view.session_keys import AGENTS_DIR, ARTIFACTS, SUBAGENTS
from sessionfs.writes.link_targets import SESSION_DIR, resolve_link_target

__all__ = ["AGENTS", "AgentsDir"]

AGENTS = AGENTS_DIR


def _read_only(what: str) -> WriteRejected:
    return WriteRejected(errno.EROFS, f"{what}: {READ_ONLY_REASON}")


class AgentSessionDir(SessionDir):
    """A session dir of another agent: the read-side names, and for an agent ``send``
    can run, ``send``, ``send.log``, ``ctl`` and a ``leaf`` the mount holds (module
    docstring)."""

    __slots__ = ()

    def _branching(self) -> bool:
        return self.ctx.runs is not None

    def child_classes(self) -> dict[str, type[Node]]:
        children = _BRANCHING_SESSION_CHILDREN if self._branching() else _AGENT_SESSION_CHILDREN
        if has_generations(self.ctx.index):
            return children | {GENERATIONS: GenerationsDir}  # an archive's
        return children

    def read_only_reason(self) -> str | None:
        # Writable only for the leaf (checked by each write below): ops must let
        # those through.
        return None if self._branching() else READ_ONLY_REASON

    # -- the leaf: held by the mount ------------------------------------------------------

    async def _check_target(self, target: str) -> None:
        await self._entry_of(target)

    async def _entry_of(self, target: str) -> str:
        """The entry a link target names (`resolve_link_target`, against the agent's
        entry names); a refusal is kept for ``ctl``."""
        session = await self.session()
        dirs = self.session_dirs(target)

        def resolve() -> str:
            count = session.entry_count()
            return resolve_link_target(
                target,
                link_dir=SESSION_DIR,
                has_entry=lambda name: session.index_of_id(name) is not None,
                session_dirs=dirs,
                entry_ids=lambda: [session.entry_name(i) for i in range(count)],
            )

        try:
            return await self.ctx.sessions.run(session, resolve)
        except WriteRejected as exc:
            session.record_refusal(exc)
            raise

    async def _branch(self, target: str) -> None:
        name = await self._entry_of(target)
        session = await self.session()
        await self.ctx.sessions.choose_leaf(session, name)
        session.last_result = f"leaf: {name}"

    async def unlink(self, name: str) -> None:
        if name != "leaf" or not self._branching():
            if name in self.ctx.sessions.pending_links(self.project, self.stem):
                return await super().unlink(name)
            raise _read_only(f"rm {self.display_path(name)}")
        self.refuse_while_agent_runs()
        session = await self.session()
        await self.ctx.sessions.choose_leaf(session, None)
        session.last_result = "leaf: the agent's own"

    async def rename(
        self, name: str, new_parent: DirNode, new_name: str, flags: int
    ) -> Node | None:
        if name not in self.ctx.sessions.pending_links(self.project, self.stem):
            raise _read_only(f"mv {self.display_path(name)}")
        return await super().rename(name, new_parent, new_name, flags)

    async def create(self, name: str, flags: int, mode: int) -> tuple[Node, OpenFile]:
        raise _read_only(self.display_path(name))

    async def mkdir(self, name: str, mode: int) -> Node:
        raise _read_only(f"mkdir {self.display_path(name)}")

    async def rmdir(self, name: str) -> None:
        raise _read_only(f"rmdir {self.display_path(name)}")

    async def link(self, node: Node, new_name: str) -> Node:
        raise _read_only(f"ln {self.display_path(new_name)}")

    async def setattr(self, attr: Any, fields: Any) -> None:
        raise _read_only(self.display_path())


class AgentSubagentsDir(SubagentsDir):
    __slots__ = ()

    session_dir = AgentSessionDir


#: What another agent's session dir leaves out: what exists only to write (and the
#: xcsh artifacts dir, which those agents do not have).
_WRITE_SIDE = frozenset({"labels", "blobs", "append", "ctl", "send", "send.log", ARTIFACTS})
_AGENT_SESSION_CHILDREN: dict[str, type[Node]] = {
    name: cls for name, cls in session_children().items() if name not in _WRITE_SIDE
} | {SUBAGENTS: AgentSubagentsDir}


class AgentSessionCtl(SessionCtl):
    """``ctl`` of another agent's session: read-only; it adds ``agent_leaf``, the entry
    the agent itself would continue from (where ``rm leaf`` goes back to)."""

    __slots__ = ()

    def more_status(self, session: LoadedSession) -> list[tuple[str, object]]:
        return [("agent_leaf", session.own_leaf_name())]


#: A session of an agent ``send`` can run (module docstring).
_BRANCHING_SESSION_CHILDREN: dict[str, type[Node]] = _AGENT_SESSION_CHILDREN | {
    "ctl": AgentSessionCtl,
    "send": AgentSendFile,
    "send.log": SendLogFile,
}


class AgentProjectDir(ProjectDir):
    __slots__ = ()

    session_dir = AgentSessionDir


class AgentSessionsDir(SessionsDir):
    __slots__ = ()

    project_dir = AgentProjectDir


_AGENT_ROOT_CHILDREN: dict[str, type[Node]] = {
    "sessions": AgentSessionsDir,
    "transcripts": TranscriptsDir,
    "by-id": ByIdDir,
    "recent": RecentDir,
}


class AgentDir(DirNode):
    """``agents/<agent>/``: that agent's sessions as a local root shows them (in the
    agent's own context: its ``prefix`` is this dir)."""

    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        return [
            (name, cls(self.ctx, self.child_key(name)))
            for name, cls in _AGENT_ROOT_CHILDREN.items()
        ]

    async def lookup(self, name: str) -> Node | None:
        cls = _AGENT_ROOT_CHILDREN.get(name)
        return cls(self.ctx, self.child_key(name)) if cls is not None else None


class AgentsDir(DirNode):
    """``agents/``: one dir per other agent whose directory exists (the root's
    context's ``agents``; the root lists this dir only when there is one)."""

    __slots__ = ()

    tier = STATIC

    def read_only_reason(self) -> str | None:
        return READ_ONLY_REASON

    def _agent(self, name: str) -> Node | None:
        views = self.ctx.agents
        context = views.agent_context(name) if views is not None else None
        return AgentDir(context, self.child_key(name)) if context is not None else None

    async def children(self) -> list[tuple[str, Node]]:
        names = self.ctx.agents.agent_names() if self.ctx.agents is not None else []
        found = [(name, self._agent(name)) for name in names]
        return [(name, node) for name, node in found if node is not None]

    async def lookup(self, name: str) -> Node | None:
        return self._agent(name)
