"""The node model: one small class per kind of path, and what they share.

A node is a cheap, short-lived description of one path in the mount (``key`` = the
path as a tuple of names, which is also its identity in the inode table). Nodes look
things up again on every call, so a node the kernel still remembers for a session
that has since vanished answers ``ENOENT`` instead of stale data.

Write operations exist on every node and refuse with ``EPERM`` by default; the nodes
that accept writes (issue 5: ``leaf``, ``append/``, ``labels/``, ``title``, ``ctl``)
override exactly the ones they support. ``--read-only`` is decided once, in ``ops``.

A write is refused one way only: `WriteRejected` (errno + a reason). ``ops`` answers
the errno and has the node record the reason (`Node.record_refusal`): in its
session's ``ctl`` for a node of a session, else in the root ``ctl``. ``refuse`` is for
everything else (a name that does not exist, a bad handle).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

import pyfuse3

from sessionfs.fs.scratch import ScratchFiles
from sessionfs.view.refusal import WriteRejected

if TYPE_CHECKING:
    from sessionfs.fs.agent_branching import BranchingCommand
    from sessionfs.fs.agent_command import AgentCommand
    from sessionfs.fs.agent_runs import AgentRuns
    from sessionfs.fs.search_indexer import SearchIndexer
    from sessionfs.view.access import Caller, FileAccess
    from sessionfs.view.agent_index import AgentIndex
    from sessionfs.view.history import HistoryView
    from sessionfs.view.prerender import Prerenderer
    from sessionfs.view.search_view import SearchView
    from sessionfs.view.session_cache import SessionCache

__all__ = [
    "BLOB",
    "DROPBOX",
    "IMMUTABLE",
    "MOUNT_OWN",
    "PER_CALLER",
    "RENDERED",
    "SCRATCH",
    "STATIC",
    "VOLATILE",
    "WATCHED",
    "AgentViews",
    "BytesHandle",
    "CacheTier",
    "DirNode",
    "FileNode",
    "Kind",
    "LinkNode",
    "MountContext",
    "Node",
    "OpenFile",
    "Permissions",
    "Stat",
    "WatchedProjects",
    "allow_truncate_to_zero",
    "derived_permissions",
    "exact_permissions",
    "refuse",
    "session_mode_mask",
]


class Kind(Enum):
    DIR = stat.S_IFDIR
    FILE = stat.S_IFREG
    LINK = stat.S_IFLNK


@dataclass(frozen=True)
class CacheTier:
    """How long the kernel may trust what it was told about a node."""

    name: str
    entry_timeout: float  # name -> inode
    attr_timeout: float  # size, mtime, mode
    keep_cache: bool  # keep page cache across opens
    direct_io: bool  # bypass the page cache: every read comes to the daemon
    #: what a name shows never changes while the kernel holds it: an open needs no
    #: check that the kernel's size is the snapshot's (`sessionfs.fs.kernel_sizes`)
    fixed: bool = False


# The tiers, declared once. Which node uses which:
# IMMUTABLE - entries/<id>.json: content for a name never changes (a replaced file
#             invalidates them explicitly).
# BLOB      - blobs/<sha> (root and per session): content for a name never changes,
#             but a chmod of the blob file must show within a second (its mode is the
#             blob's own, `Node.permissions`).
# STATIC    - directories and the README: structure that changes rarely; short enough
#             that new sessions and projects show up within a second.
# RENDERED  - context.json, transcript.md, tree.txt, stats.json, header.json, title:
#             change with appends, read often. The page cache is kept across opens
#             only while the rendering's version is the one the kernel has cached
#             (``OpenFile.version``, checked by ``ops.open``); a change drops it, and
#             attributes are invalidated as soon as the change is seen. An open whose
#             snapshot's size is not the one the kernel holds reads it ``direct_io``
#             (`sessionfs.fs.kernel_sizes`), so a read is never cut at an old size.
# VOLATILE  - ctl, history files, symlinks and the per-session dirs: change at any
#             moment; direct_io makes every read current.
# DROPBOX   - files being written into append/: their name is never cached, so once
#             closed the name is gone again (append/ always lists empty) and the next
#             file of the same name is a new create, not an open of a stale inode. The
#             open file's attributes may be kept: a writer's fstat (Python's open()
#             does one) then costs no round trip.
# WATCHED   - transcripts/<project>/<stem>.md and sessions/<project>/<stem>/ while
#             their project dir is watched (`sessionfs.fs.session_watch`): a change of
#             the session file drops the kernel's copy at once, so names and
#             attributes may be kept for long: a warm `grep -r` costs only the open
#             and the page-cache reads, a warm `ls -l` of a project nothing.
IMMUTABLE = CacheTier("immutable", 3600.0, 3600.0, keep_cache=True, direct_io=False, fixed=True)
BLOB = CacheTier("blob", 3600.0, 1.0, keep_cache=True, direct_io=False, fixed=True)
STATIC = CacheTier("static", 1.0, 1.0, keep_cache=False, direct_io=False)
RENDERED = CacheTier("rendered", 1.0, 0.5, keep_cache=True, direct_io=False)
VOLATILE = CacheTier("volatile", 1.0, 0.5, keep_cache=False, direct_io=True)
DROPBOX = CacheTier("dropbox", 0.0, 1.0, keep_cache=False, direct_io=True)
WATCHED = CacheTier("watched", 3600.0, 3600.0, keep_cache=True, direct_io=False)
# PER_CALLER - search/<words>: what it holds depends on who reads it (`Node.per_caller`),
#             so the kernel keeps no attributes (each caller's stat gets its own size)
#             and no pages (one user's results never serve another).
PER_CALLER = CacheTier("per-caller", 1.0, 0.0, keep_cache=False, direct_io=True)
# SCRATCH   - files an editor makes in a session dir (`sessionfs.fs.scratch`): held in
#             the daemon's memory, changed by every write, renamed over control files.
#             No name is cached (a name renamed over ``leaf`` must be looked up again,
#             as the symlink it now is), no attribute, no page.
SCRATCH = CacheTier("scratch", 0.0, 0.0, keep_cache=False, direct_io=True)


@dataclass(frozen=True, slots=True)
class Stat:
    size: int
    mtime_ns: int
    #: False for a listing's placeholder: the kernel is told not to cache it, so any
    #: ``stat`` asks again and gets the exact size (see ``Node.listing_stat``).
    exact: bool = True


class WatchedProjects(Protocol):
    """What nodes ask of the daemon's inotify watch (`sessionfs.fs.session_watch`)."""

    def covers(self, project: str) -> bool:
        """Whether every change to ``project``'s session files is seen at once."""
        ...

    async def scan_new_projects(self) -> None:
        """Look at the files of project dirs never looked at, off the event loop."""
        ...

    def newest_sessions(self) -> list[tuple[str, str]] | None:
        """``(project, stem)`` of every session file, newest first; None: not known."""
        ...

    def unchanged_since(self, project: str, stem: str, since: float) -> bool:
        """Whether ``<project>/<stem>.jsonl`` surely did not change after ``since``
        (``time.monotonic()``): a stat taken then still tells the file as it is."""
        ...


class AgentViews(Protocol):
    """What ``agents/`` needs from the daemon's wiring: one context per other agent
    shown (`sessionfs.fs.agent_mounts`)."""

    def agent_names(self) -> list[str]: ...

    def agent_context(self, name: str) -> MountContext | None: ...

    def search_views(self) -> list[tuple[str, SearchView]]:
        """Each agent's search index, which the root ``search/`` spans too."""
        ...


@dataclass
class MountContext:
    """Everything nodes share: the agent dir's views and the mount's settings."""

    index: AgentIndex
    sessions: SessionCache
    history: HistoryView
    started_ns: int
    root_last_result: str | None = None
    root_last_error: str | None = None
    #: where the mount is, when known: absolute symlink targets into a session and
    #: ``last_result`` paths use it; without it results are relative to the mount root
    mountpoint: str | None = None
    #: transcripts rendered in worker processes and kept in ``--cache-dir``
    #: (``transcripts/``); set by the daemon
    renders: Prerenderer | None = None
    #: ``transcript.html`` rendered the same way, into a cache dir of its own, on the
    #: same worker processes (only what is asked for; None: rendered in the daemon)
    page_renders: Prerenderer | None = None
    #: ``context.json`` of session files too big for the daemon to render, rendered
    #: a message at a time by the same workers into a cache dir of its own
    context_renders: Prerenderer | None = None
    #: ``search/``'s index and the indexer's progress (root ``ctl``); None: no search
    search: SearchView | None = None
    #: with an archive: the index of its copies of this agent dir's sessions, whose
    #: hits are those in sessions only the archive holds (`archive_search_view`)
    archive_search: SearchView | None = None
    #: with an archive: its mirror's disk use, for the root ``ctl`` (`LocalArchive`)
    archive_ctl: Callable[[], list[tuple[str, object]]] | None = None
    #: the indexers of every index the root ``search/`` reads (set by the daemon): a
    #: search waits briefly for their first builds
    search_indexers: list[SearchIndexer] = field(default_factory=list)
    #: where this agent dir's tree starts in the mount: ``()`` for a local mount,
    #: ``("machines", <name>)`` for one machine of a store mount (`Node.local_key`)
    prefix: tuple[str, ...] = ()
    #: the agent runs ``send`` starts; None: this tree runs no agents (its ``send``
    #: refuses with ``EROFS``: session kinds that are read-only by nature)
    runs: AgentRuns | None = None
    #: what ``send`` runs, or why nothing can be run (a sentence for ``ctl``)
    #: (another agent's sessions: `BranchingCommand`, how its real agent continues one)
    agent_command: AgentCommand | BranchingCommand | str | None = None
    #: why every write to this context's nodes is refused (``EROFS``) whatever the
    #: flags: another agent's sessions under ``agents/``. None: the node decides.
    read_only_reason: str | None = None
    #: the context of the mount's root, whose ``ctl`` shows refusals of nodes outside
    #: any session (None: this one is the root's)
    root: MountContext | None = None
    #: the other agents shown under ``agents/`` (`sessionfs.fs.nodes.agents`); None:
    #: no ``agents/`` at all
    agents: AgentViews | None = None
    #: which projects' session files are watched for changes (`WATCHED`); None: none
    watch: WatchedProjects | None = None
    #: per dir whose children are made from a reusable listing (``sessions/<project>/``):
    #: that listing and the children made from it (`children_of_listing`)
    listed_children: dict[tuple[str, ...], tuple[object, Hashable, list[tuple[str, Node]]]] = field(
        default_factory=dict
    )
    #: files editors made in session dirs, held in memory (`sessionfs.fs.scratch`);
    #: the root context's serves the whole mount
    scratch: ScratchFiles = field(default_factory=ScratchFiles)
    #: how many inodes the kernel holds of the whole mount (set by the daemon; the
    #: root ``ctl``'s ``kernel_inodes``: each is a node the daemon keeps alive)
    kernel_inodes: Callable[[], int] | None = None

    def record_root_refusal(self, exc: WriteRejected) -> None:
        """Keep a refused write's reason for the root ``ctl`` (``last_error``)."""
        (self.root or self).root_last_error = exc.reason
        exc.recorded = True

    def children_of_listing(
        self,
        key: tuple[str, ...],
        listing: object,
        make: Callable[[], list[tuple[str, Node]]],
        variant: Hashable = None,
    ) -> list[tuple[str, Node]]:
        """The children of the dir ``key``, made from ``listing`` by ``make``: the same
        nodes again while the listing is the same object (one reused while the dir is
        unchanged) and ``variant`` (what else ``make`` depends on) is equal. A warm
        ``ls`` of 10,000 sessions then makes no node, and the nodes keep what they
        worked out for the last listing (their attributes)."""
        cached = self.listed_children.get(key)
        if cached is not None and cached[0] is listing and cached[1] == variant:
            return cached[2]
        rows = make()
        if rows:
            self.listed_children[key] = (listing, variant, rows)
        else:  # nothing worth keeping (a project dir removed must not pin its last nodes)
            self.listed_children.pop(key, None)
        return rows

    def mount_path(self, *parts: str) -> str:
        """A path in the mount (``parts`` from this agent dir's tree): absolute when
        the mountpoint is known."""
        relative = "/".join((*self.prefix, *parts))
        return f"{self.mountpoint.rstrip('/')}/{relative}" if self.mountpoint else relative


@dataclass(frozen=True, slots=True)
class Permissions:
    """The most a node may show (its ``mode & mask``) and whose it is: the owner and
    group of the file on disk it shows, or the daemon's (``None``). With the mount's
    ``default_permissions`` the kernel then lets each caller do exactly what these
    say (`sessionfs.view.access`)."""

    mask: int = 0o777
    uid: int | None = None
    gid: int | None = None


#: a node that shows no one file's data: the mount's own structure
MOUNT_OWN = Permissions()


def session_mode_mask(file_mode: int) -> int:
    """The permission bits a session dir may show for a session file of ``file_mode``:
    each class may read (and enter dirs) only if the file lets it read; only the owner
    may write, and only if the file lets the owner write (nodes' own modes are
    owner-writable at most)."""
    mask = 0
    if file_mode & 0o400:
        mask |= 0o500
    if file_mode & 0o200:
        mask |= 0o200
    if file_mode & 0o040:
        mask |= 0o050
    if file_mode & 0o004:
        mask |= 0o005
    return mask


#: `derived_permissions` by (mode, uid, gid): a few modes and owners
_DERIVED: dict[tuple[int, int, int], Permissions] = {}
_DERIVED_LIMIT = 256


def derived_permissions(access: FileAccess | None) -> Permissions:
    """For a node made from a file's data (a session dir, a transcript, ``history/``):
    readable by whoever can read the file (`session_mode_mask`), owned by its owner.
    No file (gone, never there): nothing to protect, the mount's own.

    Asked per getattr in a session (twice per file written into ``append/``): kept by
    a tuple of ints, whose hash is C's, where an ``lru_cache`` by the `FileAccess`
    would call its dataclass ``__hash__`` and ``__eq__`` in Python each time."""
    if access is None:
        return MOUNT_OWN
    key = (access.mode, access.uid, access.gid)
    known = _DERIVED.get(key)
    if known is None:
        if len(_DERIVED) >= _DERIVED_LIMIT:
            _DERIVED.clear()
        known = _DERIVED[key] = Permissions(session_mode_mask(access.mode), access.uid, access.gid)
    return known


def exact_permissions(access: FileAccess) -> Permissions:
    """For a node that is a file or dir on disk (a blob, an artifact): its own mode
    bits and owner (minus the write bits the node's mode never has)."""
    return Permissions(access.mode, access.uid, access.gid)


def refuse(code: int) -> pyfuse3.FUSEError:
    """A failure that is not a refused write (those are `WriteRejected`)."""
    return pyfuse3.FUSEError(code)


async def allow_truncate_to_zero(node: Node, attr: Any, fields: Any) -> None:
    """``setattr`` of a file whose content is replaced on close (title, ctl, send,
    append files): the truncate of ``> file`` (size 0, with its time stamps) is
    accepted and changes nothing by itself; so is a chmod or chown to the mode and
    owner it shows already (editors set them on the file they saved: vim after
    ``:w``). Any other mode or owner, or a truncate to another size, is ``EPERM``."""
    path = node.display_path()
    if getattr(fields, "update_size", False) and attr.st_size != 0:
        raise WriteRejected(errno.EPERM, f"{path}: can only be truncated to size 0")
    changes = {name: getattr(fields, f"update_{name}", False) for name in ("mode", "uid", "gid")}
    if not any(changes.values()):
        return
    shown = await node.permissions()
    now = {
        "mode": node.mode & shown.mask,
        "uid": os.getuid() if shown.uid is None else shown.uid,
        "gid": os.getgid() if shown.gid is None else shown.gid,
    }
    asked = {"mode": attr.st_mode & 0o7777, "uid": attr.st_uid, "gid": attr.st_gid}
    if any(changes[name] and asked[name] != now[name] for name in changes):
        raise WriteRejected(errno.EPERM, f"{path}: its mode and owner cannot be changed")


class OpenFile:
    """An open file handle. Read-only by default; writers override ``write``/``release``.

    ``version`` identifies the content for page-cache reuse (``RENDERED`` tier): equal
    versions mean equal bytes. ``None`` means "no claim". ``size``: how many bytes a
    snapshot taken at open holds (``None``: not a snapshot, e.g. a file read live).
    """

    version: object = None
    size: int | None = None

    async def read(self, offset: int, size: int) -> bytes:
        raise refuse(errno.EBADF)

    async def write(self, offset: int, data: bytes) -> int:
        raise refuse(errno.EBADF)

    async def flush(self) -> None:
        return None

    async def release(self) -> None:
        return None

    async def truncate(self, size: int) -> bool:
        """``ftruncate`` of this handle; False when the handle keeps no content of its
        own (the node's ``setattr`` then decides, as for a truncate by path)."""
        return False


class BytesHandle(OpenFile):
    """A snapshot of a rendered file taken at open: a reader never sees a half-update."""

    def __init__(self, data: bytes, version: object = None) -> None:
        self.data = data
        self.version = version
        self.size = len(data)

    async def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


class Node:
    __slots__ = ("ctx", "key", "nlookup")

    kind: Kind = Kind.FILE
    tier: CacheTier = STATIC
    #: whether the kernel must be told when its session changes. False for nodes whose
    #: name fixes what they show (links into entries/) or that nothing reads (files
    #: being dropped into append/): invalidating them would only cost time per write.
    invalidate_on_change: bool = True
    #: permission bits shown when the mount is writable (``--read-only`` drops the w bits)
    mode: int = 0o444
    #: only the uid that mounted may open it for writing, also under ``--allow-other``
    #: (``send``: writing it runs a program as that user)
    owner_only_writes: bool = False
    #: whether what it shows depends on who asks: ``ops`` then hands it the caller
    #: (`seen_by`) on every request, and tells the kernel to cache nothing of it
    per_caller: bool = False
    #: whether editors may save over it (``title``, ``ctl``): a scratch file renamed
    #: over it is one write of it, and renaming it away leaves it and a copy of it
    #: (`sessionfs.fs.nodes.scratch`)
    saved_by_editors: bool = False
    #: one of many per session (``entries/<id>.json``): the kernel is told to drop its
    #: name when its session is let go (`SessionFsOperations.session_dehydrated`), so
    #: the inode, and this node, go too; a walk of a corpus bigger than ``--cache-mb``
    #: then holds the nodes of the sessions in the cache, not of every session read
    released_with_session: bool = False
    #: nothing is kept under its name (a file written into ``append/``): once its last
    #: open handle is released nothing can reach it, as its name looks up absent, so
    #: ``ops`` drops its inode then and tells the kernel to drop the name; the kernel
    #: keeps a name of zero entry timeout until memory runs short, so the inode table
    #: would otherwise grow by a row and a node with every file written
    gone_at_close: bool = False
    #: ``stat`` answers the same for as long as the node lives, and its attributes
    #: change only with `permissions` and `read_only_reason` (a dir of the mount's
    #: own, like ``append/``, which the kernel asks about after every file made in
    #: it): a getattr sends the attributes made last time while those are the same
    stat_fixed: bool = False

    def __init__(self, ctx: MountContext, key: tuple[str, ...]) -> None:
        self.ctx = ctx
        self.key = key
        self.nlookup = 0  # kernel lookup count, kept by the inode table

    def __repr__(self) -> str:
        return f"{type(self).__name__}({'/'.join(self.key) or '/'})"

    @property
    def local_key(self) -> tuple[str, ...]:
        """The path from the root of this node's agent-dir tree (``key`` without the
        context's ``prefix``): what the nodes of a session parse for project and stem,
        so the same classes serve the local root and a store mount's ``machines/<m>/``."""
        return self.key[len(self.ctx.prefix) :]

    @property
    def session_key(self) -> tuple[str, str] | None:
        """The session this node shows part of (``LoadedSession.key``), if any: what
        the inode table groups by to tell the kernel about a changed session."""
        return None

    async def stat(self) -> Stat:
        return Stat(0, self.ctx.started_ns)

    def kernel_tier(self) -> CacheTier:
        """The tier whose timeouts the kernel is given now: ``tier``, unless the node
        knows it is watched for changes (`WATCHED`)."""
        return self.tier

    async def permissions(self) -> Permissions:
        """What this node may show at most, and whose it is. Nodes in a session dir
        follow the session file (``InSession``), blobs and artifacts their own file,
        ``history/`` the history db; the rest is the mount's own (``MOUNT_OWN``)."""
        return MOUNT_OWN

    async def listing_permissions(self) -> Permissions:
        """`permissions` for a directory listing (readdirplus), next to `listing_stat`:
        a node made from the listing may answer from what the listing saw."""
        return await self.permissions()

    def seen_by(self, caller: Caller) -> Node:
        """This node as ``caller`` sees it, for nodes whose content depends on who asks
        (``per_caller``: ``search/<words>`` shows only hits the caller may read)."""
        return self

    async def listing_stat(self) -> Stat:
        """Attributes for a directory listing (readdirplus). Nodes whose exact size is
        costly to know override this to answer a non-caching placeholder: ``find`` and
        ``grep -r`` only need names and types, and ``ls -l`` stats again anyway."""
        return await self.stat()

    async def listing_view(self) -> tuple[Stat, Permissions]:
        """`listing_stat` and `listing_permissions`, for one readdirplus entry (a node
        that learns both from one look at its file overrides this)."""
        return await self.listing_stat(), await self.listing_permissions()

    def listing_settled(self) -> bool:
        """Whether `listing_stat` and `listing_permissions` answer now what they
        answered for this node's last listing, without a look at anything: ``ops``
        then sends the attributes it made then once more (a warm ``ls`` of 10,000
        session dirs makes none)."""
        return False

    def display_path(self, *names: str) -> str:
        """This node's path in the mount (or a child's), as refusals name it."""
        return "/".join((*self.key, *names)) or "/"

    async def record_refusal(self, exc: WriteRejected) -> None:
        """Keep a refused write's reason where ``ctl`` shows it (``last_error``): the
        root ``ctl`` here; nodes of a session use that session's (`InSession`)."""
        if not exc.recorded:
            self.ctx.record_root_refusal(exc)

    def read_only_reason(self) -> str | None:
        """Why every write to this node is ``EROFS`` whatever the flags (None: none)."""
        return self.ctx.read_only_reason

    # -- writes: refused unless a node says otherwise (issue 5) ----------------------
    async def setattr(self, attr: Any, fields: Any) -> None:
        raise WriteRejected(errno.EPERM, f"{self.display_path()}: its attributes cannot be changed")

    async def open(self, flags: int) -> OpenFile:
        raise refuse(errno.EISDIR)


class DirNode(Node):
    __slots__ = ()

    kind = Kind.DIR
    mode = 0o555
    #: How long the kernel may remember that a name is not here (seconds): only for
    #: a dir where no name ever exists (``append/``), so remembering is always right
    #: (``ops`` answers a lookup in it without asking `lookup`).
    absent_timeout = 0.0
    #: Whether the listing is taken at the first ``readdir`` rather than at
    #: ``opendir``: for a dir whose listing cannot fail, so an open that reads nothing
    #: (``grep -r DIR`` opens its argument once before walking it) lists nothing.
    lists_at_first_read = False

    async def children(self) -> Sequence[tuple[str, Node]]:
        """The listing, in display order."""
        return []

    async def lookup(self, name: str) -> Node | None:
        """One child by name (may resolve names that are not listed, e.g. id prefixes)."""
        for child_name, node in await self.children():
            if child_name == name:
                return node
        return None

    def child_key(self, name: str) -> tuple[str, ...]:
        return (*self.key, name)

    async def create(self, name: str, flags: int, mode: int) -> tuple[Node, OpenFile]:
        raise WriteRejected(errno.EPERM, f"{self.display_path(name)}: no files can be created here")

    async def mkdir(self, name: str, mode: int) -> Node:
        raise WriteRejected(errno.EPERM, f"mkdir {self.display_path(name)}: no directories here")

    async def symlink(self, name: str, target: str) -> Node:
        raise WriteRejected(errno.EPERM, f"ln -s {self.display_path(name)}: no symlinks here")

    async def unlink(self, name: str) -> None:
        raise WriteRejected(errno.EPERM, f"rm {self.display_path(name)}: cannot be removed")

    async def rmdir(self, name: str) -> None:
        raise WriteRejected(errno.EPERM, f"rmdir {self.display_path(name)}: cannot be removed")

    async def rename(
        self, name: str, new_parent: DirNode, new_name: str, flags: int
    ) -> Node | None:
        """Rename a child; returns the node now under ``new_name`` when it is cheap to
        know (else ``ops`` looks it up)."""
        raise WriteRejected(errno.EPERM, f"mv {self.display_path(name)}: cannot be renamed")

    async def mknod(self, name: str) -> Node:
        """Device files and FIFOs have no meaning in the mount: refused everywhere."""
        raise WriteRejected(
            errno.EPERM, f"mknod {self.display_path(name)}: no device files or FIFOs"
        )

    async def link(self, node: Node, new_name: str) -> Node:
        raise WriteRejected(
            errno.EPERM, f"ln {self.display_path(new_name)}: no hard links in the mount (use ln -s)"
        )


class FileNode(Node):
    __slots__ = ()

    kind = Kind.FILE

    async def content(self) -> bytes:
        """The whole file; ``stat`` size and ``read`` both come from these bytes."""
        return b""

    async def stat(self) -> Stat:
        return Stat(len(await self.content()), await self.mtime_ns())

    async def mtime_ns(self) -> int:
        return self.ctx.started_ns

    async def open(self, flags: int) -> OpenFile:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise WriteRejected(errno.EACCES, f"{self.display_path()}: a read-only file")
        return BytesHandle(await self.content())


class LinkNode(Node):
    __slots__ = ()

    kind = Kind.LINK
    tier = VOLATILE
    mode = 0o777

    async def target(self) -> str:
        raise refuse(errno.ENOENT)

    async def stat(self) -> Stat:
        return Stat(len(os.fsencode(await self.target())), await self.mtime_ns())

    async def mtime_ns(self) -> int:
        return self.ctx.started_ns

    async def open(self, flags: int) -> OpenFile:
        raise refuse(errno.ELOOP)  # the kernel follows symlinks itself; never reached
