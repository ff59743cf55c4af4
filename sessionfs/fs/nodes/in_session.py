"""What every node below ``sessions/<project>/<stem>/`` shares: finding its session
(`InSession`), applying a write to it, and the rules of renames inside a session."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sessionfs.fs.nodes.base import (
    DirNode,
    MountContext,
    Permissions,
    derived_permissions,
    refuse,
)
from sessionfs.view.access import NO_ACCESS
from sessionfs.view.archived_index import archived_reason
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_cache import Appends, LeafEffect, NotASession
from sessionfs.view.session_keys import mount_parts, session_of_node_key
from sessionfs.writes import session_writer

__all__ = [
    "RENAME_EXCHANGE",
    "RENAME_NOREPLACE",
    "InSession",
    "opened_for_writing",
    "refuse_unsupported_rename",
]

T = TypeVar("T")


def opened_for_writing(flags: int) -> bool:
    return flags & os.O_ACCMODE != os.O_RDONLY


@functools.lru_cache(maxsize=4096)
def _session_key_of(key: tuple[str, ...], prefix_length: int) -> tuple[str, str]:
    """``(project, stem)`` of the innermost session dir holding the node at ``key``
    (its context's prefix ``prefix_length`` parts long): `InSession.session_key`."""
    found = session_of_node_key(key[prefix_length:])
    if found is None:  # only nodes below sessions/<project>/<stem> mix this in
        raise RuntimeError(f"{key}: not in a session dir")
    return found[0], found[1]


class InSession:
    """Mixin for nodes below ``sessions/<project>/<stem>`` (or a sub-agent's session
    dir below it, ``…/subagents/<name>``): finds their session, the innermost one."""

    __slots__ = ()

    key: tuple[str, ...]
    ctx: MountContext

    if TYPE_CHECKING:  # `Node.local_key`, which every class mixing this in has

        @property
        def local_key(self) -> tuple[str, ...]: ...

    @property
    def session_key(self) -> tuple[str, str]:
        # Asked ~8 times per file written into append/ (permissions, read-only checks,
        # the session look-ups): derived once per node key, not parsed each time.
        return _session_key_of(self.key, len(self.ctx.prefix))

    @property
    def project(self) -> str:
        return self.local_key[1]

    @property
    def stem(self) -> str:
        """The session's stem: a relative path for a sub-agent's (``<stem>/<task>``)."""
        return self.session_key[1]

    def read_only_reason(self) -> str | None:
        """The tree's reason (another agent's sessions), else, with an archive, why a
        session only the archive holds takes no write (one lstat: the live file's)."""
        return self.ctx.read_only_reason or archived_reason(self.ctx.index, *self.session_key)

    async def permissions(self) -> Permissions:
        """Follow the session file's mode and owner: a ``0600`` file shows no
        group/other bits anywhere in its dir. A loaded session knows them (at most one
        stat); else the listing's view of the file (one stat, a thread hop only for an
        unseen file)."""
        project, stem = self.session_key  # (derived from the key once, not per part)
        loaded = self.ctx.sessions.loaded_fresh(project, stem)
        if loaded is not None:
            return derived_permissions(loaded.access)
        ref = await self.ctx.sessions.ref(project, stem)
        return derived_permissions(ref.access if ref is not None else NO_ACCESS)

    async def within_session(self, own: Permissions) -> Permissions:
        """``own`` (a file on disk shown in the session dir: a blob, an artifact), no
        more than the session file allows either."""
        session = await InSession.permissions(self)
        return Permissions(own.mask & session.mask, own.uid, own.gid)

    async def session(self, warm: str | None = None, *, load: bool = True) -> LoadedSession:
        """The session (``load=False``: without reading its file when it is not held
        yet; see `SessionCache.get`); ``ENOENT`` when there is none."""
        try:
            return await self.ctx.sessions.get(*self.session_key, warm, load=load)
        except NotASession:
            raise refuse(errno.ENOENT) from None

    async def require_session_file(self) -> None:
        """``ENOENT`` when the session file is gone, without loading the session (at
        most one stat): for files of a session dir that show nothing of its entries."""
        if await self.ctx.sessions.ref(self.project, self.stem) is None:
            raise refuse(errno.ENOENT)

    def session_dirs(self, *targets: str | None) -> tuple[str, ...]:
        """This session's dir as absolute paths, needed only when one of ``targets``
        (link targets, command arguments) is an absolute path."""
        if not self.ctx.mountpoint or not any(t and t.startswith("/") for t in targets):
            return ()
        return (self.ctx.mount_path(*mount_parts(self.project, self.stem)),)

    async def resolve_target(self, target: str, link_dir: str) -> str:
        """The entry id a symlink target in ``link_dir`` names (`resolve_link_target`);
        a refusal is kept as the session's ``last_error`` and re-raised."""
        session = await self.session()
        dirs = self.session_dirs(target)

        def check() -> str:
            return session_writer.entry_of_link(session.hydrated, target, link_dir, dirs)

        try:
            if session.manager is not None and not session.lock.locked():
                return check()  # a few dict lookups: cheaper than a thread hop
            return await self.ctx.sessions.run(session, check)
        except WriteRejected as exc:
            session.record_refusal(exc)
            raise

    async def apply_write(
        self,
        fn: Callable[[Any], T],
        *,
        leaf: LeafEffect = "kept",
        done: str | Callable[[T], str] | None = None,
        small: bool = False,
        memory_only: bool = False,
        appends: Appends = None,
    ) -> T:
        """One write through ``SessionCache.write``; ``done`` (or ``done(result)``)
        becomes ``last_result``. A refusal propagates as `WriteRejected` (``ops`` turns
        it into its errno). A session is read first unless ``appends`` says the write
        may go without (``"scan"``)."""
        self.refuse_while_agent_runs()
        session = await self.session(load=appends != "scan")
        result = await self.ctx.sessions.write(
            session, fn, leaf=leaf, small=small, memory_only=memory_only, appends=appends
        )
        if done is not None:
            session.last_result = done if isinstance(done, str) else done(result)
        return result

    def refuse_while_agent_runs(self) -> None:
        """`WriteRejected` (``EBUSY``) while ``send``'s agent runs on this session:
        nothing the mount writes may be mixed into what the agent writes."""
        runs = self.ctx.runs
        if runs is not None and runs.any_busy():  # (a write asks three times: keep it cheap)
            runs.check_idle(self.session_key, "/".join(self.key))

    async def record_refusal(self, exc: WriteRejected) -> None:
        """A refusal goes to this session's ``ctl`` (``last_error``)."""
        if exc.recorded:
            return
        try:
            session = await self.session(load=False)  # its ctl, not its entries
        except Exception:  # the session is gone: nobody can read its ctl any more
            return
        session.record_refusal(exc)


#: renameat2 flags (linux/fs.h)
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def refuse_unsupported_rename(
    directory: DirNode, name: str, new_parent: DirNode, flags: int
) -> None:
    """Renames stay inside one directory of the mount (``EXDEV`` otherwise, so ``mv``
    falls back to copy + delete) and never swap two names (``RENAME_EXCHANGE``)."""
    if new_parent.key != directory.key:
        raise WriteRejected(
            errno.EXDEV, f"mv {directory.display_path(name)}: renames stay in one directory"
        )
    if flags & RENAME_EXCHANGE:
        raise WriteRejected(
            errno.EINVAL, f"mv {directory.display_path(name)}: names are never swapped"
        )
