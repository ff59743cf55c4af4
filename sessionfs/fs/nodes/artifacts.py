"""``<session>/artifacts/``: the session's artifacts dir on disk, mirrored read-only.

The agents keep tool outputs (and sub-agent session files) in a dir named like the
session file without ``.jsonl`` (spec 13). The mirror shows it byte for byte: regular
files with their exact sizes and time stamps, read straight from disk as they are
read (never loaded whole); subdirectories; and symlinks whose target is relative and
stays inside the artifacts dir (every symlink the mount shows points inside the
mount). Everything else is left out, logged once: symlinks leading out of it
(absolute, or climbing out with ``..``), FIFOs, sockets, devices.

Every path is walked from the artifacts dir one name at a time with ``O_NOFOLLOW``,
so a dir swapped for a symlink on disk after it was listed cannot lead the mirror
out of the artifacts dir either. Writes are refused like everywhere else that is
read-only (``EPERM``/``EACCES``; ``EROFS`` under ``--read-only``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from sessionfs.fs.nodes.base import (
    STATIC,
    DirNode,
    FileNode,
    LinkNode,
    MountContext,
    Node,
    OpenFile,
    Permissions,
    Stat,
    exact_permissions,
    refuse,
)
from sessionfs.fs.nodes.fd_handle import FdReadHandle
from sessionfs.fs.nodes.in_session import InSession, opened_for_writing
from sessionfs.view.access import FileAccess
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_keys import ARTIFACTS, artifacts_dir, session_of_node_key

__all__ = ["ArtifactsDir", "has_artifacts_dir"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def has_artifacts_dir(sessions_root: Path, project: str, stem: str) -> bool:
    """Whether the session has an artifacts dir: a real dir (not a symlink to one)."""
    try:
        st = os.lstat(artifacts_dir(sessions_root, project, stem))
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


@contextmanager
def _dir_beneath(base: Path, relative: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of ``base/relative``, every step a real dir (``O_NOFOLLOW``)."""
    fd = os.open(base, _DIR_FLAGS)
    try:
        for name in relative:
            inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _link_stays_inside(base: Path, relative: tuple[str, ...], target: str) -> bool:
    """Whether a symlink at ``relative`` (inside the artifacts dir ``base``) to
    ``target`` can only ever lead inside the artifacts dir, checked twice:

    - by its text, in a way no later change on disk can undo: a ``..`` only at the
      start, at most as many as the dirs above the link, then only names. Each name
      is a real dir of the mirror or a link that passed this same check, so the
      kernel, resolving it in the mount, never climbs above the artifacts dir. (A
      ``..`` after a name is refused: the name may be a link to ``.``, which the
      text cannot tell, and ``s/s/../..`` then climbs further than it seems.)
    - against the real tree now (``os.path.realpath``): a link through a link that
      leads out is hidden too, rather than shown dangling.
    """
    if not target or target.startswith("/") or "\x00" in target:
        return False
    climbs, names = 0, 0
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            names += 1
        elif names:
            return False
        else:
            climbs += 1
    if climbs > len(relative) - 1:
        return False
    real_base = os.path.realpath(base)
    landing = os.path.realpath(os.path.join(base, *relative[:-1], target))
    return landing == real_base or landing.startswith(real_base.rstrip("/") + "/")


class _Item:
    """What one name in the artifacts dir is, as the mirror shows it."""

    __slots__ = ("st", "target")

    def __init__(self, st: os.stat_result, target: str | None = None) -> None:
        self.st = st
        self.target = target


class InArtifacts(InSession):
    """Mixin for nodes below ``<session>/artifacts``: where they are on disk."""

    __slots__ = ()

    #: the last lstat of this node's file (a listing's, or its own ``stat``'s)
    seen: _Item | None

    async def permissions(self) -> Permissions:
        """Its own file's mode and owner, within what the session file allows."""
        item = self.seen if self.seen is not None else await self.fresh_item()
        return await self.within_session(exact_permissions(FileAccess.of(item.st)))

    def relative(self) -> tuple[str, ...]:
        """This node's path inside the artifacts dir (``()`` for the dir itself)."""
        key = self.local_key
        found = session_of_node_key(key)
        if found is None or key[found[2]] != ARTIFACTS:
            raise RuntimeError(f"{self.key}: not in an artifacts dir")
        return key[found[2] + 1 :]

    def base(self) -> Path:
        return artifacts_dir(self.ctx.index.sessions_root, self.project, self.stem)

    def item(self, relative: tuple[str, ...]) -> _Item | None:
        """``relative``'s lstat (and link target), or ``None`` when the mirror does not
        show it (gone, a FIFO, a link leading out...). Synchronous: a few syscalls."""
        base = self.base()
        try:
            if not relative:
                st = os.lstat(base)
                return _Item(st) if stat.S_ISDIR(st.st_mode) else None
            with _dir_beneath(base, relative[:-1]) as fd:
                st = os.stat(relative[-1], dir_fd=fd, follow_symlinks=False)
                return self._item_in(fd, relative, st)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.ctx.index.skip(base.joinpath(*relative), exc)
            return None

    def _item_in(self, fd: int, relative: tuple[str, ...], st: os.stat_result) -> _Item | None:
        path = self.base().joinpath(*relative)
        if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
            return _Item(st)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(relative[-1], dir_fd=fd)
            if _link_stays_inside(self.base(), relative, target):
                return _Item(st, target)
            self.ctx.index.skip(path, f"a symlink leading out of the artifacts dir ({target})")
            return None
        self.ctx.index.skip(path, "not a file, dir or symlink")
        return None

    def node_for(self, name: str, item: _Item) -> Node:
        key = (*self.key, name)
        if stat.S_ISDIR(item.st.st_mode):
            return ArtifactsDir(self.ctx, key, item)
        if stat.S_ISLNK(item.st.st_mode):
            return ArtifactLink(self.ctx, key, item)
        return ArtifactFile(self.ctx, key, item)

    async def fresh_item(self) -> _Item:
        item = await trio.to_thread.run_sync(self.item, self.relative())
        if item is None:
            raise refuse(errno.ENOENT)
        return item


class ArtifactsDir(InArtifacts, DirNode):
    """``artifacts/`` itself and every dir below it."""

    __slots__ = ("seen",)

    tier = STATIC

    def __init__(self, ctx: MountContext, key: tuple[str, ...], seen: _Item | None = None) -> None:
        super().__init__(ctx, key)
        self.seen = seen

    async def stat(self) -> Stat:
        self.seen = await self.fresh_item()
        return Stat(0, self.seen.st.st_mtime_ns)

    async def children(self) -> list[tuple[str, Node]]:
        rows = await trio.to_thread.run_sync(self._list, self.relative())
        return [(name, self.node_for(name, item)) for name, item in rows]

    def _list(self, relative: tuple[str, ...]) -> list[tuple[str, _Item]]:
        rows = []
        try:
            with _dir_beneath(self.base(), relative) as fd:
                for name in sorted(os.listdir(fd)):
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        item = self._item_in(fd, (*relative, name), st)
                    except FileNotFoundError:
                        continue  # removed since the listing
                    if item is not None:
                        rows.append((name, item))
        except FileNotFoundError:
            raise refuse(errno.ENOENT) from None
        except OSError as exc:
            self.ctx.index.skip(self.base().joinpath(*relative), exc)
            raise refuse(errno.EACCES) from None
        return rows

    async def lookup(self, name: str) -> Node | None:
        item = await trio.to_thread.run_sync(self.item, (*self.relative(), name))
        return self.node_for(name, item) if item is not None else None


class ArtifactFile(InArtifacts, FileNode):
    """A regular file of the artifacts dir: exact size, read from disk on each read."""

    __slots__ = ("seen",)

    seen: _Item

    tier = STATIC

    def __init__(self, ctx: MountContext, key: tuple[str, ...], seen: _Item) -> None:
        super().__init__(ctx, key)
        self.seen = seen

    async def stat(self) -> Stat:
        self.seen = await self.fresh_item()
        return Stat(self.seen.st.st_size, self.seen.st.st_mtime_ns)

    async def listing_stat(self) -> Stat:
        return Stat(self.seen.st.st_size, self.seen.st.st_mtime_ns)  # lstat of the listing

    async def open(self, flags: int) -> OpenFile:
        if opened_for_writing(flags):
            raise WriteRejected(errno.EACCES, f"{self.display_path()}: the artifacts are read-only")
        relative = self.relative()
        try:
            fd = await trio.to_thread.run_sync(self._open_fd, relative)
        except FileNotFoundError:
            raise refuse(errno.ENOENT) from None
        except OSError as exc:
            self.ctx.index.skip(self.base().joinpath(*relative), exc)
            raise refuse(errno.EACCES) from None
        return FdReadHandle(fd)

    def _open_fd(self, relative: tuple[str, ...]) -> int:
        with _dir_beneath(self.base(), relative[:-1]) as parent:
            fd = os.open(relative[-1], _FILE_FLAGS, dir_fd=parent)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a FIFO since listed
                raise OSError(errno.EINVAL, "not a regular file")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd


class ArtifactLink(InArtifacts, LinkNode):
    """A symlink of the artifacts dir whose target stays inside it, shown as is."""

    __slots__ = ("seen",)

    seen: _Item

    tier = STATIC

    def __init__(self, ctx: MountContext, key: tuple[str, ...], seen: _Item) -> None:
        super().__init__(ctx, key)
        self.seen = seen

    async def target(self) -> str:
        item = await self.fresh_item()
        if item.target is None:
            raise refuse(errno.ENOENT)  # no longer a symlink: the kernel looks it up again
        return item.target

    async def mtime_ns(self) -> int:
        return self.seen.st.st_mtime_ns
