"""The mount's root: ``README.md``, ``ctl``, and the top-level directories."""

from __future__ import annotations

from typing import Any

import trio

from sessionfs.nodes.base import (
    STATIC,
    VOLATILE,
    DirNode,
    FileNode,
    Node,
    OpenFile,
    allow_truncate_to_zero,
)
from sessionfs.nodes.blobs import RootBlobsDir
from sessionfs.nodes.history import HistoryDir
from sessionfs.nodes.index import ByIdDir, RecentDir
from sessionfs.nodes.mount_paths import describe
from sessionfs.nodes.session import SessionsDir, opened_for_writing
from sessionfs.nodes.write_handles import LineCommandHandle
from sessionfs.render import status_text
from sessionfs.session_commands import parse_root_commands, run_root_command
from sessionfs.write_errors import WriteRejected

README_TEXT = """\
# sessionfs

This directory is a live view of the coding-agent sessions in an agent dir. Every
session file is a directory; every entry is a file. Use the ordinary tools.

## Where things are

    sessions/<project>/<session>/   one dir per session file
    by-id/<session-id>              symlink to the session dir (a unique id prefix works too)
    recent/1 .. recent/50           newest sessions first (by file mtime)
    history/recent.txt              the last 100 prompts: <time> TAB <cwd> TAB <prompt>
    history/search/<words>          prompts matching all words (same format)
    blobs/<sha256>                  the agent's blob store (images)
    ctl                             root control file (status on read)

Inside a session dir:

    header.json      the session header
    title            the title (one line, empty if none)
    entries/<id>.json  every entry exactly as stored, in file order; mtime = entry time
    context.json     what the model sees at the current leaf
    transcript.md    the same as Markdown
    leaf             symlink to the current leaf entry
    path/            the root -> leaf path as numbered symlinks
    tree.txt         the whole tree; '*' marks the current path, [label] marks labels
    labels/<label>   symlinks to labelled entries
    blobs/<sha256>   the blobs this session references
    stats.json       entry counts, depth, usage totals
    ctl              status: id, file, version, leaf, entries, ...
    append/          drop box for new entries

## Recipes

    ls -l recent/                               what did I work on lately?
    cat recent/1/transcript.md | less           read the newest session
    grep -rl 'some words' sessions/             which sessions mention them?
    jq '.messages | length' by-id/<id>/context.json
    readlink recent/1/leaf                      the current leaf entry
    cat history/search/fuse%2Fmount             search prompts ("/" is written %2F)

## Writing (each is one call into the session engine, fsynced before it returns)

    ln -sfn entries/<id>.json S/leaf            branch: the next append goes below <id>
    rm S/leaf                                   the next append starts a new root
    printf 'next prompt' > S/append/p.txt       append a user message (.txt or .md)
    cp msg.json S/append/                       append JSON: an AgentMessage ({"role": ...}),
                                                an entry body ({"type": ...}) or JSON Lines
    ln -s ../entries/<id>.json S/labels/name    label an entry; mv / rm relabel / clear
    echo 'My title' > S/title                   set the title
    echo 'fork' > S/ctl                         also: branch <id>, reset, flush,
                                                summary <id|root> <text>, extract <id>
    echo 'new /path/to/project Title' > ctl     a new session for that directory
    cat S/ctl                                   last_result / last_error of the above

A refused write fails with an errno (EINVAL, ENOENT, EFBIG over 64 MiB, ENOSPC, ...)
and changes nothing; `cat S/ctl` says why. The leaf is not stored in the file: it is
kept by the mount until the next append records it.

Names that cannot be file names are percent-encoded: "/" is %2F, "%" is %25, and
an id that is exactly "." or ".." is %2E or %2E%2E. Reading never changes a session
file; sessions an agent is writing update live (within a second).
"""


class ReadmeFile(FileNode):
    __slots__ = ()

    tier = STATIC

    async def content(self) -> bytes:
        return README_TEXT.encode()


class RootCtl(FileNode):
    """Root ``ctl``: ``new <cwd> [title]`` creates a session on disk at once; reading
    gives the last result (the new session's path in the mount) or error."""

    __slots__ = ()

    tier = VOLATILE
    mode = 0o644

    async def content(self) -> bytes:
        return status_text(
            [("last_result", self.ctx.root_last_result), ("last_error", self.ctx.root_last_error)]
        )

    async def open(self, flags: int) -> OpenFile:
        if not opened_for_writing(flags):
            return await super().open(flags)
        return LineCommandHandle(self._run, on_error=self._record_error)

    async def setattr(self, attr: Any, fields: Any) -> None:
        allow_truncate_to_zero(attr, fields)

    async def _record_error(self, exc: WriteRejected) -> None:
        self.ctx.root_last_error = exc.reason

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
        "ctl": RootCtl,
        "sessions": SessionsDir,
        "by-id": ByIdDir,
        "recent": RecentDir,
        "history": HistoryDir,
        "blobs": RootBlobsDir,
    }

    async def children(self) -> list[tuple[str, Node]]:
        return [(name, cls(self.ctx, (name,))) for name, cls in self._CHILDREN.items()]

    async def lookup(self, name: str) -> Node | None:
        cls = self._CHILDREN.get(name)
        return cls(self.ctx, (name,)) if cls is not None else None
