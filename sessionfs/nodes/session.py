"""One session directory ``sessions/<project>/<stem>/`` and its rendered files."""

from __future__ import annotations

import errno
import os
import time
from typing import ClassVar

import trio

from sessionfs.live import FRESH_INTERVAL, LoadedSession, NotASession, SessionRef
from sessionfs.nodes.base import (
    RENDERED,
    STATIC,
    VOLATILE,
    BytesHandle,
    DirNode,
    FileNode,
    LinkNode,
    MountContext,
    Node,
    OpenFile,
    Stat,
    refuse,
)
from sessionfs.render import status_text


class InSession:
    """Mixin for nodes below ``sessions/<project>/<stem>``: finds their session."""

    __slots__ = ()

    key: tuple[str, ...]
    ctx: MountContext

    @property
    def project(self) -> str:
        return self.key[1]

    @property
    def stem(self) -> str:
        return self.key[2]

    async def session(self, warm: str | None = None) -> LoadedSession:
        try:
            return await self.ctx.sessions.get(self.project, self.stem, warm)
        except NotASession:
            raise refuse(errno.ENOENT) from None


class RenderedFile(InSession, FileNode):
    """A file whose bytes are one of ``LoadedSession``'s cached renderings."""

    __slots__ = ()

    tier = RENDERED
    rendering: ClassVar[str]

    async def content(self) -> bytes:
        session = await self.session()
        return await self.ctx.sessions.render(session, self.rendering)

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns

    async def open(self, flags: int) -> OpenFile:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise refuse(errno.EACCES)  # title becomes writable in issue 5
        session = await self.session()
        data = await self.ctx.sessions.render(session, self.rendering)
        return BytesHandle(data, version=(session.file_state, session.version))

    async def listing_stat(self) -> Stat:
        session = await self.session()
        cached = session.cached(self.rendering)
        if cached is not None:
            return Stat(len(cached), session.mtime_ns)
        return Stat(0, session.mtime_ns, exact=False)  # listing a dir renders nothing


class HeaderFile(RenderedFile):
    __slots__ = ()

    rendering = "header.json"


class TitleFile(RenderedFile):
    __slots__ = ()

    rendering = "title"
    mode = 0o644  # writable in issue 5: set_session_name on close


class ContextFile(RenderedFile):
    __slots__ = ()

    rendering = "context.json"


class TranscriptFile(RenderedFile):
    __slots__ = ()

    rendering = "transcript.md"


class TreeFile(RenderedFile):
    __slots__ = ()

    rendering = "tree.txt"


class StatsFile(RenderedFile):
    __slots__ = ()

    rendering = "stats.json"


class SessionCtl(InSession, FileNode):
    """``ctl``: status on read; commands on write (issue 5)."""

    __slots__ = ()

    tier = VOLATILE
    mode = 0o644

    async def listing_stat(self) -> Stat:
        return Stat(0, (await self.session()).mtime_ns, exact=False)

    async def content(self) -> bytes:
        session = await self.session()

        def status() -> bytes:
            persist_error = getattr(session.manager, "persist_error", None)
            return status_text(
                [
                    ("id", session.header().get("id")),
                    ("file", str(session.ref.path)),
                    ("version", session.header().get("version", 1)),
                    ("leaf", session.leaf_id()),
                    ("entries", len(session.table().entries)),
                    ("needs_rewrite", bool(getattr(session.manager, "needs_rewrite", False))),
                    ("persist_error", str(persist_error) if persist_error else None),
                    ("last_result", session.last_result),
                    ("last_error", session.last_error),
                ]
            )

        return await self.ctx.sessions.run(session, status)

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns


class LeafLink(InSession, LinkNode):
    """``leaf -> entries/<leafId>.json``; absent while the leaf is null."""

    __slots__ = ()

    async def target(self) -> str:
        session = await self.session()

        def leaf_name() -> str | None:
            return session.table().name_for_id(session.leaf_id(), session.by_id())

        name = await self.ctx.sessions.run(session, leaf_name)
        if name is None:
            raise refuse(errno.ENOENT)
        return f"entries/{name}"

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns


class AppendDir(InSession, DirNode):
    """``append/``: a drop box for new entries (issue 5); always lists empty."""

    __slots__ = ()

    tier = VOLATILE
    mode = 0o755

    async def lookup(self, name: str) -> Node | None:
        return None


def _session_children() -> dict[str, type[Node]]:
    # Imported here: entries.py and blobs.py import this module's InSession.
    from sessionfs.nodes.entries import EntriesDir, LabelsDir, PathDir, SessionBlobsDir

    return {
        "header.json": HeaderFile,
        "title": TitleFile,
        "entries": EntriesDir,
        "context.json": ContextFile,
        "transcript.md": TranscriptFile,
        "leaf": LeafLink,
        "path": PathDir,
        "tree.txt": TreeFile,
        "labels": LabelsDir,
        "blobs": SessionBlobsDir,
        "append": AppendDir,
        "ctl": SessionCtl,
        "stats.json": StatsFile,
    }


class SessionDir(InSession, DirNode):
    """``sessions/<project>/<stem>/``. Its stat comes from the listing (no full load)."""

    __slots__ = ("ref", "ref_at")

    tier = STATIC

    def __init__(self, ctx: MountContext, key: tuple[str, ...], ref: SessionRef | None) -> None:
        super().__init__(ctx, key)
        self.ref = ref
        self.ref_at = time.monotonic()  # a lookup's ref answers the stat right after it

    async def stat(self) -> Stat:
        loaded = self.ctx.sessions.loaded_fresh(self.project, self.stem)
        if loaded is not None:
            return Stat(0, loaded.mtime_ns)
        ref = self.ref
        if ref is None or time.monotonic() - self.ref_at > FRESH_INTERVAL:
            ref = await self.ctx.sessions.ref(self.project, self.stem)
        if ref is None:
            raise refuse(errno.ENOENT)
        return Stat(0, ref.mtime_ns)

    async def _has_leaf(self) -> bool:
        session = await self.session()
        return (
            await self.ctx.sessions.run(
                session, lambda: session.table().name_for_id(session.leaf_id(), session.by_id())
            )
            is not None
        )

    async def children(self) -> list[tuple[str, Node]]:
        has_leaf = await self._has_leaf()
        return [
            (name, cls(self.ctx, self.child_key(name)))
            for name, cls in _session_children().items()
            if name != "leaf" or has_leaf
        ]

    async def lookup(self, name: str) -> Node | None:
        cls = _session_children().get(name)
        if cls is None:
            return None
        rendering = getattr(cls, "rendering", None)  # about to be stat'ed: render it now
        await self.session(warm=rendering)  # ENOENT if the session is gone or not one
        if name == "leaf" and not await self._has_leaf():
            return None
        return cls(self.ctx, self.child_key(name))


class ProjectDir(DirNode):
    """``sessions/<project>/``: one dir per valid session file (4 KiB header reads)."""

    __slots__ = ()

    tier = STATIC

    async def stat(self) -> Stat:
        mtime = await trio.to_thread.run_sync(self.ctx.index.project_mtime_ns, self.key[1])
        if mtime is None:
            raise refuse(errno.ENOENT)
        return Stat(0, mtime)

    async def children(self) -> list[tuple[str, Node]]:
        refs = await trio.to_thread.run_sync(self.ctx.index.sessions_in, self.key[1])
        return [(r.stem, SessionDir(self.ctx, self.child_key(r.stem), r)) for r in refs]

    async def lookup(self, name: str) -> Node | None:
        loaded = self.ctx.sessions.loaded_fresh(self.key[1], name)
        if loaded is not None:
            return SessionDir(self.ctx, self.child_key(name), loaded.ref)
        ref = await self.ctx.sessions.ref(self.key[1], name)
        return SessionDir(self.ctx, self.child_key(name), ref) if ref is not None else None


class SessionsDir(DirNode):
    """``sessions/``: the project dirs under ``<agent>/sessions``."""

    __slots__ = ()

    tier = STATIC

    async def children(self) -> list[tuple[str, Node]]:
        projects = await trio.to_thread.run_sync(self.ctx.index.projects)
        return [(p, ProjectDir(self.ctx, self.child_key(p))) for p in projects]

    async def lookup(self, name: str) -> Node | None:
        node = ProjectDir(self.ctx, self.child_key(name))
        if name in (".", "..") or "/" in name:
            return None
        mtime = await trio.to_thread.run_sync(self.ctx.index.project_mtime_ns, name)
        return node if mtime is not None else None
