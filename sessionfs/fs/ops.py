"""The pyfuse3 adapter: inodes, handles and errno; it never knows what a session is.

Concurrency: pyfuse3 runs each request as a trio task, many at a time. This class
only touches its own tables (inode table, handle table) between awaits, so it needs no
locks; everything slow happens in nodes, which push core work into worker threads.

Inodes: a node's identity is its path in the mount (``Node.key``). The table gives a
key a number on first sight and keeps it while the kernel holds lookups on it
(``lookup``/``readdirplus`` add, ``forget`` subtracts); at zero the number is dropped.
Numbers are never reused, so ``generation`` can stay 0. A file written into ``append/``
(`Node.gone_at_close`) goes at its last release instead: nothing can reach it then.

Writes: every write-type request checks ``--read-only`` here (``EROFS``), then asks the
node; nodes refuse with ``EPERM`` unless they implement the operation. A refusal is a
`WriteRejected`: its errno is the answer, and the node the request was made to records
its reason (`Node.record_refusal`: the ``ctl`` of its session, or the root ``ctl``).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import queue
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pyfuse3

from sessionfs.fs.caller import caller_of
from sessionfs.fs.foreground import Foreground
from sessionfs.fs.kernel_sizes import KernelSizes
from sessionfs.fs.nodes.base import (
    IMMUTABLE,
    DirNode,
    Kind,
    LinkNode,
    Node,
    OpenFile,
    Permissions,
    Stat,
)
from sessionfs.fs.nodes.file_rows import FileRows
from sessionfs.fs.row_blocks import RowBlock, RowBlocks
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.refusal import WriteRejected

__all__ = ["DirHandle", "InodeTable", "Invalidator", "SessionFsOperations"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
T = TypeVar("T")

WRITE_BITS = 0o222
#: how many names of `Node.gone_at_close` files released go to the kernel at once
#: (`SessionFsOperations._released_gone_at_close`)
GONE_NAMES_BATCH = 64


def _errno_guard(fn: F) -> F:
    """Turn every failure into a ``FUSEError``: a bug or a hostile file answers one
    request with an error and never takes the mount down."""

    @functools.wraps(fn)
    async def wrapper(self: SessionFsOperations, *args: Any) -> Any:
        if self.debug:
            log.debug("%s%r", fn.__name__, args)
        self.foreground.started()
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except WriteRejected as exc:  # a refused write: its errno was decided where known
            raise pyfuse3.FUSEError(exc.errno) from None
        except (FileNotFoundError, NotADirectoryError):
            raise pyfuse3.FUSEError(errno.ENOENT) from None
        except PermissionError:
            raise pyfuse3.FUSEError(errno.EACCES) from None
        except OSError as exc:
            raise pyfuse3.FUSEError(exc.errno or errno.EIO) from None
        except Exception:
            log.exception("%s%r failed", fn.__name__, args)
            raise pyfuse3.FUSEError(errno.EIO) from None
        finally:
            self.foreground.finished()  # background work waits for a quiet moment

    return wrapper  # type: ignore[return-value]


#: `_absent_entry`'s answers by timeout: the same few, sent again (pyfuse3 copies an
#: answer into its reply as soon as the handler returns, so one object serves all)
_ABSENT: dict[float, pyfuse3.EntryAttributes] = {}


def _absent_entry(timeout: float) -> pyfuse3.EntryAttributes:
    """A lookup's answer that the name does not exist, which the kernel may remember
    for ``timeout`` seconds (inode 0: a negative entry; ENOENT is never remembered).
    Asked for every file written into ``append/`` (the lookup of its new name)."""
    attrs = _ABSENT.get(timeout)
    if attrs is None:
        attrs = _ABSENT[timeout] = pyfuse3.EntryAttributes()
        attrs.st_ino = 0
        attrs.entry_timeout = timeout
    return attrs


class InodeTable:
    """key <-> inode number and the live node per inode, with kernel lookup counts.

    A walk of a big corpus makes the kernel hold hundreds of thousands of inodes (every
    readdirplus entry counts as a lookup), so rows are kept small: the count lives on
    the node itself, and only changing (non-immutable) nodes are indexed per session
    for invalidation. The rows of a `FileRows` listing have no node and no row here
    until asked about: their numbers and counts are in `blocks`.
    """

    def __init__(self, root: Node) -> None:
        self._next = pyfuse3.ROOT_INODE + 1
        root.nlookup = 1
        self.by_key: dict[tuple[str, ...], int] = {root.key: pyfuse3.ROOT_INODE}
        self.nodes: dict[int, Node] = {pyfuse3.ROOT_INODE: root}
        # session (`Node.session_key`) -> inodes of changing nodes of that session
        self.by_session: dict[tuple[str, str], set[int]] = {}
        self.blocks = RowBlocks()

    def inode_for(self, node: Node) -> int:
        inode = self.by_key.get(node.key)
        if inode is None:
            listed = self.blocks.inode_of(node.key)
            if listed is not None:  # a row of a listing: its node is made when asked
                return listed
            inode = self._next
            self._next += 1
            self._name(node, inode)
        else:
            old = self.nodes.get(inode)
            if old is not None and old is not node:
                node.nlookup = old.nlookup
        self.nodes[inode] = node  # the newest description wins (fresh stat snapshots)
        return inode

    def node(self, inode: int) -> Node:
        node = self.nodes.get(inode)
        if node is None:
            node = self.blocks.node(inode)
        if node is None:
            raise pyfuse3.FUSEError(errno.ESTALE)
        return node

    def inode_of(self, key: tuple[str, ...]) -> int | None:
        """The number the kernel knows ``key`` by, if any."""
        inode = self.by_key.get(key)
        return inode if inode is not None else self.blocks.inode_of(key)

    def block_for(self, rows: FileRows) -> RowBlock:
        """The inode numbers of a listing's rows (`sessionfs.fs.row_blocks`)."""
        return self.blocks.block_for(rows, self._allocate)

    def _allocate(self, count: int) -> int:
        """``count`` consecutive new inode numbers; returns the first."""
        first = self._next
        self._next += count
        return first

    def move(self, old_key: tuple[str, ...], node: Node) -> None:
        """A rename: the inode the kernel knows under ``old_key`` now answers for
        ``node.key`` (the kernel moved its dentry; a node found by the old key would
        no longer exist). An inode that held the new name keeps its number until
        the kernel forgets it."""
        inode = self.by_key.pop(old_key, None)
        if inode is None:
            return
        old = self.nodes.get(inode)
        if old is not None and old.kind is not node.kind:
            # A file renamed over ``leaf`` is the symlink it names: the kernel may not
            # see an inode change its type, so the new name gets an inode of its own
            # (its dentry is looked up again: a scratch file's name is never cached).
            return
        if old is not None:
            node.nlookup = old.nlookup
        self.by_key[node.key] = inode
        self.nodes[inode] = node

    def _name(self, node: Node, inode: int) -> None:
        """``node``'s key now names ``inode`` (and its session knows it, if it is a file
        or link that changes: a dir's attributes are not dropped when its session
        changes, `SessionFsOperations.session_changed`)."""
        self.by_key[node.key] = inode
        if node.kind is Kind.DIR or node.tier is IMMUTABLE or not node.invalidate_on_change:
            return
        session = node.session_key
        if session is not None:
            self.by_session.setdefault(session, set()).add(inode)

    def remember(self, inode: int, node: Node) -> None:
        """One more kernel lookup of ``inode``, which `inode_for` gave ``node`` before
        the reply was made: counted on its node, or on its row of a listing's block
        (`sessionfs.fs.row_blocks`). A forget of the kernel's earlier lookups of it may
        have come in meanwhile and dropped it (the kernel let go of the inode while it
        looked the name up again: a ``drop_caches`` during a walk); the reply brings it
        back, with the one lookup the kernel holds now (issue 26: this was an EIO)."""
        held = self.nodes.get(inode)
        if held is None:
            if self.blocks.remember(inode):
                return
            self.nodes[inode] = held = node
            node.nlookup = 0
            if node.key not in self.by_key:
                self._name(node, inode)
        held.nlookup += 1

    def session_inodes(self, key: tuple[str, str], everything: bool) -> list[int]:
        """Inodes below one session dir: its changing files and links, or (rare) all of
        them, dirs included."""
        if not everything:
            return list(self.by_session.get(key, ()))
        return [inode for inode, node in self.nodes.items() if node.session_key == key]

    def forget(self, inode: int, count: int) -> None:
        node = self.nodes.get(inode)
        if node is None:
            self.blocks.forget(inode, count)
            return
        if inode == pyfuse3.ROOT_INODE:
            return
        node.nlookup -= count
        if node.nlookup <= 0:
            self.drop(inode)

    def drop(self, inode: int) -> Node | None:
        """Let go of ``inode``'s row and node (the kernel forgot it, or nothing can
        reach it any more: `Node.gone_at_close`); returns the node it had. A forget of
        it that comes later finds no row and does nothing (numbers are never reused)."""
        node = self.nodes.pop(inode, None)
        if node is None:
            return None
        if self.by_key.get(node.key) == inode:  # not if a rename gave the name away
            del self.by_key[node.key]
        session = node.session_key
        inodes = self.by_session.get(session) if session is not None else None
        if session is not None and inodes is not None:
            inodes.discard(inode)
            if not inodes:
                del self.by_session[session]
        return node


class Invalidator:
    """Tells the kernel to drop cached attributes, data or names, from a thread of its own.

    ``invalidate_inode`` may block until the kernel is done with the inode, which can
    wait for a request this daemon has yet to answer; calling it from the event loop
    could deadlock, so a dedicated thread does it. Entry (name) invalidations go the
    same way rather than through ``pyfuse3.invalidate_entry_async``, whose own thread
    logs an ERROR traceback for every request still queued when the mount goes away.

    ``shutdown()`` is called as soon as the FUSE session ends: from then on nothing is
    sent (the kernel has dropped everything anyway), queued requests are discarded, and
    an unmount logs no error.
    """

    def __init__(self) -> None:
        # A `SimpleQueue`: its put and get are C, where `queue.Queue`'s go through a
        # `threading.Condition` in Python; the event loop puts after each batch of the
        # watch's events, and a put that woke this thread took ~19 µs of the loop's
        # thread CPU (~11 µs now: timed around it during appends into append/).
        self._queue: queue.SimpleQueue[
            tuple[int, bool | bytes] | list[tuple[int, bytes]] | None
        ] = queue.SimpleQueue()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="invalidator", daemon=True)
        self._thread.start()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def invalidate(self, inode: int, attr_only: bool) -> None:
        """Drop the attributes (and unless ``attr_only`` the pages) of ``inode``."""
        if not self._closing.is_set():
            self._queue.put((inode, attr_only))

    def invalidate_name(self, parent_inode: int, name: bytes) -> None:
        """Drop the kernel's dentry ``name`` below ``parent_inode`` (if it has one)."""
        if not self._closing.is_set():
            self._queue.put((parent_inode, name))

    def invalidate_names(self, names: list[tuple[int, bytes]]) -> None:
        """`invalidate_name` of each (parent inode, name): one wake-up of the thread."""
        if not self._closing.is_set():
            self._queue.put(names)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            for inode, what in item if isinstance(item, list) else (item,):
                if self._closing.is_set():
                    break  # the session is gone: nothing left to drop
                self._send(inode, what)

    def _send(self, inode: int, what: bool | bytes) -> None:
        try:
            if isinstance(what, bytes):
                pyfuse3.invalidate_entry(inode, what)
            else:
                pyfuse3.invalidate_inode(inode, what)
        except OSError as exc:  # the kernel forgot it already, or is unmounting
            log.debug("invalidate(%d, %r): %s", inode, what, exc)
        except Exception:
            if not self._closing.is_set():
                log.exception("invalidate(%d, %r) failed", inode, what)

    def shutdown(self) -> None:
        """The FUSE session has ended: send nothing more."""
        self._closing.set()

    def stop(self) -> None:
        self.shutdown()
        self._queue.put(None)
        self._thread.join(timeout=5)


class DirHandle:
    """A directory listing snapshot: ``readdir`` offsets index into it, so entries
    added or removed meanwhile never make others skip or repeat. Taken at ``opendir``,
    or at the first ``readdir`` for a `DirNode.lists_at_first_read` dir (``rows`` is
    None until then)."""

    def __init__(
        self, rows: Sequence[tuple[str, Node]] | None, lister: DirNode | None = None
    ) -> None:
        self.rows = rows
        self.lister = lister

    async def listing(self) -> Sequence[tuple[str, Node]]:
        if self.rows is None:
            assert self.lister is not None
            rows = await self.lister.children()
            if self.rows is None:  # (a concurrent readdir of the handle took it first)
                self.rows = rows
        return self.rows


class SessionFsOperations(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(self, root: Node, *, read_only: bool, debug: bool = False) -> None:
        super().__init__()
        self.table = InodeTable(root)
        self.read_only = read_only
        self.debug = debug
        self.uid, self.gid = os.getuid(), os.getgid()
        self._handles: dict[int, OpenFile | DirHandle] = {}
        self._page_versions: dict[int, object] = {}  # inode -> version in the page cache
        # the size the kernel holds per changing file, and the snapshots read through
        # the page cache (fh -> inode): an open is direct_io when they do not fit
        self.sizes = KernelSizes()
        self._page_readers: dict[int, int] = {}
        # Inodes invalidated since the kernel last got attributes or pages for them:
        # it holds nothing to drop, so another change need not tell it again (a burst
        # of appends then costs one invalidation per file, not one per append).
        self._uncached: set[int] = set()
        # inode -> the node and the readdirplus attributes made for it while it was
        # `Node.listing_settled`: sent again while it is the same node and still settled
        self._listed_attrs: dict[int, tuple[Node, pyfuse3.EntryAttributes]] = {}
        # inode -> a `Node.stat_fixed` node, the permissions and read-only state its
        # attributes were made with, and those attributes: a getattr sends them again
        # while all three are the same
        self._fixed_attrs: dict[int, tuple[Node, Permissions, bool, pyfuse3.EntryAttributes]] = {}
        # session (`Node.session_key`) -> (parent inode, name) of each of its
        # `Node.released_with_session` nodes the kernel looked up by name: told to drop
        # them when the session is let go (`session_dehydrated`), as its listings' names
        self._looked_up: dict[tuple[str, str], set[tuple[int, bytes]]] = {}
        # The open handles of `Node.gone_at_close` files: fh -> inode, and inode -> how
        # many (a reopen through /proc/self/fd is one more), its dir's inode and its
        # name: at the last release the inode goes (`_released_gone_at_close`)
        self._gone_handles: dict[int, int] = {}
        self._gone_open: dict[int, tuple[int, int, bytes]] = {}
        self._gone_names: dict[tuple[int, bytes], None] = {}  # (parent, name) to drop
        self._next_handle = 1
        self.invalidator: Invalidator | None = None
        self.foreground = Foreground()

    # -- helpers ---------------------------------------------------------------------

    async def _attrs(
        self, node: Node, inode: int, listing: bool = False
    ) -> pyfuse3.EntryAttributes:
        if listing:
            st, shown = await node.listing_view()
        else:
            st = await node.stat()
            shown = await node.permissions()
        return self._made_attrs(node, inode, st, shown)

    def _made_attrs(
        self, node: Node, inode: int, st: Stat, shown: Permissions
    ) -> pyfuse3.EntryAttributes:
        """`_attrs` from the node's stat and permissions."""
        self._uncached.discard(inode)
        attrs = pyfuse3.EntryAttributes()
        attrs.st_ino = inode
        attrs.generation = 0
        tier = node.kernel_tier()
        attrs.entry_timeout = tier.entry_timeout
        attrs.attr_timeout = tier.attr_timeout if st.exact else 0
        mode = node.mode & shown.mask
        if self.read_only or node.read_only_reason() is not None:
            mode &= ~WRITE_BITS
        attrs.st_mode = node.kind._value_ | mode  # (`.value` is a property: 2 calls)
        attrs.st_nlink = 2 if node.kind is Kind.DIR else 1
        attrs.st_uid = self.uid if shown.uid is None else shown.uid
        attrs.st_gid = self.gid if shown.gid is None else shown.gid
        attrs.st_rdev = 0
        size = st.size
        if self._size_matters(node):
            size = self.sizes.size_to_tell(inode, size)
            self.sizes.told(inode, size, trusted=attrs.attr_timeout > 0)
        attrs.st_size = size
        attrs.st_blksize = 4096
        attrs.st_blocks = (size + 511) // 512
        attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = st.mtime_ns
        return attrs

    async def _fixed_node_attrs(self, node: Node, inode: int) -> pyfuse3.EntryAttributes:
        """`_attrs` of a `Node.stat_fixed` node (``append/``, asked after every file
        made in it): those made last time for the same node while its permissions and
        read-only state are the same, else new ones."""
        shown = await node.permissions()
        read_only = self.read_only or node.read_only_reason() is not None
        kept = self._fixed_attrs.get(inode)
        if kept is not None and kept[0] is node and kept[1] is shown and kept[2] is read_only:
            self._uncached.discard(inode)  # what _made_attrs does besides making them
            return kept[3]
        attrs = self._made_attrs(node, inode, await node.stat(), shown)
        self._fixed_attrs[inode] = (node, shown, read_only, attrs)
        return attrs

    async def _listing_attrs(self, node: Node, inode: int) -> pyfuse3.EntryAttributes:
        """`_attrs` for a readdirplus entry: those made last time for the same node
        while it was settled (`Node.listing_settled`), else new ones."""
        if not node.listing_settled():
            self._listed_attrs.pop(inode, None)
            return await self._attrs(node, inode, listing=True)
        kept = self._listed_attrs.get(inode)
        if kept is not None and kept[0] is node and not self.sizes.has_readers(inode):
            self._uncached.discard(inode)  # what _attrs does besides making them
            if self._size_matters(node):
                self.sizes.told(inode, kept[1].st_size, trusted=kept[1].attr_timeout > 0)
            return kept[1]
        attrs = await self._attrs(node, inode, listing=True)
        self._listed_attrs[inode] = (node, attrs)
        return attrs

    @staticmethod
    def _size_matters(node: Node) -> bool:
        """Whether an open snapshot of ``node`` could be cut at the size the kernel
        holds (`sessionfs.fs.kernel_sizes`): a file read through the page cache whose
        content may change (not ``entries/``, blobs, or a direct_io file)."""
        return node.kind is Kind.FILE and not node.tier.fixed and not node.tier.direct_io

    @staticmethod
    def _as_seen_by(node: Node, ctx: pyfuse3.RequestContext) -> Node:
        """``node`` as the request's caller sees it: only ``per_caller`` nodes care
        (reading ``/proc`` for every request would cost every ``ls``)."""
        return node.seen_by(caller_of(ctx)) if node.per_caller else node

    def _dir(self, inode: int) -> DirNode:
        node = self.table.node(inode)
        if not isinstance(node, DirNode):
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return node

    def _writable(self, node: Node) -> None:
        reason = node.read_only_reason()
        if reason is not None:  # another agent's sessions: read-only whatever the flags
            exc = WriteRejected(errno.EROFS, f"{node.display_path()}: {reason}")
            node.ctx.record_root_refusal(exc)  # the root's ctl says why (agents: no other)
            exc.recorded = False  # and a session's own ctl, where it has one (an archived)
            raise exc
        if self.read_only:
            raise WriteRejected(errno.EROFS, "the mount is read-only (--read-only)")

    async def _write_to(self, node: Node, request: Callable[[], Awaitable[T]]) -> T:
        """A write-type request to ``node``: ``EROFS`` under ``--read-only`` or in a
        read-only tree, else the node's answer; a refusal is recorded by ``node`` for
        its ``ctl``."""
        try:
            self._writable(node)
            return await request()
        except WriteRejected as exc:
            await node.record_refusal(exc)
            raise

    async def _open_for_writing(
        self, node: Node, flags: int, ctx: pyfuse3.RequestContext
    ) -> OpenFile:
        if node.owner_only_writes and ctx.uid != self.uid:
            raise WriteRejected(
                errno.EACCES,
                f"{node.display_path()}: only the user who mounted (uid {self.uid}) may "
                "write it: it runs a program as that user",
            )
        return await node.open(flags)

    def _add_handle(self, handle: OpenFile | DirHandle) -> int:
        fh = self._next_handle
        self._next_handle += 1
        self._handles[fh] = handle
        return fh

    def _file_handle(self, fh: int) -> OpenFile:
        handle = self._handles.get(fh)
        if not isinstance(handle, OpenFile):
            raise pyfuse3.FUSEError(errno.EBADF)
        return handle

    async def _reply_entry(self, node: Node) -> pyfuse3.EntryAttributes:
        """Attributes for a new directory entry; counts one kernel lookup."""
        inode = self.table.inode_for(node)
        attrs = await self._attrs(node, inode)
        self.table.remember(inode, node)
        return attrs

    def session_changed(self, session: LoadedSession, full_reload: bool) -> None:
        """``SessionCache`` listener: drop what the kernel cached for a changed session.

        Appends change only the volatile files (the immutable entry files stay valid);
        a replaced or shrunk file may have changed anything, so then everything goes.
        """
        if self.invalidator is None or self.invalidator.closing:
            return
        # Not a dir but on a full reload (`InodeTable.session_inodes` lists no dir
        # otherwise): a dir's only changing attribute is its mtime, trusted for at most
        # its attr timeout anyway, or (a watched session dir) dropped by the watch when
        # the write reaches the file (a leaf move changes none of its attributes);
        # dropping it here would cost a getattr before every later request below it
        # (permission checks).
        for inode in self.table.session_inodes(session.key, everything=full_reload):
            node = self.table.nodes.get(inode)
            if node is None:
                continue
            if node.tier is IMMUTABLE and not full_reload:
                continue
            if inode in self._uncached:
                continue
            self._uncached.add(inode)
            self.invalidator.invalidate(inode, attr_only=node.kind is not Kind.FILE)
        if full_reload:  # a listing's rows too: their names may now mean other entries
            self.table.blocks.detach(session.key)
            for inode in self.table.blocks.inodes_of(session.key):
                self._uncached.add(inode)
                self.invalidator.invalidate(inode, attr_only=False)

    def key_changed(self, key: tuple[str, ...], name_too: bool, inode: int | None = None) -> None:
        """`sessionfs.fs.session_watch` listener: what ``key`` shows changed on disk,
        so drop the kernel's attributes and pages of it, and its name when the file
        was made, renamed or removed (a name the kernel holds may now be wrong).
        ``inode``: its number, when the caller knows it."""
        inode = inode if inode is not None else self.table.inode_of(key)
        if inode is not None:
            self._listed_attrs.pop(inode, None)  # made before the change: never again
            self._fixed_attrs.pop(inode, None)
        if self.invalidator is None or self.invalidator.closing:
            return
        if inode is not None:
            # Not skipped when already uncached: a reply racing the change may have
            # been cached since (the watch's repeat is for exactly that).
            self._uncached.add(inode)
            self.invalidator.invalidate(inode, attr_only=False)
        parent = self.table.by_key.get(key[:-1])
        if name_too and parent is not None:
            self.invalidator.invalidate_name(parent, os.fsencode(key[-1]))

    def subtree_changed(
        self, prefix: tuple[str, ...], keep_name: Callable[[str], bool] | None = None
    ) -> None:
        """`sessionfs.fs.session_watch` listener: anything below ``prefix`` may have
        changed unseen (a watch was lost, events overflowed): drop all of it, but the
        names directly below ``prefix`` that ``keep_name`` says are still there."""
        depth = len(prefix)
        for key in [k for k in self.table.by_key if len(k) > depth and k[:depth] == prefix]:
            kept = keep_name is not None and len(key) == depth + 1 and keep_name(key[-1])
            self.key_changed(key, name_too=not kept)
        for key, inode in self.table.blocks.keys_below(prefix):  # listings' rows
            self.key_changed(key, name_too=True, inode=inode)

    def session_dehydrated(self, session: LoadedSession) -> None:
        """``SessionCache`` listener: a session left the parsed set, so let the kernel
        drop the dentries of its ``entries/`` and ``path/`` children too.

        A walk of a big corpus would otherwise leave hundreds of thousands of inodes
        pinned by the kernel's dentry cache, each a row in the inode table, and the
        daemon's memory would grow with the corpus instead of with ``--cache-mb``.
        Open files are not affected; a later access simply looks the name up again.

        Names looked up one by one (a script that listed every ``entries/`` first, then
        opens each path after its session was let go) are in no listing: those recorded
        by `lookup` go the same way, else each would pin an inode and its node for good.
        """
        looked_up = self._looked_up.pop(session.key, ())
        self.table.blocks.stop_lookups(session.key)
        if self.invalidator is None or self.invalidator.closing:
            return
        for dir_key, rows in session.listings.items():
            parent = self.table.by_key.get(dir_key)
            if parent is None:
                continue
            names = rows.names if isinstance(rows, FileRows) else [name for name, _ in rows]
            for name in names:
                self.invalidator.invalidate_name(parent, os.fsencode(name))
        for parent, looked_up_name in looked_up:
            if parent in self.table.nodes:  # else the kernel dropped the dir and all in it
                self.invalidator.invalidate_name(parent, looked_up_name)

    def kernel_inodes(self) -> int:
        """How many inodes the kernel holds, each a live node here or a listing's row
        (the root ``ctl``)."""
        return len(self.table.nodes) + self.table.blocks.live()

    # -- reading ---------------------------------------------------------------------

    @_errno_guard
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self._dir(parent_inode)
        if parent.absent_timeout and name != b"." and name != b"..":
            # a dir where no name exists (``append/``: the new name of every file
            # written into it is looked up first): nothing to ask it
            return _absent_entry(parent.absent_timeout)
        text = os.fsdecode(name)
        if text == ".":
            child: Node | None = parent
        elif text == "..":
            child = self.table.nodes.get(self.table.by_key.get(parent.key[:-1], 0))
            if child is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
        else:
            child = await parent.lookup(text)
        if child is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        attrs = await self._reply_entry(self._as_seen_by(child, ctx))
        if child.released_with_session:
            self._record_lookup(child, parent_inode, name)
        return attrs

    def _record_lookup(self, child: Node, parent_inode: int, name: bytes) -> None:
        session = child.session_key
        if session is not None:
            self._looked_up.setdefault(session, set()).add((parent_inode, name))

    @_errno_guard
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self._as_seen_by(self.table.node(inode), ctx)
        if node.stat_fixed:
            return await self._fixed_node_attrs(node, inode)
        return await self._attrs(node, inode)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            self.table.forget(inode, count)
            if inode not in self.table.nodes:
                self._let_go(inode)

    def _let_go(self, inode: int) -> None:
        """Drop what is kept about an inode the table let go of."""
        self._page_versions.pop(inode, None)
        self.sizes.forget(inode)
        self._uncached.discard(inode)
        self._listed_attrs.pop(inode, None)
        self._fixed_attrs.pop(inode, None)

    @_errno_guard
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        node = self.table.node(inode)
        if not isinstance(node, LinkNode):
            raise pyfuse3.FUSEError(errno.EINVAL)
        return os.fsencode(await node.target())

    @_errno_guard
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self._dir(inode)
        if node.lists_at_first_read:
            return self._add_handle(DirHandle(None, node))
        return self._add_handle(DirHandle(await node.children()))

    @_errno_guard
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        handle = self._handles.get(fh)
        if not isinstance(handle, DirHandle):
            raise pyfuse3.FUSEError(errno.EBADF)
        rows = await handle.listing()
        if isinstance(rows, FileRows):
            await self._readdir_rows(rows, start_id, token)
            return
        encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
        for offset in range(start_id, len(rows)):
            name, node = rows[offset]
            inode = self.table.inode_for(node)
            try:
                attrs = await self._listing_attrs(node, inode)
            except pyfuse3.FUSEError:
                continue  # vanished since the listing was taken
            # (os.fsencode, without its checks: two Python calls fewer a row)
            if not pyfuse3.readdir_reply(token, name.encode(encoding, errors), attrs, offset + 1):
                break
            self.table.remember(inode, node)

    async def _readdir_rows(self, rows: FileRows, start: int, token: pyfuse3.ReaddirToken) -> None:
        """`readdir` of a `FileRows` listing: one node's attributes made (the first
        row's), the others' the same but for number, size and time, from the arrays;
        the rows' inodes are a block of numbers (`sessionfs.fs.row_blocks`)."""
        if start >= len(rows):
            return
        first = rows.node(start)
        assert not self._size_matters(first), "FileRows are links or files of a fixed tier"
        try:  # what every row shares (mode, owner, timeouts): the first row's attributes
            attrs = await self._attrs(first, 0, listing=True)  # (numbered per row below)
        except pyfuse3.FUSEError:
            return  # the session vanished since the listing was taken
        block = self.table.block_for(rows)  # after the await: no forget in between
        names, sizes, mtimes, uncached = rows.names, rows.sizes, rows.mtimes_ns, self._uncached
        encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
        base = block.spans[0][1] if len(block.spans) == 1 else None  # the usual block
        stop = start
        for row in range(start, len(rows)):
            inode = base + row if base is not None else block.inode(row)
            size = sizes[row]
            attrs.st_ino = inode
            attrs.st_size = size
            attrs.st_blocks = (size + 511) // 512
            attrs.st_atime_ns = attrs.st_mtime_ns = attrs.st_ctime_ns = mtimes[row]
            name = names[row].encode(encoding, errors)  # os.fsencode, without its checks
            if not pyfuse3.readdir_reply(token, name, attrs, row + 1):
                break
            if uncached:
                uncached.discard(inode)
            stop = row + 1
        block.remember_rows(start, stop)

    @_errno_guard
    async def releasedir(self, fh: int) -> None:
        self._handles.pop(fh, None)

    @_errno_guard
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self._as_seen_by(self.table.node(inode), ctx)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            handle = await self._write_to(node, lambda: self._open_for_writing(node, flags, ctx))
        else:
            handle = await node.open(flags)
        fh = self._add_handle(handle)
        if node.gone_at_close and inode in self._gone_open:  # (reopened: /proc/self/fd)
            count, parent, name = self._gone_open[inode]
            self._gone_open[inode] = (count + 1, parent, name)
            self._gone_handles[fh] = inode
        direct = node.tier.direct_io or not self._page_cache_ok(node, inode, fh, handle)
        keep = node.tier.keep_cache and not direct
        if direct:
            self._page_versions.pop(inode, None)  # the open drops the pages it has
        else:
            self._uncached.discard(inode)  # its pages may be cached from now on
            if keep and handle.version is not None:
                # Reuse the kernel's pages only if they hold this very version.
                keep = self._page_versions.get(inode) == handle.version
                self._page_versions[inode] = handle.version
        return pyfuse3.FileInfo(fh=fh, direct_io=direct, keep_cache=keep)

    def _page_cache_ok(self, node: Node, inode: int, fh: int, handle: OpenFile) -> bool:
        """Whether ``handle`` may be read through the page cache: not a snapshot of a
        changing file (`_size_matters`), or one the kernel's size for the inode will
        not cut (`KernelSizes.page_cache_ok`; then it is counted as such a reader).
        Otherwise the kernel is told to drop the old size, so that the next ``stat``
        shows the new one and later opens use the page cache again."""
        if handle.size is None or not self._size_matters(node):
            return True
        if self.sizes.page_cache_ok(inode, handle):
            self.sizes.opened(inode, handle)
            self._page_readers[fh] = inode
            return True
        if self.invalidator is not None:
            self.invalidator.invalidate(inode, attr_only=True)
        return False

    @_errno_guard
    async def read(self, fh: int, off: int, size: int) -> bytes:
        data = await self._file_handle(fh).read(off, size)
        inode = self._page_readers.get(fh)
        if inode is not None:
            self.sizes.read_returned(inode, off, size, len(data))
        return data

    @_errno_guard
    async def flush(self, fh: int) -> None:
        if self.read_only:
            # No handle of a read-only mount was opened for writing, so no close has
            # anything to commit. ENOSYS makes the kernel stop sending FLUSH for good:
            # every close of a read is one round trip fewer (issue 26: a quarter of
            # the requests of a cold read of every entries/*.json).
            raise pyfuse3.FUSEError(errno.ENOSYS)
        await self._file_handle(fh).flush()

    @_errno_guard
    async def release(self, fh: int) -> None:
        handle = self._handles.pop(fh, None)
        gone = self._gone_handles.pop(fh, None)
        if gone is not None:
            self._released_gone_at_close(gone)
        inode = self._page_readers.pop(fh, None)
        if isinstance(handle, OpenFile):
            if inode is not None:
                self.sizes.released(inode, handle)
            await handle.release()

    @_errno_guard
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = 4096
        data.f_namemax = 255
        return data

    # -- writing: EROFS under --read-only, else the node decides (EPERM by default) --

    @_errno_guard
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        # Only a handle opened for writing gets here: ``open`` checked ``--read-only``.
        self.foreground.wrote()
        return await self._file_handle(fh).write(off, buf)

    @_errno_guard
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: pyfuse3.RequestContext
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self._dir(parent_inode)
        node, handle = await self._write_to(
            parent, lambda: parent.create(os.fsdecode(name), flags, mode)
        )
        attrs = await self._reply_entry(node)
        fh = self._add_handle(handle)
        if node.gone_at_close:
            inode = attrs.st_ino
            # (two files of one name open at once share the inode the kernel holds)
            count = self._gone_open[inode][0] if inode in self._gone_open else 0
            self._gone_open[inode] = (count + 1, parent_inode, name)
            self._gone_handles[fh] = inode
        return pyfuse3.FileInfo(fh=fh, direct_io=node.tier.direct_io), attrs

    def _released_gone_at_close(self, inode: int) -> None:
        """One handle of a `Node.gone_at_close` file released: at the last, its inode
        goes (nothing can reach it now) and the kernel is told to drop its name, which
        it would otherwise keep, and the inode, until memory runs short. Its later
        forget of the inode finds nothing to do."""
        count, parent, name = self._gone_open.pop(inode)
        if count > 1:
            self._gone_open[inode] = (count - 1, parent, name)
            return
        self.table.drop(inode)
        self._let_go(inode)
        if self.invalidator is None:
            return
        # Sent in batches: one wake-up of the invalidator's thread per file cost the
        # event loop ~7 us, and the kernel's forgets come batched too. Until a batch
        # is full the kernel holds its few names; a name written again replaces its
        # own (the kernel drops the old inode when the lookup finds it absent).
        gone = self._gone_names
        gone[parent, name] = None
        if len(gone) >= GONE_NAMES_BATCH:
            self.invalidator.invalidate_names(list(gone))
            gone.clear()

    @_errno_guard
    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        node = self.table.node(inode)
        found = self._handles.get(fh) if fh is not None else None
        handle = found if isinstance(found, OpenFile) else None

        async def change() -> None:
            # ftruncate of a handle that holds the content it will write (``title``
            # opened by an editor, a scratch file) changes that content; the
            # rest (a truncate by path, mode, owner, times) is the node's
            if fields.update_size and handle is not None and await handle.truncate(attr.st_size):
                return  # ftruncate(2) asks for nothing else
            await node.setattr(attr, fields)

        await self._write_to(node, change)
        return await self._attrs(node, inode)

    @_errno_guard
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self._dir(parent_inode)
        node = await self._write_to(
            parent, lambda: parent.symlink(os.fsdecode(name), os.fsdecode(target))
        )
        return await self._reply_entry(node)

    @_errno_guard
    async def rename(
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        old_dir, new_dir = self._dir(parent_inode_old), self._dir(parent_inode_new)
        old_name, new_name = os.fsdecode(name_old), os.fsdecode(name_new)
        moved = await self._write_to(
            old_dir, lambda: old_dir.rename(old_name, new_dir, new_name, flags)
        )
        if moved is None:
            moved = await new_dir.lookup(new_name)
        if moved is not None:
            self.table.move(old_dir.child_key(old_name), moved)

    @_errno_guard
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._dir(parent_inode)
        await self._write_to(parent, lambda: parent.unlink(os.fsdecode(name)))

    @_errno_guard
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._dir(parent_inode)
        await self._write_to(parent, lambda: parent.rmdir(os.fsdecode(name)))

    @_errno_guard
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self._dir(parent_inode)
        node = await self._write_to(parent, lambda: parent.mkdir(os.fsdecode(name), mode))
        return await self._reply_entry(node)

    @_errno_guard
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self._dir(parent_inode)
        node = await self._write_to(parent, lambda: parent.mknod(os.fsdecode(name)))
        return await self._reply_entry(node)

    @_errno_guard
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent, node = self._dir(new_parent_inode), self.table.node(inode)
        linked = await self._write_to(parent, lambda: parent.link(node, os.fsdecode(new_name)))
        return await self._reply_entry(linked)

    @_errno_guard
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self._file_handle(fh).flush()
