"""One session directory ``sessions/<project>/<stem>/`` and its rendered files."""

from __future__ import annotations

import errno
import math
import os
import stat
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import trio

from core.session_stat import session_stat
from core.zstd_files import ZSTD_SUFFIX
from sessionfs.fs.nodes.artifacts import ArtifactsDir, has_artifacts_dir
from sessionfs.fs.nodes.base import (
    DROPBOX,
    RENDERED,
    STATIC,
    VOLATILE,
    WATCHED,
    BytesHandle,
    CacheTier,
    DirNode,
    FileNode,
    LinkNode,
    MountContext,
    Node,
    OpenFile,
    Permissions,
    Stat,
    allow_truncate_to_zero,
    derived_permissions,
    refuse,
)
from sessionfs.fs.nodes.command_file import CommandFile
from sessionfs.fs.nodes.entries import (
    EntriesDir,
    LabelsDir,
    PathDir,
    SessionBlobsDir,
    SessionListing,
)
from sessionfs.fs.nodes.generations import GENERATIONS, GenerationsDir, has_generations
from sessionfs.fs.nodes.in_session import (
    RENAME_NOREPLACE,
    InSession,
    opened_for_writing,
    refuse_unsupported_rename,
)
from sessionfs.fs.nodes.mount_paths import describe
from sessionfs.fs.nodes.projects import ProjectsDir, project_mtime_ns
from sessionfs.fs.nodes.scratch import ScratchHolder, link_text, write_through
from sessionfs.fs.nodes.send import SendFile, SendLogFile
from sessionfs.fs.nodes.transcripts import open_transcript, own_local_file, transcript_record
from sessionfs.fs.nodes.write_handles import BufferedWriteHandle, EditHandle, LineBatchHandle
from sessionfs.view.access import NO_ACCESS, FileAccess
from sessionfs.view.agent_index import SessionRef
from sessionfs.view.branch_pages import BRANCHES_DIR
from sessionfs.view.loaded_session import FRESH_INTERVAL, UNKNOWN, LoadedSession
from sessionfs.view.prerender import Prerenderer
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.render import status_text
from sessionfs.view.render_cache import FileIdentity
from sessionfs.view.session_cache import LeafEffect
from sessionfs.view.session_keys import (
    ARTIFACTS,
    SUBAGENTS,
    child_stem,
    is_valid_name,
)
from sessionfs.writes import session_writer
from sessionfs.writes.append_parse import is_line_stream_name, parse_append, reject_oversize
from sessionfs.writes.link_targets import SESSION_DIR
from sessionfs.writes.session_commands import (
    CommandResult,
    SessionCommand,
    parse_session_commands,
    run_session_command,
)

T = TypeVar("T")

#: Largest ``title`` write kept in memory (a title is one line).
TITLE_LIMIT = 64 * 1024
#: Temporary symlinks (GNU ``ln -sf`` makes one before renaming it over ``leaf``) kept
#: per session; more is refused rather than letting memory grow.
MAX_PENDING_LINKS = 64
#: An append file up to this size is parsed and committed on the event loop when that
#: is safe (`SessionCache.write`'s ``small``): parsing it takes microseconds.
SMALL_APPEND_BYTES = 64 * 1024


class RenderedFile(InSession, FileNode):
    """A file whose bytes are one of ``LoadedSession``'s cached renderings."""

    __slots__ = ("_session_file",)

    tier = RENDERED
    rendering: ClassVar[str]

    def __init__(self, ctx: MountContext, key: tuple[str, ...]) -> None:
        super().__init__(ctx, key)
        self._session_file: Path | None = None  # see `session_file`

    def session_file(self) -> Path:
        """The session's file, worked out once per node where it follows from the
        names alone: the node lives as long as the kernel holds the inode, and a warm
        ``grep -l WORD sessions/*/*/transcript.md`` opens each one again (a `Path`
        made per open cost more than the stat of it)."""
        if self._session_file is not None:
            return self._session_file
        path = self.ctx.index.session_path(self.project, self.stem)
        if self.ctx.index.session_paths_fixed:
            self._session_file = path
        return path

    def what(self) -> str:
        """The rendering this file shows (`sessionfs.view.renderings.render_source`)."""
        return self.rendering

    def prerenderer(self) -> Prerenderer | None:
        """The render workers that record this rendering's size (and, for a
        transcript, make it) while the session is not loaded in the daemon."""
        return self.ctx.renders

    async def content(self) -> bytes:
        session = await self.session()
        return await self.ctx.sessions.render(session, self.what())

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns

    async def open(self, flags: int) -> OpenFile:
        if opened_for_writing(flags):
            raise WriteRejected(errno.EACCES, f"{self.what()}: a rendering, read-only")
        session = await self.session()
        data = await self.ctx.sessions.render(session, self.what())
        return BytesHandle(data, version=(session.file_state, session.version))

    async def listing_stat(self) -> Stat:
        recorded = self.recorded_stat()
        if recorded is not None:
            return recorded
        session = await self.session()
        cached = session.cached(self.what())
        if cached is not None:
            return Stat(len(cached), session.mtime_ns)
        return Stat(0, session.mtime_ns, exact=False)  # listing a dir renders nothing

    async def stat(self) -> Stat:
        recorded = self.recorded_stat()
        return recorded if recorded is not None else await super().stat()

    def unloaded_file(self) -> tuple[Path, FileIdentity] | None:
        """The session file and its identity now (one stat) when the mount keeps
        renderings of files (the render cache) and the daemon holds nothing better:
        then sizes and bytes come from there, without parsing the session here. A
        parsed session, one with this rendering in memory, or one holding a leaf moved
        through the mount (which the file does not have) answers from memory; a
        dehydrated one has nothing the file lacks."""
        if self.prerenderer() is None or self.ctx.sessions.noted(self.project, self.stem):
            return None
        loaded = self.ctx.sessions.peek(self.project, self.stem)
        if loaded is not None and (
            loaded.manager is not None
            or loaded.pinned_leaf is not None
            or loaded.cached(self.what()) is not None
        ):
            return None
        path = self.session_file()
        try:
            return path, FileIdentity.of(session_stat(path))
        except OSError:
            return None  # the loaded path answers (ENOENT, or a session it finds)

    def served_unloaded(self) -> bool:
        """Whether a stat right now needs no session loaded in the daemon."""
        return self.recorded_stat() is not None

    def recorded_stat(self) -> Stat | None:
        """The exact stat from what a render worker recorded of this rendering's size
        for the file as it is now (no work), if the session is not loaded."""
        found = self.unloaded_file()
        if found is None:
            return None
        path, identity = found
        renders = self.prerenderer()
        record = renders.known(path, identity) if renders is not None else None
        size = record.sizes.get(self.what()) if record is not None else None
        return Stat(size, identity.mtime_ns) if size is not None else None


class HeaderFile(RenderedFile):
    __slots__ = ()

    rendering = "header.json"


class TitleFile(RenderedFile):
    """``title``: writing it and closing sets the title (``set_session_name(text,
    "user")``, an atomic rewrite that keeps every entry). It is written like a regular
    file (`EditHandle`): ``>`` replaces the title, ``>>`` appends to it (the newline
    between is cleaned away like any control character)."""

    __slots__ = ()

    rendering = "title"
    mode = 0o644
    saved_by_editors = True

    async def open(self, flags: int) -> OpenFile:
        if not opened_for_writing(flags):
            return await super().open(flags)
        self.refuse_while_agent_runs()  # at open: shells report it, not a close() error
        initial = b"" if flags & os.O_TRUNC else await self.content()
        return EditHandle(
            initial,
            self._commit,
            append=bool(flags & os.O_APPEND),
            too_big=_title_too_big,
            on_error=self.record_refusal,
        )

    async def setattr(self, attr: Any, fields: Any) -> None:
        await allow_truncate_to_zero(self, attr, fields)

    async def _commit(self, data: bytes) -> None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise WriteRejected(errno.EINVAL, "title: not UTF-8 text") from None
        await self.apply_write(
            lambda m: session_writer.set_title(m, text), done=lambda title: f"title: {title}"
        )


def _title_too_big(size: int) -> None:
    if size > TITLE_LIMIT:
        raise WriteRejected(errno.EFBIG, f"title: more than {TITLE_LIMIT} bytes")


class TranscriptFile(RenderedFile):
    """``transcript.md``: while the session is not loaded in the daemon, its stat and
    reads come from the render cache exactly as ``transcripts/<project>/<stem>.md``'s do
    (a worker renders it once, ``pread``s of the cache file serve it): ``ls -l`` or
    ``cat`` of a session's transcript parses nothing in the daemon."""

    __slots__ = ()

    rendering = "transcript.md"

    def kernel_tier(self) -> CacheTier:
        """`WATCHED` like ``transcripts/<project>/<stem>.md`` when the watch sees every
        change of the session file (it drops this name's attributes and pages too); a
        change made through the mount (an append, a leaf moved) drops them as for every
        file of the session. A warm ``grep -l WORD sessions/*/*/transcript.md`` then
        costs no lookup or getattr per session."""
        watch = self.ctx.watch
        if watch is None or not watch.covers(self.project):
            return self.tier
        return WATCHED if own_local_file(self.ctx, self.stem, self.session_file()) else self.tier

    def served_unloaded(self) -> bool:
        return self.unloaded_file() is not None

    async def stat(self) -> Stat:
        found = self.unloaded_file()
        if found is None:
            return await super().stat()
        path, identity = found
        record = await self._refusal_recorded(
            transcript_record(self.ctx, path, identity, self.prerenderer())
        )
        return Stat(record.transcript_size, identity.mtime_ns)

    async def open(self, flags: int) -> OpenFile:
        found = None if opened_for_writing(flags) else self.unloaded_file()
        if found is None:
            return await super().open(flags)
        return await self._refusal_recorded(open_transcript(self.ctx, *found, self.prerenderer()))

    async def _refusal_recorded(self, work: Awaitable[T]) -> T:
        """``work``'s outcome; a rendering refused (``EFBIG``: too big to hold, and no
        room for it in the cache dir) is named in this session's ``ctl`` too."""
        try:
            return await work
        except WriteRejected as exc:
            await self.record_refusal(exc)
            raise


class ContextFile(TranscriptFile):
    """``context.json``: rendered in the daemon from the loaded session, except for a
    session file too big for that (`SessionCache.largest_renderable`): then served as
    ``transcript.md`` is, from the cache dir, where a worker writes it a message at a
    time (`sessionfs.view.streamed_render`)."""

    __slots__ = ()

    rendering = "context.json"

    def prerenderer(self) -> Prerenderer | None:
        return self.ctx.context_renders

    def unloaded_file(self) -> tuple[Path, FileIdentity] | None:
        found = super().unloaded_file()
        if found is None:
            return None
        path, identity = found
        size = identity.size
        if path.name.endswith(ZSTD_SUFFIX):
            # A compressed file by its text, as the listing learnt it (in its thread:
            # this is the event loop, asked at every stat); not learnt for the file as
            # it is now (changed since), the loaded path answers, in a thread.
            ref = self.ctx.index.session_if_known(self.project, self.stem)
            text = None
            if isinstance(ref, SessionRef):
                text = ref.text_if_known(identity.size, identity.mtime_ns)
            if text is None:
                return None
            size = text.size
        if size <= self.ctx.sessions.largest_renderable():
            return None
        return found


class TranscriptHtmlFile(TranscriptFile):
    """``transcript.html``: the conversation as a page (`sessionfs.view.render_html`),
    served unloaded from the pages' workers and cache dir as ``transcript.md`` is from
    the transcripts' (a mount without them renders it in the daemon)."""

    __slots__ = ()

    rendering = "transcript.html"

    def kernel_tier(self) -> CacheTier:
        return self.tier  # the watch drops transcript.md only

    def prerenderer(self) -> Prerenderer | None:
        return self.ctx.page_renders


class BranchPageFile(RenderedFile):
    """``branches/<tip>.html``: the page of the branch ending at entry ``<tip>``."""

    __slots__ = ()

    def what(self) -> str:
        return f"{BRANCHES_DIR}/{self.key[-1]}"


class BranchesDir(SessionListing):
    """``branches/``: one page per branch of the tree (`sessionfs.view.branch_pages`),
    which ``transcript.html``'s branch points link to."""

    __slots__ = ()

    async def children(self) -> Sequence[tuple[str, Node]]:
        session = await self.session()
        cached = session.listings.get(self.key)
        if cached is None:
            names = await self.ctx.sessions.run(session, session.branch_page_names)
            cached = [(name, BranchPageFile(self.ctx, self.child_key(name))) for name in names]
            session.listings[self.key] = cached
        return cached

    async def lookup(self, name: str) -> Node | None:
        return next((node for listed, node in await self.children() if listed == name), None)


class TreeFile(RenderedFile):
    __slots__ = ()

    rendering = "tree.txt"


class TreeSvgFile(RenderedFile):
    """``tree.svg``: the tree as a picture (`sessionfs.view.render_svg`)."""

    __slots__ = ()

    rendering = "tree.svg"


class StatsFile(RenderedFile):
    __slots__ = ()

    rendering = "stats.json"


class SessionCtl(InSession, CommandFile):
    """``ctl``: status on read; commands on write, run as each line arrives
    (`sessionfs.writes.session_commands`): ``branch``, ``reset``, ``summary``, ``fork``,
    ``extract``, ``flush``."""

    __slots__ = ()

    saved_by_editors = True

    async def listing_stat(self) -> Stat:
        return Stat(0, (await self.session()).mtime_ns, exact=False)

    async def content(self) -> bytes:
        session = await self.session()
        send_pairs = self._send_status()

        def status() -> bytes:
            persist_error = session.persist_error()
            return status_text(
                [
                    ("id", session.header().get("id")),
                    ("file", str(session.ref.path)),
                    ("version", session.header().get("version", 1)),
                    ("leaf", session.leaf_id()),
                    ("entries", session.entry_count()),
                    ("needs_rewrite", session.needs_rewrite()),
                    ("persist_error", str(persist_error) if persist_error else None),
                    *self.more_status(session),
                    ("last_result", session.last_result),
                    ("last_error", session.last_error),
                    *send_pairs,
                ]
            )

        return await self.ctx.sessions.run(session, status)

    def more_status(self, session: LoadedSession) -> list[tuple[str, object]]:
        """Lines a kind of session adds to its status (worker thread, under its lock)."""
        return []

    def _send_status(self) -> list[tuple[str, str | None]]:
        """``send: idle`` or ``send: running pid N since <time>``, and the last run's
        status (nothing on a tree that runs no agents)."""
        runs = self.ctx.runs
        if runs is None:
            return []
        run = runs.active(self.session_key)
        return [
            ("send", run.describe() if run is not None else "idle"),
            ("send_last", runs.last_status(self.session_key)),
        ]

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns

    async def _run(self, data: bytes) -> None:
        commands = parse_session_commands(data)
        dirs = self.session_dirs(*(c.target for c in commands))
        for command in commands:

            def run(manager: Any, command: SessionCommand = command) -> CommandResult:
                return run_session_command(manager, command, session_dirs=dirs)

            await self.apply_write(
                run, leaf=_leaf_effect(command), done=lambda result: describe(result, self.ctx)
            )


def _leaf_effect(command: SessionCommand) -> LeafEffect:
    if command.name in ("branch", "reset"):
        return "moved"
    return "recorded" if command.name == "summary" else "kept"


class LeafLink(InSession, LinkNode):
    """``leaf -> entries/<leafId>.json``; absent while the leaf is null."""

    __slots__ = ()

    async def target(self) -> str:
        session = await self.session()

        def leaf_name() -> str | None:
            return session.name_for_id(session.leaf_id())

        known = session.cached_leaf_name() if not session.lock.locked() else UNKNOWN
        if known is UNKNOWN:
            name = await self.ctx.sessions.run(session, leaf_name)
        else:
            name = known if isinstance(known, str) else None
        if name is None:
            raise refuse(errno.ENOENT)
        return f"entries/{name}"

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns


class AppendDir(InSession, DirNode):
    """``append/``: a drop box for new entries; always lists empty. Each file created
    here is parsed and appended when it is closed (`AppendFile`)."""

    __slots__ = ()

    tier = VOLATILE
    mode = 0o755
    stat_fixed = True  # the mount's own dir: its mode and owner follow the session file
    # The kernel looks a new name up twice before it creates it (the second time to
    # revalidate what the first found); a remembered absence answers the second.
    absent_timeout = 1.0

    async def lookup(self, name: str) -> Node | None:
        return None

    async def create(self, name: str, flags: int, mode: int) -> tuple[Node, OpenFile]:
        session = await self.session(load=False)  # ENOENT when it is gone; not read yet
        self.refuse_while_agent_runs()  # at create: shells report it, not a close() error
        shown = derived_permissions(session.access)  # as `InSession.permissions` would
        node = AppendFile(self.ctx, self.child_key(name), self.session_key, shown)
        return node, node.handle()


class AppendFile(InSession, FileNode):
    """A file being written into ``append/``: on close its content is parsed
    (`sessionfs.writes.append_parse`) and appended all-or-nothing, fsynced before ``close()``
    returns. Nothing is ever kept under its name.

    A ``*.stream`` file is a stream of JSON Lines instead: each ``write()`` appends the
    complete lines it ends, fsynced before it returns (`LineBatchHandle`), so a
    long-lived writer pays one round trip per entry rather than an open, a write and a
    close."""

    __slots__ = ("_session_key", "_shown")

    tier = DROPBOX
    mode = 0o644
    invalidate_on_change = False  # never cached, never read
    gone_at_close = True

    def __init__(
        self,
        ctx: MountContext,
        key: tuple[str, ...],
        session_key: tuple[str, str],
        shown: Permissions,
    ) -> None:
        super().__init__(ctx, key)
        # Its dir's (`AppendDir.create` passes it): each file has a name of its own, so
        # deriving it from the key would parse a new key on every append.
        self._session_key = session_key
        # The session file's mode and owner as `create` found them, fresh: the file
        # lives while it is open, and its attributes are made right after (its create
        # reply) from these rather than by looking the session up again.
        self._shown = shown

    @property
    def session_key(self) -> tuple[str, str]:
        return self._session_key

    async def permissions(self) -> Permissions:
        return self._shown

    async def stat(self) -> Stat:
        return Stat(0, time.time_ns())

    def handle(self) -> OpenFile:
        kind = LineBatchHandle if is_line_stream_name(self.key[-1]) else BufferedWriteHandle
        return kind(self._commit, too_big=reject_oversize, on_error=self.record_refusal)

    async def open(self, flags: int) -> OpenFile:
        if not opened_for_writing(flags):
            raise refuse(errno.EACCES)  # a drop box: what goes in is read from entries/
        return self.handle()

    async def setattr(self, attr: Any, fields: Any) -> None:
        await allow_truncate_to_zero(self, attr, fields)

    async def _commit(self, data: bytes) -> None:
        self.refuse_while_agent_runs()  # before the content's checks, as any write
        ops = parse_append(self.key[-1], data)
        await self.apply_write(
            lambda m: session_writer.append_ops(m, ops),
            leaf="recorded",
            small=len(data) <= SMALL_APPEND_BYTES,
            done=_appended,
            appends=session_writer.appends_kind(ops),
        )


def _appended(result: session_writer.AppendResult) -> str:
    count = len(result.new_ids)
    return f"appended {count} {'entry' if count == 1 else 'entries'}; leaf: {result.leaf_id}"


class PendingLink(InSession, LinkNode):
    """A symlink made in the session dir under another name than ``leaf`` (GNU
    ``ln -sf`` makes one, then renames it over ``leaf``). Its target was checked
    when it was made; it lives in memory until renamed or removed."""

    __slots__ = ()

    invalidate_on_change = False  # readlink is never cached

    async def target(self) -> str:
        target = self.ctx.sessions.pending_links(self.project, self.stem).get(self.key[-1])
        if target is None:
            raise refuse(errno.ENOENT)
        return target


def session_children() -> dict[str, type[Node]]:
    return {
        "header.json": HeaderFile,
        "title": TitleFile,
        "entries": EntriesDir,
        "context.json": ContextFile,
        "transcript.md": TranscriptFile,
        "transcript.html": TranscriptHtmlFile,
        BRANCHES_DIR: BranchesDir,
        "leaf": LeafLink,
        "path": PathDir,
        "tree.txt": TreeFile,
        "tree.svg": TreeSvgFile,
        "labels": LabelsDir,
        "blobs": SessionBlobsDir,
        "append": AppendDir,
        "ctl": SessionCtl,
        "send": SendFile,
        "send.log": SendLogFile,
        "stats.json": StatsFile,
        SUBAGENTS: SubagentsDir,
        ARTIFACTS: ArtifactsDir,
    }


def project_key(project: str) -> tuple[str, ...]:
    """The key of the local ``sessions/<project>/`` (`Node.key`; a session dir's is
    `session_keys.mount_parts`)."""
    return ("sessions", project)


class SessionDir(ScratchHolder, DirNode):
    """``sessions/<project>/<stem>/``. Its stat comes from the listing (no full load).

    Its attributes are all the session file's: mtime, and the mode and owner
    (`derived_permissions`); a leaf moved through the mount changes none of them (the
    file is not written: the loaded session's mtime and mode stay the file's). So
    while the daemon's inotify watch sees every change of the file (`kernel_tier`),
    the kernel may keep them for long: a warm ``ls -l`` of 10,000 sessions then asks
    the daemon nothing.

    Writes here move the leaf: ``ln -s <target> leaf`` (no leaf yet), GNU ``ln -sfn``
    (a temporary link renamed over ``leaf``: see `PendingLink`), ``rm leaf``. Files
    made here are scratch files in memory (`sessionfs.fs.nodes.scratch`): an editor's
    save of ``title`` or ``ctl``, renamed over it, is one write of it.
    """

    __slots__ = ("_linked", "_seen", "_session_key", "_watchable", "ref", "ref_at")

    tier = STATIC
    mode = 0o755

    def __init__(
        self,
        ctx: MountContext,
        key: tuple[str, ...],
        ref: SessionRef | None,
        ref_at: float | None = None,
        linked: bool | None = None,
    ) -> None:
        super().__init__(ctx, key)
        self.ref = ref
        # a lookup's ref answers the stat right after it; a listing's is as old as it
        self.ref_at = time.monotonic() if ref_at is None else ref_at
        self._session_key: tuple[str, str] | None = None
        # the last stat `_fresh_ref` took, and when
        self._seen: tuple[SessionRef | None, float] | None = None
        # whether the session file is a symlink (the listing tells; None: not known yet)
        self._linked = linked
        # whether its file's changes raise events a watch sees (`_watched`); None: not
        # worked out yet
        self._watchable: bool | None = None

    @property
    def session_key(self) -> tuple[str, str]:
        # Parsed from the node's key once: every readdir of its project asks for it.
        if self._session_key is None:
            self._session_key = super().session_key
        return self._session_key

    def kernel_tier(self) -> CacheTier:
        """`WATCHED` when every change to the session file raises an event the watch
        sees (as for ``transcripts/<project>/<stem>.md``): a local top-level session
        of a watched project dir whose file is its own there, not a symlink. Its
        attributes are then made from a stat the watch vouches for (`_fresh_ref`)."""
        return WATCHED if self._watched() else self.tier

    def _watched(self) -> bool:
        # Asked several times per readdirplus entry: what cannot change is worked out
        # once per node, only whether the watch covers the project each time.
        watch = self.ctx.watch
        if watch is None:
            return False
        watchable = self._watchable
        if watchable is None:
            watchable = self._own_local_file()
            if watchable is None:
                return False  # gone: nothing to keep
            self._watchable = watchable
        return watchable and watch.covers(self.session_key[0])

    def _own_local_file(self) -> bool | None:
        """Whether the session is a top-level one of the local agent dir whose file is
        its own (not a symlink: one lstat unless the listing told); None: no file."""
        project, stem = self.session_key
        if self.ctx.prefix or "/" in stem:
            return False
        if self._linked is None:  # made by a lookup
            try:
                mode = os.lstat(self.ctx.index.session_path(project, stem)).st_mode
            except OSError:
                return None
            self._linked = not stat.S_ISREG(mode)
        return not self._linked

    async def stat(self) -> Stat:
        now = await self._file_now(self._watched())
        if now is None:
            raise refuse(errno.ENOENT)
        return Stat(0, now[0])

    async def permissions(self) -> Permissions:
        now = await self._file_now(self._watched())
        return derived_permissions(now[1] if now is not None else NO_ACCESS)

    async def _file_now(self, watched: bool) -> tuple[int, FileAccess] | None:
        """The session file's mtime, mode and owner as they are: `_fresh_ref`'s, or the
        loaded session's if it is fresh; None when there is no file. A watched one
        always answers from the file's stat the watch vouches for: a loaded session
        shows the same (the file's, as its last check saw it), and its check may be
        up to `FRESH_INTERVAL` older than a change the watch has seen already."""
        if not watched:
            loaded = self.ctx.sessions.loaded_fresh(self.project, self.stem)
            if loaded is not None:
                return loaded.mtime_ns, loaded.access
        ref = await self._fresh_ref(watched)
        return None if ref is None else (ref.mtime_ns, ref.access)

    async def _fresh_ref(self, watched: bool) -> SessionRef | None:
        """The session file as it is (`_known_ref`), else a new stat (one stat serves
        a getattr's stat and permissions, instead of one each)."""
        known = self._known_ref(watched)
        if known is not None:
            return known[0]
        now = time.monotonic()  # before the stat: a change after it is seen as later
        ref = await self.ctx.sessions.ref(self.project, self.stem)
        self._seen = (ref, now)
        return ref

    def _known_ref(self, watched: bool) -> tuple[SessionRef | None] | None:
        """The session file's stat this node holds if it still tells the file as it is,
        without a look: the listing's or the last one taken here, while the watch saw
        no change of the file since (`kernel_tier` `WATCHED`), else while it is at
        most `FRESH_INTERVAL` old. None when it has to look. ``watched``: `_watched`
        (asked once per request by the caller: several of these make one answer)."""
        if watched:
            watch = self.ctx.watch
            assert watch is not None
            project, stem = self.session_key
            seen = self._seen
            if seen is not None and watch.unchanged_since(project, stem, seen[1]):
                return (seen[0],)
            if self.ref is not None and watch.unchanged_since(project, stem, self.ref_at):
                return (self.ref,)
            return None
        now = time.monotonic()
        if self.ref is not None and now - self.ref_at <= FRESH_INTERVAL:
            return (self.ref,)  # the listing's stat: fresh enough
        seen = self._seen
        if seen is not None and now - seen[1] <= FRESH_INTERVAL:
            return (seen[0],)
        return None

    # A listing of 2,000 sessions takes longer than FRESH_INTERVAL to send: its entries
    # answer from the stat the listing took (no second and third stat of each file), and
    # once that is older than FRESH_INTERVAL the kernel is told not to cache it, so a
    # `stat` (`ls -l`) asks again and gets the file as it is now. A watched one
    # (`kernel_tier`) answers from the listing's stat, exactly, for as long as the watch
    # saw no change of the file: the kernel keeps it, and the watch drops it when the
    # file changes (a warm `ls -l` of 10,000 sessions then asks the daemon nothing).

    async def listing_view(self) -> tuple[Stat, Permissions]:
        if not self._watched():
            return await self.listing_stat(), await self.listing_permissions()
        now = await self._file_now(True)  # one look for both
        if now is None:
            raise refuse(errno.ENOENT)
        return Stat(0, now[0]), derived_permissions(now[1])

    async def listing_stat(self) -> Stat:
        if self.ref is None or self.ctx.sessions.loaded_fresh(self.project, self.stem):
            return await self.stat()
        fresh = time.monotonic() - self.ref_at <= FRESH_INTERVAL
        return Stat(0, self.ref.mtime_ns, exact=fresh)

    async def listing_permissions(self) -> Permissions:
        if self.ref is None:
            return await self.permissions()
        return derived_permissions(self.ref.access)

    def listing_settled(self) -> bool:
        # Watched: the stat it answers from is still the file's, loaded or not.
        # Else: the listing's stat is past FRESH_INTERVAL (shown inexact, for good), and
        # the session is not loaded (which would answer from memory instead).
        if self._watched():
            return self._known_ref(True) is not None
        return (
            self.ref is not None
            and time.monotonic() - self.ref_at > FRESH_INTERVAL
            and self.ctx.sessions.peek(*self.session_key) is None
        )

    async def _has_leaf(self) -> bool:
        session = await self.session()
        if not session.lock.locked():
            known = session.cached_leaf_name()  # the common case after a leaf move
            if known is not UNKNOWN:
                return known is not None
        return (
            await self.ctx.sessions.run(session, lambda: session.name_for_id(session.leaf_id()))
            is not None
        )

    def _has_artifacts(self) -> bool:
        """One lstat: ``artifacts/`` is shown only while the dir exists on disk."""
        return has_artifacts_dir(self.ctx.index.sessions_root, self.project, self.stem)

    def child_classes(self) -> dict[str, type[Node]]:
        """The names of a session dir and the node class of each (with an archive, a
        ``generations/`` too)."""
        if has_generations(self.ctx.index):
            return session_children() | {GENERATIONS: GenerationsDir}
        return session_children()

    async def children(self) -> list[tuple[str, Node]]:
        has_leaf = await self._has_leaf()
        has_artifacts = ARTIFACTS in self.child_classes() and self._has_artifacts()
        return [
            (name, cls(self.ctx, self.child_key(name)))
            for name, cls in self.child_classes().items()
            if (name != "leaf" or has_leaf) and (name != ARTIFACTS or has_artifacts)
        ] + self.scratch_rows()

    async def lookup(self, name: str) -> Node | None:
        cls = self.child_classes().get(name)
        if cls is None:
            if name in self.ctx.sessions.pending_links(self.project, self.stem):
                return PendingLink(self.ctx, self.child_key(name))
            return self.scratch_node(name)
        node = cls(self.ctx, self.child_key(name))
        if isinstance(node, RenderedFile) and node.served_unloaded():
            return node  # its stat comes from the render cache: nothing to load here
        rendering = getattr(cls, "rendering", None)  # about to be stat'ed: render it now
        # ENOENT if the session is gone or not one; an append needs it not read
        await self.session(warm=rendering, load=cls is not AppendDir)
        if name == "leaf" and not await self._has_leaf():
            return None
        if name == ARTIFACTS and not self._has_artifacts():
            return None
        return node

    # -- writes: the leaf ------------------------------------------------------------

    async def _branch(self, target: str) -> None:
        dirs = self.session_dirs(target)
        await self.apply_write(
            lambda m: session_writer.set_leaf_from_link(m, target, session_dirs=dirs),
            leaf="moved",
            memory_only=True,
            done=lambda entry_id: f"leaf: {entry_id}",
        )

    async def _check_target(self, target: str) -> None:
        await self.resolve_target(target, SESSION_DIR)

    async def symlink(self, name: str, target: str) -> Node:
        self.refuse_while_agent_runs()  # `ln -sfn`'s temporary link would move it later
        children = session_children()
        if name == "leaf":
            if await self._has_leaf():
                raise WriteRejected(errno.EEXIST, "ln -s leaf: there is a leaf (ln -sfn moves it)")
            await self._branch(target)
            return LeafLink(self.ctx, self.child_key(name))
        pending = self.ctx.sessions.pending_links(self.project, self.stem)
        if name in children or name in pending or self.scratch_node(name) is not None:
            raise WriteRejected(errno.EEXIST, f"ln -s {name}: {name} exists")
        if len(pending) >= MAX_PENDING_LINKS:
            raise WriteRejected(
                errno.ENOSPC, f"ln -s {name}: {MAX_PENDING_LINKS} temporary links are pending"
            )
        await self._check_target(target)  # a bad target fails at `ln`, not later
        self.ctx.sessions.set_pending_link(self.project, self.stem, name, target)
        return PendingLink(self.ctx, self.child_key(name))

    # -- writes: scratch files (`sessionfs.fs.nodes.scratch`) ----------------------------

    async def create(self, name: str, flags: int, mode: int) -> tuple[Node, OpenFile]:
        if name in self.child_classes():
            raise WriteRejected(errno.EPERM, f"{name}: a name of the session")
        if name in self.ctx.sessions.pending_links(self.project, self.stem):
            raise WriteRejected(errno.EEXIST, f"{name}: exists (a link)")
        return await self.create_scratch(name, mode)

    async def _save_over(self, name: str, new_name: str, data: bytes, flags: int) -> Node:
        """``mv <scratch file> new_name``: a write of ``title`` or ``ctl``, a leaf
        move, or (any other name) a renamed scratch file."""
        own = session_children().get(new_name)
        if own is None:
            exists = self.scratch_node(new_name) is not None
            if flags & RENAME_NOREPLACE and exists:
                raise WriteRejected(errno.EEXIST, f"mv {name} {new_name}: exists")
            self.ctx.sessions.set_pending_link(self.project, self.stem, new_name, None)
            return self.rename_scratch(name, new_name)
        if flags & RENAME_NOREPLACE and (new_name != "leaf" or await self._has_leaf()):
            raise WriteRejected(errno.EEXIST, f"mv {name} {new_name}: exists")
        if new_name == "leaf":
            await self._branch(link_text(name, new_name, data))
            moved: Node = LeafLink(self.ctx, self.child_key(new_name))
        else:
            moved = own(self.ctx, self.child_key(new_name))
            if not moved.saved_by_editors:
                raise WriteRejected(
                    errno.EPERM,
                    f"mv {name} {new_name}: only title and ctl take a file renamed over "
                    "them (leaf and labels/ a link target)",
                )
            await write_through(moved, data)
        self.remove_scratch(name)
        return moved

    async def _copy_away(self, name: str, new_name: str, flags: int) -> Node:
        """``mv title title~`` (vim's rename mode): ``title`` stays (it shows the
        session), ``title~`` is a scratch file holding what it holds now."""
        node = self.child_classes()[name](self.ctx, self.child_key(name))
        if not node.saved_by_editors or new_name in self.child_classes():
            raise WriteRejected(errno.EPERM, f"mv {name} {new_name}: the session's own names stay")
        if flags & RENAME_NOREPLACE and self.scratch_node(new_name) is not None:
            raise WriteRejected(errno.EEXIST, f"mv {name} {new_name}: exists")
        assert isinstance(node, FileNode)
        data = await node.content()
        self.ctx.sessions.set_pending_link(self.project, self.stem, new_name, None)
        return self.copy_to_scratch(data, new_name)

    async def rename(
        self, name: str, new_parent: DirNode, new_name: str, flags: int
    ) -> Node | None:
        refuse_unsupported_rename(self, name, new_parent, flags)
        scratch = self.scratch_data(name)
        if scratch is not None:
            return await self._save_over(name, new_name, scratch, flags)
        target = self.ctx.sessions.pending_links(self.project, self.stem).get(name)
        if target is None and name in self.child_classes():
            return await self._copy_away(name, new_name, flags)
        if target is None:
            raise WriteRejected(errno.ENOENT, f"mv {name}: no such file")
        if new_name == "leaf":
            if flags & RENAME_NOREPLACE and await self._has_leaf():
                raise WriteRejected(errno.EEXIST, f"mv {name} leaf: there is a leaf")
            await self._branch(target)
            moved: Node = LeafLink(self.ctx, self.child_key(new_name))
        elif new_name in session_children():
            raise WriteRejected(errno.EPERM, f"mv {name} {new_name}: a name of the session")
        else:
            self.remove_scratch(new_name)  # a link renamed over a scratch file replaces it
            self.ctx.sessions.set_pending_link(self.project, self.stem, new_name, target)
            moved = PendingLink(self.ctx, self.child_key(new_name))
        self.ctx.sessions.set_pending_link(self.project, self.stem, name, None)
        return moved

    async def unlink(self, name: str) -> None:
        if name == "leaf":
            await self.apply_write(
                session_writer.reset_leaf, leaf="moved", done="leaf: none", memory_only=True
            )
        elif name in self.ctx.sessions.pending_links(self.project, self.stem):
            self.ctx.sessions.set_pending_link(self.project, self.stem, name, None)
        elif self.remove_scratch(name):
            pass
        elif name in session_children():
            raise WriteRejected(errno.EPERM, f"rm {name}: the session's own files stay")
        else:
            raise WriteRejected(errno.ENOENT, f"rm {name}: no such file")


class SubagentsDir(InSession, DirNode):
    """``<session>/subagents/``: one full session dir per sub-agent session file (a
    ``*.jsonl`` with a header) in the session's artifacts dir; empty when none."""

    __slots__ = ()

    tier = STATIC

    async def stat(self) -> Stat:
        return Stat(0, (await self.session()).mtime_ns)

    #: the class of each sub-agent's session dir
    session_dir: ClassVar[type[SessionDir]]

    async def children(self) -> list[tuple[str, Node]]:
        refs = await trio.to_thread.run_sync(self.ctx.index.subagents_of, self.project, self.stem)
        return [(r.name, self.session_dir(self.ctx, self.child_key(r.name), r)) for r in refs]

    async def lookup(self, name: str) -> Node | None:
        if not is_valid_name(name):
            return None
        stem = child_stem(self.stem, name)
        loaded = self.ctx.sessions.loaded_fresh(self.project, stem)
        if loaded is not None:
            return self.session_dir(self.ctx, self.child_key(name), loaded.ref)
        ref = await self.ctx.sessions.ref(self.project, stem)
        if ref is None:
            return None
        return self.session_dir(self.ctx, self.child_key(name), ref)


class ProjectDir(DirNode):
    """``sessions/<project>/``: one dir per valid session file (4 KiB header reads)."""

    __slots__ = ()

    tier = STATIC

    async def stat(self) -> Stat:
        mtime = await project_mtime_ns(self.ctx.index, self.local_key[1])
        if mtime is None:
            raise refuse(errno.ENOENT)
        return Stat(0, mtime)

    #: the class of each session's dir
    session_dir: ClassVar[type[SessionDir]] = SessionDir

    async def children(self) -> list[tuple[str, Node]]:
        project = self.local_key[1]
        # A reused listing is known with one stat: no thread hop (a warm shell glob of
        # sessions/*/*/transcript.md lists every project dir)
        listing = self.ctx.index.reused_listing(project)
        if listing is None:
            listing = await trio.to_thread.run_sync(self.ctx.index.listing_of, project)
        at, links = listing.listed_at, listing.links
        return self.ctx.children_of_listing(
            self.key,
            listing,
            lambda: [
                (r.stem, self.session_dir(self.ctx, self.child_key(r.stem), r, at, r.stem in links))
                for r in listing.refs
            ],
        )

    async def lookup(self, name: str) -> Node | None:
        loaded = self.ctx.sessions.loaded_fresh(self.local_key[1], name)
        if loaded is not None:
            # Its ref is as old as the load: never taken for the file as it is now.
            return self.session_dir(self.ctx, self.child_key(name), loaded.ref, -math.inf)
        before = time.monotonic()  # the ref's stat is no older than this
        ref = await self.ctx.sessions.ref(self.local_key[1], name)
        if ref is None:
            return None
        return self.session_dir(self.ctx, self.child_key(name), ref, before)


SubagentsDir.session_dir = SessionDir  # defined after it: a session dir lists its sub-agents


class SessionsDir(ProjectsDir):
    """``sessions/``: the project dirs under ``<agent>/sessions``."""

    __slots__ = ()

    project_dir: ClassVar[type[ProjectDir]] = ProjectDir

    def project_node(self, name: str) -> Node:
        return self.project_dir(self.ctx, self.child_key(name))
