"""The mount's root: ``README.md``, ``ctl``, and the top-level directories."""

from __future__ import annotations

import functools
import os
from importlib import resources

import trio

from sessionfs.fs.nodes.agents import AGENTS, AgentsDir
from sessionfs.fs.nodes.base import (
    STATIC,
    DirNode,
    FileNode,
    Node,
)
from sessionfs.fs.nodes.blobs import RootBlobsDir
from sessionfs.fs.nodes.command_file import CommandFile
from sessionfs.fs.nodes.history import HistoryDir
from sessionfs.fs.nodes.index import ByIdDir, RecentDir
from sessionfs.fs.nodes.mount_paths import describe
from sessionfs.fs.nodes.search import SearchDir
from sessionfs.fs.nodes.session import SessionsDir
from sessionfs.fs.nodes.transcripts import TRANSCRIPTS, TranscriptsDir
from sessionfs.view.render import status_text
from sessionfs.writes.session_commands import parse_root_commands, run_root_command

#: The mount manual. Its one source is docs/mount.md; ``sessionfs/mount.md`` is a symlink
#: to it, shipped as package data, so an editable install and a wheel both find it.
MANUAL_RESOURCE = "mount.md"


@functools.cache
def mount_manual() -> bytes:
    """The text the mount serves as ``/README.md`` (read once: it is part of the install)."""
    return resources.files("sessionfs").joinpath(MANUAL_RESOURCE).read_bytes()


class ReadmeFile(FileNode):
    __slots__ = ()

    tier = STATIC

    async def content(self) -> bytes:
        return mount_manual()


#: The root ``.ignore`` (ripgrep, ag, fd honour it): every session dir shows its
#: conversation again (and costs a full parse to read), so ``rg WORD <mount>`` reads
#: each conversation once, in ``transcripts/``. A sub-agent's artifacts dir is also in
#: its parent's ``artifacts/`` (read there once), and session files in ``artifacts/``
#: are conversations already in ``transcripts/``. ``send`` is left out because reading
#: it waits for a running agent; ``send.log`` is an agent's output, not a conversation.
#: ``agents/<agent>/`` likewise reads each conversation once, in its ``transcripts/``.
ROOT_IGNORE = b"""\
# sessionfs: the duplicate views of each session. Search transcripts/ instead:
# rg WORD <mount> then reads every conversation once. (rg --no-ignore reads all.)
/sessions/**/entries/
/sessions/**/path/
/sessions/**/context.json
/sessions/**/tree.txt
/sessions/**/tree.svg
/sessions/**/transcript.md
/sessions/**/transcript.html
/sessions/**/branches/
/sessions/**/blobs/
/sessions/**/ctl
/sessions/**/send
/sessions/**/send.log
/sessions/**/stats.json
/sessions/**/header.json
/sessions/**/subagents/**/artifacts/
/sessions/**/artifacts/**/*.jsonl
/blobs/
/agents/*/sessions/**/entries/
/agents/*/sessions/**/path/
/agents/*/sessions/**/context.json
/agents/*/sessions/**/tree.txt
/agents/*/sessions/**/tree.svg
/sessions/**/tree.svg
/agents/*/sessions/**/transcript.md
/agents/*/sessions/**/transcript.html
/agents/*/sessions/**/branches/
/sessions/**/transcript.html
/sessions/**/branches/
/agents/*/sessions/**/stats.json
/agents/*/sessions/**/header.json
"""


class IgnoreFile(FileNode):
    __slots__ = ()

    tier = STATIC

    async def content(self) -> bytes:
        return ROOT_IGNORE


class RootCtl(CommandFile):
    """Root ``ctl``: ``new <cwd> [title]`` creates a session on disk at once; reading
    gives the last result (the new session's path in the mount) or error."""

    __slots__ = ()

    async def content(self) -> bytes:
        search = self.ctx.search.progress.ctl_items() if self.ctx.search is not None else []
        if self.ctx.archive_search is not None:
            search += self.ctx.archive_search.progress.ctl_items("search_archive")
        if self.ctx.archive_ctl is not None:
            search += self.ctx.archive_ctl()
        caches = self.ctx.sessions.ctl_items()
        if self.ctx.agents is not None:
            for name, view in self.ctx.agents.search_views():
                search += view.progress.ctl_items(f"search_{name}")
            for name in self.ctx.agents.agent_names():
                context = self.ctx.agents.agent_context(name)
                if context is not None:  # a session of this agent that could not be read
                    search.append((f"agents_{name}_last_skip", context.sessions.last_skip))
                    caches += context.sessions.ctl_items(f"cache_{name}")
        return status_text(
            [
                ("last_result", self.ctx.root_last_result),
                ("last_error", self.ctx.root_last_error),
                *search,
                *caches,
                *self._kernel_inodes(),
                # `sessionfs umount` waits for this process: it stops the agents last
                ("pid", os.getpid()),
            ]
        )

    def _kernel_inodes(self) -> list[tuple[str, object]]:
        count = self.ctx.kernel_inodes
        return [("kernel_inodes", count())] if count is not None else []

    async def _run(self, data: bytes) -> None:
        agent_dir = self.ctx.index.agent_dir
        for command in parse_root_commands(data):
            result = await trio.to_thread.run_sync(run_root_command, agent_dir, command)
            self.ctx.root_last_result = describe(result, self.ctx)
            self.ctx.root_last_error = None


class RootDir(DirNode):
    __slots__ = ()

    tier = STATIC

    _CHILDREN: dict[str, type[Node]] = {  # noqa: RUF012 - a fixed table, never mutated
        "README.md": ReadmeFile,
        ".ignore": IgnoreFile,
        "ctl": RootCtl,
        "sessions": SessionsDir,
        TRANSCRIPTS: TranscriptsDir,
        "by-id": ByIdDir,
        "recent": RecentDir,
        "history": HistoryDir,
        "blobs": RootBlobsDir,
        "search": SearchDir,
        AGENTS: AgentsDir,
    }

    def _shows(self, name: str) -> bool:
        """``agents/`` only when some other agent's dir is shown."""
        agents = self.ctx.agents
        return name != AGENTS or (agents is not None and bool(agents.agent_names()))

    async def children(self) -> list[tuple[str, Node]]:
        return [
            (name, cls(self.ctx, self.child_key(name)))
            for name, cls in self._CHILDREN.items()
            if self._shows(name)
        ]

    async def lookup(self, name: str) -> Node | None:
        cls = self._CHILDREN.get(name)
        if cls is None or not self._shows(name):
            return None
        return cls(self.ctx, self.child_key(name))
