"""``transcripts/<project>/<stem>.md``: every session's ``transcript.md`` as a regular
file in one flat tree, so ``grep -r WORD transcripts`` is the one obvious command.

These files never load a session into the daemon: a worker process renders (or finds
in ``--cache-dir``) the transcript, and reads are ``pread``s of the cache file
(`sessionfs.view.prerender`, `sessionfs.view.render_cache`). ``stat`` answers the
exact size from what the worker recorded. A session whose leaf was moved through the
mount (held in memory, not in the file) is served from its loaded rendering, so the
file always equals ``sessions/<project>/<stem>/transcript.md``.

Sessions are listed by ``AgentIndex.sessions_in``. A session that ran sub-agents (the
task tool's session files in its artifacts dir) also has a dir ``<stem>/`` holding
``<name>.md`` per sub-agent session (and ``<name>/`` for one that ran its own), so
``grep -r`` over ``transcripts/`` reads every conversation, sub-agents' included.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import trio

from core.session_stat import session_stat
from sessionfs.fs.idle_files import CACHE_FILES
from sessionfs.fs.nodes.base import (
    RENDERED,
    STATIC,
    WATCHED,
    BytesHandle,
    CacheTier,
    DirNode,
    FileNode,
    MountContext,
    Node,
    OpenFile,
    Permissions,
    Stat,
    derived_permissions,
    refuse,
)
from sessionfs.fs.nodes.in_session import opened_for_writing
from sessionfs.fs.nodes.projects import ProjectsDir, project_mtime_ns
from sessionfs.view.access import NO_ACCESS, FileAccess
from sessionfs.view.agent_index import AgentIndex, ProjectListing, SessionRef
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.prerender import Prerenderer, RenderFailed, RenderOutcome, TooBigToHold
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.render_cache import CachedRender, FileIdentity
from sessionfs.view.session_cache import NotASession

__all__ = [
    "TRANSCRIPTS",
    "TRANSCRIPT_SUFFIX",
    "TranscriptFile",
    "TranscriptsDir",
    "open_transcript",
    "own_local_file",
    "transcript_key",
    "transcript_record",
    "transcripts_key",
]

TRANSCRIPT_SUFFIX = ".md"
TRANSCRIPTS = "transcripts"


def transcripts_key(project: str) -> tuple[str, ...]:
    """The key of the local ``transcripts/<project>/`` (`Node.key`)."""
    return (TRANSCRIPTS, project)


def transcript_key(project: str, stem: str) -> tuple[str, ...]:
    """The key of the local ``transcripts/<project>/<stem>.md``."""
    return (*transcripts_key(project), stem + TRANSCRIPT_SUFFIX)


def _renders(ctx: MountContext) -> Prerenderer:
    if ctx.renders is None:  # the daemon always sets it; a bare test context may not
        raise refuse(errno.ENOENT)
    return ctx.renders


class TranscriptsDir(ProjectsDir):
    """``transcripts/``: one dir per project, as in ``sessions/``."""

    __slots__ = ()

    def project_node(self, name: str) -> Node:
        return TranscriptProjectDir(self.ctx, self.child_key(name))


class TranscriptProjectDir(DirNode):
    """``transcripts/<project>/``: ``<stem>.md`` per session. Listing it queues the
    first sessions for rendering, and each transcript asked for queues the next ones:
    a sequential ``grep -r`` finds them rendered."""

    __slots__ = ()

    tier = STATIC

    @property
    def project(self) -> str:
        return self.local_key[1]

    async def stat(self) -> Stat:
        mtime = await project_mtime_ns(self.ctx.index, self.project)
        if mtime is None:
            raise refuse(errno.ENOENT)
        return Stat(0, mtime)

    async def listing_view(self) -> tuple[Stat, Permissions]:
        # `stat` and the mount's own permissions, without the await chain where the
        # index answers on the event loop (each warm ``grep -r`` lists every project)
        known = self.ctx.index.project_mtime_if_known(self.project)
        if not isinstance(known, int):
            return await super().listing_view()
        return Stat(0, known), await self.permissions()

    @property
    def parent_stem(self) -> str | None:
        """The session whose sub-agents this dir lists (``None``: the project's own)."""
        return None

    async def children(self) -> list[tuple[str, Node]]:
        index, project, parent = self.ctx.index, self.project, self.parent_stem

        def listing() -> tuple[ProjectListing | None, list[SessionRef], frozenset[str]]:
            if parent is not None:
                refs = index.subagents_of(project, parent)
                return None, refs, frozenset(r.stem for r in refs if _runs_subagents(index, r))
            # The project's own: its listing is reused while the dir is unchanged, and
            # it names the artifacts dirs, so most sessions cost nothing here.
            found = index.listing_of(project)
            return (
                found,
                found.refs,
                frozenset(r.stem for r in found.refs if _runs_subagents(index, r, found.dirs)),
            )

        quick = self._reused_listing()
        found: ProjectListing | None
        running: frozenset[str]
        if quick is not None:
            found, refs, running = quick, quick.refs, frozenset()
        else:
            found, refs, running = await trio.to_thread.run_sync(listing)
        _renders(self.ctx).listed(found.paths if found is not None else [r.path for r in refs])

        def make() -> list[tuple[str, Node]]:
            children: list[tuple[str, Node]] = []
            for ref in refs:
                name = _file_name(ref)
                children.append((name, TranscriptFile(self.ctx, self.child_key(name), ref.path)))
                if ref.stem in running:
                    children.append(
                        (ref.name, TranscriptSubagentsDir(self.ctx, self.child_key(ref.name)))
                    )
            return children

        if found is None:
            return make()
        return self.ctx.children_of_listing(self.key, found, make, running)

    def _reused_listing(self) -> ProjectListing | None:
        """The project's own listing when it is reused as it is and none of its
        sessions has a dir (so none ran sub-agents): known with one stat on the event
        loop, without the thread hop of a listing (a warm ``grep -r`` opens every
        project dir: the hop was most of its cost)."""
        if self.parent_stem is not None:
            return None
        found = self.ctx.index.reused_listing(self.project)
        if found is None or found.has_session_dirs is not False:
            return None
        return found

    async def lookup(self, name: str) -> Node | None:
        if "/" in name or name in (".", ".."):
            return None
        session = name.removesuffix(TRANSCRIPT_SUFFIX)
        stem = session if self.parent_stem is None else f"{self.parent_stem}/{session}"
        ref = await self.ctx.sessions.ref(self.project, stem)
        if ref is not None and name.endswith(TRANSCRIPT_SUFFIX):
            return TranscriptFile(self.ctx, self.child_key(name))
        if ref is not None and await trio.to_thread.run_sync(_runs_subagents, self.ctx.index, ref):
            return TranscriptSubagentsDir(self.ctx, self.child_key(name))
        return None


class TranscriptSubagentsDir(TranscriptProjectDir):
    """``transcripts/<project>/<stem>/``: the transcripts of ``<stem>``'s sub-agent
    sessions, laid out as the project dir is (``<name>.md``, ``<name>/``)."""

    __slots__ = ()

    @property
    def parent_stem(self) -> str:
        return "/".join(self.local_key[2:])

    async def stat(self) -> Stat:
        ref = await self.ctx.sessions.ref(self.project, self.parent_stem)
        if ref is None:
            raise refuse(errno.ENOENT)
        return Stat(0, ref.mtime_ns)

    async def permissions(self) -> Permissions:
        """Follows ``<stem>``'s file, as ``sessions/<project>/<stem>/`` does: its
        sub-agents' transcripts are no more readable than the session that ran them."""
        ref = await self.ctx.sessions.ref(self.project, self.parent_stem)
        return derived_permissions(ref.access if ref is not None else NO_ACCESS)


def _runs_subagents(index: AgentIndex, ref: SessionRef, dirs: frozenset[str] | None = None) -> bool:
    """Whether a session has sub-agent sessions: for most sessions nothing (``dirs``,
    the project dir's real dirs when it was listed, has no artifacts dir of theirs) or
    one lstat, a listing of the artifacts dir for the others."""
    if dirs is not None:
        if ref.stem not in dirs:
            return False
    elif not index.may_have_subagents(ref):
        return False
    return bool(index.subagents_of(ref.project, ref.stem))


def _file_name(ref: SessionRef) -> str:
    return ref.name + TRANSCRIPT_SUFFIX


class TranscriptFile(FileNode):
    """``transcripts/<project>/<stem>.md``: the session's transcript, read-only."""

    __slots__ = ("_file", "_listed_at", "_path", "_session", "_watchable")

    tier = RENDERED

    def __init__(self, ctx: MountContext, key: tuple[str, ...], path: Path | None = None) -> None:
        super().__init__(ctx, key)
        # Worked out once per node (a listing's node is handed out again while its
        # project dir is unchanged, and each readdirplus entry asks for them 3-4 times).
        self._path = path  # the session file, when the listing that made it knows it
        self._file: str | None = None  # its path as a string (what each stat is given)
        project, *parents, name = self.local_key[1:]
        # Grouped with the session: a change the cache sees drops the kernel's copy too.
        self._session = (project, "/".join((*parents, name[: -len(TRANSCRIPT_SUFFIX)])))
        self._watchable: bool | None = None  # see `_watched`
        # when the stat of this node's last listing was taken, if it gave the exact
        # size (`listing_settled`)
        self._listed_at: float | None = None

    @property
    def project(self) -> str:
        return self._session[0]

    @property
    def stem(self) -> str:
        """``transcripts/<project>/<stem>.md``, or ``<stem>/<name>.md`` for a sub-agent's."""
        return self._session[1]

    @property
    def session_key(self) -> tuple[str, str]:
        return self._session

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = self.ctx.index.session_path(self.project, self.stem)
        return self._path

    def kernel_tier(self) -> CacheTier:
        """`WATCHED` when every change to the session file raises an event the watch
        sees: a local session of a watched project dir (not a sub-agent's, in an
        artifacts dir), and a file of its own there (not a symlink to elsewhere)."""
        return WATCHED if self._watched() else self.tier

    def _watched(self) -> bool:
        # Whether the file is its own is worked out once per node (one lstat), as for a
        # session dir: replacing it moves the project dir, which makes new nodes.
        watch = self.ctx.watch
        if watch is None:
            return False
        if self._watchable is None:
            self._watchable = own_local_file(self.ctx, self.stem, self.path)
            if self._watchable is None:
                return False
        return self._watchable and watch.covers(self._session[0])

    def _identity(self) -> tuple[FileIdentity, FileAccess]:
        """The session file as it is now (one stat, on the event loop), its mode and owner."""
        st = self._stat()
        return FileIdentity.of(st), FileAccess.of(st)

    def _stat(self) -> os.stat_result:
        if self._file is None:
            self._file = os.fspath(self.path)
        try:
            return session_stat(self._file)
        except OSError:
            raise refuse(errno.ENOENT) from None

    def _moved_leaf(self) -> LoadedSession | None:
        """The loaded session when its leaf was moved through the mount: then its
        transcript is not the file's, and only the loaded rendering is right."""
        loaded = self.ctx.sessions.loaded_fresh(*self._session)
        return loaded if loaded is not None and loaded.pinned_leaf is not None else None

    def _noted(self) -> bool:
        """Whether the transcript is not the session file's alone (`SessionCache.noted`:
        a leaf moved through the mount, or one the mount remembers). Implied by
        `_moved_leaf`, so this is the one check where the answer is only yes or no."""
        return self.ctx.sessions.noted(*self._session)

    async def _noted_session(self) -> LoadedSession | None:
        """`_moved_leaf`, or the session loaded now when the mount remembers a leaf
        chosen for it (another agent's, after a remount: `SessionCache.noted`)."""
        if not self._noted():  # the usual case: the file alone says it
            return None
        loaded = self._moved_leaf()
        if loaded is not None:
            return loaded
        try:
            session = await self.ctx.sessions.get(self.project, self.stem)
        except NotASession:
            raise refuse(errno.ENOENT) from None
        return session if session.pinned_leaf is not None else None

    async def stat(self) -> Stat:
        identity, _access = self._identity()
        loaded = await self._noted_session()
        if loaded is not None:
            data = await self.ctx.sessions.render(loaded, "transcript.md")
            return Stat(len(data), loaded.mtime_ns)
        record = await transcript_record(self.ctx, self.path, identity)
        return Stat(record.transcript_size, identity.mtime_ns)

    async def listing_stat(self) -> Stat:
        return self._listed(self._identity()[0])

    async def listing_view(self) -> tuple[Stat, Permissions]:
        before = time.monotonic()  # a change after the stat is seen as later
        identity, access = self._identity()  # one stat for both
        listed = self._listed(identity)
        self._listed_at = before if listed.exact else None
        return listed, derived_permissions(access)

    def listing_settled(self) -> bool:
        """Watched, and the watch saw no change of the session file since the stat of
        this node's last listing, which gave the exact size: a warm ``grep -r`` then
        lists each project without a stat per session. Not while the transcript is a
        leaf's chosen through the mount (its size is not the file's)."""
        at, watch = self._listed_at, self.ctx.watch
        if at is None or watch is None or not self._watched() or self._noted():
            return False
        return watch.unchanged_since(*self._session, at)

    def _listed(self, identity: FileIdentity) -> Stat:
        record = _renders(self.ctx).known(self.path, identity)
        if record is None or self._noted():
            return Stat(0, identity.mtime_ns, exact=False)  # a listing renders nothing
        return Stat(record.transcript_size, identity.mtime_ns)

    async def permissions(self) -> Permissions:
        _identity, access = self._identity()
        return derived_permissions(access)

    async def content(self) -> bytes:
        handle = await self.open(os.O_RDONLY)
        try:
            return await handle.read(0, 1 << 62)
        finally:
            await handle.release()

    async def open(self, flags: int) -> OpenFile:
        if opened_for_writing(flags):
            raise WriteRejected(errno.EACCES, f"{self.display_path()}: a transcript, read-only")
        identity = FileIdentity.of(self._stat())  # (the mode and owner: not asked)
        loaded = await self._noted_session() if self._noted() else None
        if loaded is not None:
            data = await self.ctx.sessions.render(loaded, "transcript.md")
            return BytesHandle(data, version=(loaded.file_state, loaded.version))
        return await open_transcript(self.ctx, self.path, identity)


def own_local_file(ctx: MountContext, stem: str, path: Path) -> bool | None:
    """Whether a session's changes all raise events the watch of its project dir sees
    (`sessionfs.fs.session_watch`): a top-level session of the local agent dir (not a
    sub-agent's, in an artifacts dir) whose file is its own there (one lstat: not a
    symlink to elsewhere). None: there is no file."""
    if ctx.prefix or "/" in stem:
        return False
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return None


async def transcript_record(
    ctx: MountContext, path: Path, identity: FileIdentity, renders: Prerenderer | None = None
) -> CachedRender:
    """What is known of the transcript of the session file ``path`` at ``identity``:
    remembered, else its cache file's head checked in the daemon, else a worker's
    validation or rendering. ``ENOENT`` when it is not a session (any more).
    ``renders``: the workers of another rendering than ``ctx.renders``' (the pages)."""
    if renders is None:
        renders = _renders(ctx)
    return _known_record(renders, path, identity) or await _unknown_record(renders, path, identity)


def _known_record(renders: Prerenderer, path: Path, identity: FileIdentity) -> CachedRender | None:
    """`transcript_record` when it is remembered (no await: a warm open's case)."""
    renders.read_ahead_after(path)
    return renders.known(path, identity)


async def _unknown_record(renders: Prerenderer, path: Path, identity: FileIdentity) -> CachedRender:
    """`transcript_record` when it is not remembered: validated or rendered."""
    record = await renders.validated(path, identity)
    if record is not None:
        return record
    return (await _outcome(renders, path)).record


async def _outcome(renders: Prerenderer, path: Path, want_bytes: bool = False) -> RenderOutcome:
    """`Prerenderer.outcome`: ``ENOENT`` for a file that is not a session (any more),
    ``EFBIG`` with the reason for a rendering too big to hold that has nowhere to go."""
    try:
        return await renders.outcome(path, want_bytes)
    except RenderFailed:
        raise refuse(errno.ENOENT) from None
    except TooBigToHold as exc:
        raise WriteRejected(errno.EFBIG, str(exc)) from None


async def open_transcript(
    ctx: MountContext, path: Path, identity: FileIdentity, renders: Prerenderer | None = None
) -> OpenFile:
    """An open transcript of ``path`` at ``identity``: ``pread``s of its cache file, or
    the bytes from a worker when there is no usable cache file."""
    if renders is None:
        renders = _renders(ctx)
    record = _known_record(renders, path, identity) or await _unknown_record(
        renders, path, identity
    )
    handle = _open_cache_file(record)
    if handle is not None:
        return handle
    # Not stored (a full or missing cache dir) or changed since it was validated:
    # the worker validates or renders again and hands over the bytes themselves.
    outcome = await _outcome(renders, path, want_bytes=True)
    handle = _open_cache_file(outcome.record)
    if handle is not None:
        return handle
    if outcome.data is None:  # rendered into the cache dir only, and gone from there since
        raise WriteRejected(errno.EFBIG, _GONE_FROM_CACHE)
    return BytesHandle(outcome.data, version=outcome.record.identity)


#: Why a rendering of a file too big to hold cannot be read after all.
_GONE_FROM_CACHE = (
    "the session file is too big to render in memory, and its rendering in the cache "
    "dir was replaced or removed while it was opened; read it again"
)


class CacheFileHandle(OpenFile):
    """An open transcript served from its validated cache file (``pread``, in a thread:
    after a remount the file may be on disk, not in the page cache)."""

    size: int  # the transcript's, fixed at open like a snapshot's

    def __init__(self, fd: int, record: CachedRender, validated: FileIdentity) -> None:
        self.fd = fd
        self.validated = validated  # the cache file's: `release` keeps the descriptor for it
        self.offset = record.data_offset
        self.size = record.transcript_size
        self.version = record.identity

    async def read(self, offset: int, size: int) -> bytes:
        size = min(size, self.size - offset)
        if size <= 0:
            return b""
        cached = _read_if_cached(self.fd, size, self.offset + offset)
        if cached is not None:
            return cached
        return await trio.to_thread.run_sync(os.pread, self.fd, size, self.offset + offset)

    async def release(self) -> None:
        CACHE_FILES.give_back(self.validated, self.fd)


def _read_if_cached(fd: int, size: int, offset: int) -> bytes | None:
    """The bytes at ``offset`` if all of them are in the page cache (``RWF_NOWAIT``
    never waits for the disk), else ``None``: read-ahead asked the kernel to load the
    next transcripts, so a ``grep -r`` mostly reads without a thread hop per 128 KiB."""
    if _RWF_NOWAIT is None:
        return None
    buffer = bytearray(size)
    try:
        got = os.preadv(fd, [buffer], offset, _RWF_NOWAIT)
    except OSError:  # EAGAIN (not all cached), or a file system without RWF_NOWAIT
        return None
    return bytes(buffer) if got == size else None


_RWF_NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)


def _open_cache_file(record: CachedRender) -> CacheFileHandle | None:
    """A handle on the record's cache file, if it is still the very file validated
    (not replaced, truncated or scribbled on since: its own identity is unchanged)."""
    if record.stored is None:
        return None
    path, validated = record.stored
    fd = CACHE_FILES.take(validated)
    if fd is not None:
        return CacheFileHandle(fd, record, validated)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if FileIdentity.of(os.fstat(fd)) == validated:
            return CacheFileHandle(fd, record, validated)
    except OSError:
        pass
    os.close(fd)
    return None
