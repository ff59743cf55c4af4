"""The per-entry views of a session: ``entries/``, ``path/``, ``labels/``, ``blobs/``."""

from __future__ import annotations

import errno
import logging
import os
import re
from array import array
from collections.abc import Iterator, Sequence
from typing import overload

import trio

from sessionfs.fs.nodes.base import (
    IMMUTABLE,
    VOLATILE,
    DirNode,
    FileNode,
    LinkNode,
    MountContext,
    Node,
    OpenFile,
    Permissions,
    Stat,
    refuse,
)
from sessionfs.fs.nodes.blobs import BlobFile
from sessionfs.fs.nodes.file_rows import FileRows
from sessionfs.fs.nodes.in_session import RENAME_NOREPLACE, InSession, refuse_unsupported_rename
from sessionfs.fs.nodes.scratch import ScratchHolder, link_text
from sessionfs.view.loaded_session import ENTRY_LISTING, EntryListing, LoadedSession
from sessionfs.view.names import decode_name, encode_name, unique_names
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_cache import PendingLabel
from sessionfs.writes import session_writer
from sessionfs.writes.link_targets import LABELS_DIR

log = logging.getLogger(__name__)

#: The temporary names GNU ``ln -sf`` gives the link it then renames over the real one
#: (coreutils' force_symlinkat: template ``CuXXXXXX``, X from [A-Za-z0-9]).
GNU_TEMP_NAME = re.compile(r"Cu[A-Za-z0-9]{6}")
#: How long a symlink with such a name in ``labels/`` waits for its rename before it
#: becomes a label of its own (``ln`` renames at once; a person who really chose the
#: name gets the label within this time, or as soon as the link is read or listed).
PENDING_LABEL_DELAY = 1.0


class SessionListing(InSession, DirNode):
    """A directory of a session whose listing follows the session: it changes whenever
    the session does (VOLATILE), and is as old as the session's last change."""

    __slots__ = ()

    tier = VOLATILE

    async def stat(self) -> Stat:
        return Stat(0, (await self.session()).mtime_ns)


class EntryFile(InSession, FileNode):
    """``entries/<id>.json``: one entry exactly as stored, pretty JSON; mtime = its time.

    Immutable: an id's content never changes while its file is appended to. A listing
    hands each file its stat so ``ls -l`` of 1,000 entries is one pass, not 1,000.
    """

    __slots__ = ("known",)

    tier = IMMUTABLE
    released_with_session = True

    def __init__(self, ctx: MountContext, key: tuple[str, ...], known: Stat | None = None) -> None:
        super().__init__(ctx, key)
        self.known = known

    async def _measured(self, session: LoadedSession) -> tuple[bytes, Stat]:
        found = await measure_entry_file(self.ctx, session, self.key[-1])
        if found is None:
            raise refuse(errno.ENOENT)
        return found

    async def stat(self) -> Stat:
        if self.known is not None:
            return self.known
        return (await self._measured(await self.session()))[1]

    async def content(self) -> bytes:
        session = await self.session()
        cached = session.cached_entry_bytes(self.key[-1])
        if cached is not None:
            return cached  # the common case after a listing: no thread hop
        return (await self._measured(session))[0]


async def measure_entry_file(
    ctx: MountContext, session: LoadedSession, name: str
) -> tuple[bytes, Stat] | None:
    """Entry file ``name``'s bytes and attributes (None: no such entry), found, rendered
    and measured in one thread hop: a name looked up outside a listing (a script that
    opens each path after its session was let go) cost three (its lookup, its index,
    its bytes), each a wake-up of a worker thread and of the event loop."""

    def measure() -> tuple[bytes, Stat] | None:
        index = session.table().index_of_name.get(name)
        if index is None:
            return None
        data = session.entry_bytes(index)
        return data, Stat(len(data), session.entry_mtime_ns(index))

    return await ctx.sessions.run(session, measure)


class EntryRows(FileRows):
    """The rows of ``entries/`` for one version of its session (`EntryListing`)."""

    def __init__(self, parent: EntriesDir, listing: EntryListing) -> None:
        super().__init__(parent, listing.table.names, listing.sizes, listing.mtimes_ns)
        self.ctx = parent.ctx
        self.index_of_name = listing.table.index_of_name

    def index_of(self, name: str) -> int | None:
        return self.index_of_name.get(name)

    def node(self, index: int, listed: bool = True) -> Node:
        known = self.stat(index) if listed else None
        return EntryFile(self.ctx, self.parent.child_key(self.names[index]), known)


class EntriesDir(SessionListing):
    """``entries/``: every entry in insertion (file) order."""

    __slots__ = ()

    #: what a load for this dir prepares (the session dir's lookup of ``entries``
    #: passes it, as for a rendered file): the build measures every entry file
    rendering = ENTRY_LISTING

    async def stat(self) -> Stat:
        # The walk to a listing stats the dir first: a load then measures the files too.
        return Stat(0, (await self.session(ENTRY_LISTING)).mtime_ns)

    async def children(self) -> Sequence[tuple[str, Node]]:
        session = await self.session(ENTRY_LISTING)  # a load measures the entry files
        cached = session.listings.get(self.key)
        if cached is None:
            listing = await self.ctx.sessions.run(session, session.entry_listing)
            cached = session.listings[self.key] = EntryRows(self, listing)
        return cached

    async def lookup(self, name: str) -> Node | None:
        session = await self.session()
        rows = session.listings.get(self.key)
        row = rows.index_of(name) if isinstance(rows, EntryRows) else None
        if rows is not None and row is not None:
            return rows[row][1]  # listed: its node knows its attributes
        listed = session.listed_entry_file(name)
        known = Stat(*listed) if listed is not None else None
        if known is None and session.cached_entry_bytes(name) is None:
            # The reply to the lookup needs its size: measured with the check, unless
            # the load measured every file (the lookup of ``entries`` asks for that):
            # a script naming each file of a long session, or a kernel that let the
            # listing's names go, then costs no thread hop and no render a name
            # (issue 26 point 6: 200,000 names took 9.9 s, the daemon's CPU 7 s)
            measured = await measure_entry_file(self.ctx, session, name)
            if measured is None:
                return None
            known = measured[1]
        # Its node and inode last until the session is let go (`released_with_session`)
        session.names_looked_up += 1
        return EntryFile(self.ctx, self.child_key(name), known)


class EntryLink(InSession, LinkNode):
    """A symlink to ``../entries/<name>`` (used by ``path/`` and ``labels/``)."""

    __slots__ = ("_target",)

    invalidate_on_change = False  # readlink is never cached; the name fixes the target

    def __init__(self, ctx: MountContext, key: tuple[str, ...], target: str) -> None:
        super().__init__(ctx, key)
        self._target = target

    async def target(self) -> str:
        return self._target

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns


#: what every ``path/`` link's target starts with
ENTRIES_TARGET = "../entries/"


class PathNames(Sequence[str]):
    """The names of ``path/``, ``NNNN-<entry file>``, each made when read: a
    200,000-entry path would otherwise hold 200,000 more strings."""

    def __init__(self, entry_names: Sequence[str], path: Sequence[int]) -> None:
        self.entry_names = entry_names
        self.path = path
        self.width = max(4, len(str(len(path) - 1)))

    def __len__(self) -> int:
        return len(self.path)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        entry = self.entry_names[self.path[index]]  # (an IndexError ends an iteration)
        return f"{index if index >= 0 else len(self) + index:0{self.width}d}-{entry}"

    def __iter__(self) -> Iterator[str]:
        width, entry_names = self.width, self.entry_names
        return (f"{n:0{width}d}-{entry_names[i]}" for n, i in enumerate(self.path))

    def index_of(self, name: str) -> int | None:
        number, dash, entry_name = name.partition("-")
        if not dash or len(number) != self.width or not number.isdigit():
            return None
        row = int(number)
        if row >= len(self.path) or self.entry_names[self.path[row]] != entry_name:
            return None
        return row


class PathRows(FileRows):
    """The rows of ``path/`` for one version of its session: a symlink
    ``NNNN-<name>`` -> ``../entries/<name>`` per entry from the root to the leaf,
    as long as its target, as old as the session."""

    #: its entry's position, its size and time here, its lookup count in its block
    bytes_per_row = 32

    def __init__(
        self, parent: PathDir, entry_names: Sequence[str], path: Sequence[int], mtime_ns: int
    ) -> None:
        names = PathNames(entry_names, array("q", path))
        prefix = len(ENTRIES_TARGET)
        sizes = array("q", (prefix + len(os.fsencode(entry_names[i])) for i in names.path))
        super().__init__(parent, names, sizes, array("q", [mtime_ns]) * len(path))
        self.ctx = parent.ctx
        self.path_names = names

    def extends(self, before: FileRows) -> bool:
        """The same links first (not the same times: a link is as old as its session,
        which every append changes): the same entries on the path, named the same."""
        if not isinstance(before, PathRows):
            return False
        old, new = before.path_names, self.path_names
        count = len(old.entry_names)
        return (
            old.width == new.width
            and new.path[: len(old.path)] == old.path
            and new.entry_names[:count] == old.entry_names
        )

    def index_of(self, name: str) -> int | None:
        return self.path_names.index_of(name)

    def node(self, index: int, listed: bool = True) -> Node:
        names = self.path_names
        target = ENTRIES_TARGET + names.entry_names[names.path[index]]
        return EntryLink(self.ctx, self.parent.child_key(names[index]), target)


class PathDir(SessionListing):
    """``path/NNNN-<id>.json``: the root->leaf path as numbered symlinks (`PathRows`)."""

    __slots__ = ()

    async def children(self) -> PathRows:
        session = await self.session()
        cached = session.listings.get(self.key)
        if not isinstance(cached, PathRows):

            def path() -> tuple[Sequence[str], list[int]]:
                return session.table().names, session.path_indexes()

            names, indexes = await self.ctx.sessions.run(session, path)
            cached = session.listings[self.key] = PathRows(self, names, indexes, session.mtime_ns)
        return cached

    async def lookup(self, name: str) -> Node | None:
        rows = await self.children()
        row = rows.index_of(name)
        return None if row is None else rows.node(row)


class LabelsDir(ScratchHolder, SessionListing):
    """``labels/<label> -> ../entries/<targetId>.json`` for every current label.

    Writes: ``ln -s ../entries/<id>.json labels/<name>`` labels an entry (``ln -sfn``
    moves a label to another entry), ``mv labels/a labels/b`` relabels, ``rm
    labels/<name>`` clears. Each is one label change appended through core. A file
    made here is a scratch file in memory; renamed to a name, it labels the entry its
    text names (``printf '%s' <id> > labels/t && mv labels/t labels/plan``).
    """

    __slots__ = ()

    mode = 0o755

    async def _rows(self) -> list[tuple[str, str, str]]:
        """(file name, target entry id, link target) per current label."""
        session = await self.session()

        def rows() -> list[tuple[str, str, str]]:
            found = []
            for target_id, label in session.labels().items():
                name = session.name_for_id(target_id)
                if label and name is not None:
                    found.append((encode_name(label), target_id, f"../entries/{name}"))
            names = unique_names([label for label, _, _ in found])
            return [(n, t, link) for n, (_, t, link) in zip(names, found, strict=True)]

        return await self.ctx.sessions.run(session, rows)

    async def children(self) -> list[tuple[str, Node]]:
        await self._commit_all_pending()  # a listing shows labels, not temporary links
        return [
            (name, EntryLink(self.ctx, self.child_key(name), link))
            for name, _, link in await self._rows()
        ] + self.scratch_rows()

    async def lookup(self, name: str) -> Node | None:
        # Without committing anything: the kernel looks names up around ``ln -sfn``.
        if name in self.ctx.sessions.pending_labels(self.project, self.stem):
            return PendingLabelLink(self.ctx, self.child_key(name))
        scratch = self.scratch_node(name)
        if scratch is not None:
            return scratch
        for listed, _, link in await self._rows():
            if listed == name:
                return EntryLink(self.ctx, self.child_key(name), link)
        return None

    async def _target_of(self, name: str) -> str:
        for listed, target_id, _ in await self._rows():
            if listed == name:
                return target_id
        raise WriteRejected(errno.ENOENT, f"labels/{name}: no such label")

    async def _reply(self, name: str) -> Node:
        node = await self.lookup(name)
        if node is None:  # cleared again by someone else in between: still "made"
            raise refuse(errno.ENOENT)
        return node

    async def _set_label(self, target_id: str, name: str) -> None:
        label = decode_name(name)
        await self.apply_write(
            lambda m: session_writer.set_label(m, target_id, label),
            leaf="recorded",
            done=f"label: {label}",
        )

    async def create(self, name: str, flags: int, mode: int) -> tuple[Node, OpenFile]:
        if await self.lookup(name) is not None:
            raise WriteRejected(errno.EEXIST, f"labels/{name}: exists")
        return await self.create_scratch(name, mode)

    async def symlink(self, name: str, target: str) -> Node:
        if await self.lookup(name) is not None:
            raise WriteRejected(errno.EEXIST, f"ln -s labels/{name}: exists (ln -sfn moves it)")
        if GNU_TEMP_NAME.fullmatch(name):
            return await self._hold(name, target)
        label, dirs = decode_name(name), self.session_dirs(target)
        await self.apply_write(
            lambda m: session_writer.set_label_from_link(m, label, target, session_dirs=dirs),
            leaf="recorded",
            done=f"label: {label}",
        )
        return await self._reply(name)

    # -- GNU ``ln -sfn``: a temporary link, then a rename over the real name -----------
    #
    # Appending the temporary name as a label would leave a throwaway label entry in
    # the file for every ``ln -sfn``. So a link with such a name is checked (a bad
    # target still fails at ``ln``) and held in memory; the rename then appends just
    # what the final state needs. Not renamed, it becomes a real label (see
    # `PENDING_LABEL_DELAY`), so a name that merely looks temporary is never lost.

    async def _hold(self, name: str, target: str) -> Node:
        self.refuse_while_agent_runs()  # its commit would come during the run
        entry_id = await self.resolve_target(target, LABELS_DIR)
        record = PendingLabel(entry_id, lambda r: self._commit_pending(name, r))
        self.ctx.sessions.add_pending_label(self.project, self.stem, name, record)
        trio.lowlevel.spawn_system_task(self._commit_later, name, record)
        return PendingLabelLink(self.ctx, self.child_key(name))

    async def _commit_pending(self, name: str, record: PendingLabel) -> None:
        """Make the pending link ``name`` a real label, unless it is gone already."""
        if self.ctx.sessions.take_pending_label(self.project, self.stem, name, record):
            await self._set_label(record.entry_id, name)

    async def _commit_later(self, name: str, record: PendingLabel) -> None:
        await trio.sleep(PENDING_LABEL_DELAY)
        try:
            await record.commit(record)
        except Exception as exc:  # a system task must not raise; ctl keeps the reason
            log.warning("label %r in %s/%s: %r", name, self.project, self.stem, exc)

    async def _commit_all_pending(self) -> None:
        for record in list(self.ctx.sessions.pending_labels(self.project, self.stem).values()):
            await record.commit(record)

    async def rename(
        self, name: str, new_parent: DirNode, new_name: str, flags: int
    ) -> Node | None:
        refuse_unsupported_rename(self, name, new_parent, flags)
        if flags & RENAME_NOREPLACE and await self.lookup(new_name) is not None:
            raise WriteRejected(errno.EEXIST, f"mv labels/{name} labels/{new_name}: exists")
        scratch = self.scratch_data(name)
        if scratch is not None:  # a file renamed to a label's name: the entry it names
            target, label = link_text(name, new_name, scratch), decode_name(new_name)
            dirs = self.session_dirs(target)
            await self.apply_write(
                lambda m: session_writer.set_label_from_link(m, label, target, session_dirs=dirs),
                leaf="recorded",
                done=f"label: {label}",
            )
            self.remove_scratch(name)
            self.remove_scratch(new_name)
            return None
        pending = self.ctx.sessions.take_pending_label(self.project, self.stem, name)
        if pending is not None:  # ``ln -sfn``: only the final label is appended
            await self._set_label(pending.entry_id, new_name)
            return None
        await self._set_label(await self._target_of(name), new_name)
        return None

    async def unlink(self, name: str) -> None:
        if self.ctx.sessions.take_pending_label(self.project, self.stem, name) is not None:
            return  # a temporary link removed again (``ln`` cleaning up): nothing to undo
        if self.remove_scratch(name):
            return
        target_id = await self._target_of(name)
        await self.apply_write(
            lambda m: session_writer.clear_label(m, target_id),
            leaf="recorded",
            done=f"label cleared: {decode_name(name)}",
        )


class PendingLabelLink(InSession, LinkNode):
    """A temporary-looking link in ``labels/`` (see `LabelsDir`). Reading it makes it a
    real label first: whoever reads it wants what it points to to stay."""

    __slots__ = ()

    invalidate_on_change = False  # readlink is never cached

    def _labels_dir(self) -> LabelsDir:
        return LabelsDir(self.ctx, self.key[:-1])

    async def target(self) -> str:
        name = self.key[-1]
        labels = self._labels_dir()
        record = self.ctx.sessions.pending_labels(self.project, self.stem).get(name)
        if record is not None:
            await record.commit(record)
        node = await labels.lookup(name)
        if not isinstance(node, EntryLink):
            raise refuse(errno.ENOENT)
        return await node.target()

    async def stat(self) -> Stat:
        # Not through ``target()``: the kernel stats the link right after ``symlink``,
        # and that must not commit it before the rename ``ln -sfn`` is about to make.
        record = self.ctx.sessions.pending_labels(self.project, self.stem).get(self.key[-1])
        if record is None:
            return await super().stat()
        session = await self.session()
        name = await self.ctx.sessions.run(session, lambda: session.name_for_id(record.entry_id))
        return Stat(len(f"../entries/{name}".encode()), session.mtime_ns)

    async def mtime_ns(self) -> int:
        return (await self.session()).mtime_ns


class SessionBlobsDir(SessionListing):
    """``blobs/``: the blobs this session's entries reference (those in the store)."""

    __slots__ = ()

    async def children(self) -> list[tuple[str, Node]]:
        session = await self.session()
        shas = await self.ctx.sessions.run(session, session.blob_shas)
        blobs_dir = self.ctx.index.blobs_dir

        def existing() -> list[str]:
            return [sha for sha in shas if (blobs_dir / sha).is_file()]

        present = await trio.to_thread.run_sync(existing)
        return [
            (sha, SessionBlobFile(self.ctx, self.child_key(sha), blobs_dir / sha))
            for sha in present
        ]


class SessionBlobFile(InSession, BlobFile):
    """A blob in a session's ``blobs/``: no more than the blob file's own mode allows,
    nor the session file's (`InSession.within_session`)."""

    __slots__ = ()

    async def permissions(self) -> Permissions:
        return await self.within_session(await BlobFile.permissions(self))
