"""``agents/<agent>/``: the sessions of Claude Code and Codex, read-only.

``agents/<agent>/`` is a local root's tree (``sessions/``, ``transcripts/``, ``by-id/``,
``recent/``) over that agent's sessions, with a `MountContext` of its own whose
``prefix`` is ``("agents", agent)`` and whose index lists the agent's files: the same
node classes and renderers as the local agent dir, the same bytes for the same
session. A session dir shows what reading can show (``header.json``, ``title``,
``entries/``, ``context.json``, ``transcript.md``, ``leaf``, ``path/``, ``tree.txt``,
``stats.json``, ``subagents/``); what exists to write (``labels/``, ``blobs/``,
``append/``, ``ctl``) is absent. Every write below ``agents/`` is ``EROFS`` whatever
the mount's flags (``ops`` checks `Node.read_only_reason`), and the reason is in the
root ``ctl``.
"""

from __future__ import annotations

from sessionfs.fs.nodes.base import STATIC, DirNode, Node
from sessionfs.fs.nodes.generations import GENERATIONS, GenerationsDir, has_generations
from sessionfs.fs.nodes.index import ByIdDir, RecentDir
from sessionfs.fs.nodes.session import (
    ProjectDir,
    SessionDir,
    SessionsDir,
    SubagentsDir,
    session_children,
)
from sessionfs.fs.nodes.transcripts import TranscriptsDir
from sessionfs.view.refusal import READ_ONLY_REASON
from sessionfs.view.session_keys import AGENTS_DIR, ARTIFACTS, SUBAGENTS

__all__ = ["AGENTS", "AgentsDir"]

AGENTS = AGENTS_DIR


class AgentSessionDir(SessionDir):
    """A session dir of another agent: the read-side names only (module docstring)."""

    __slots__ = ()

    def child_classes(self) -> dict[str, type[Node]]:
        if has_generations(getattr(self.ctx.index, "catalog", None)):
            return _AGENT_SESSION_CHILDREN | {GENERATIONS: GenerationsDir}  # an archive's
        return _AGENT_SESSION_CHILDREN


class AgentSubagentsDir(SubagentsDir):
    __slots__ = ()

    session_dir = AgentSessionDir


#: What another agent's session dir leaves out: what exists only to write (and the
#: xcsh artifacts dir, which those agents do not have).
_WRITE_SIDE = frozenset({"labels", "blobs", "append", "ctl", "send", "send.log", ARTIFACTS})
_AGENT_SESSION_CHILDREN: dict[str, type[Node]] = {
    name: cls for name, cls in session_children().items() if name not in _WRITE_SIDE
} | {SUBAGENTS: AgentSubagentsDir}


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
