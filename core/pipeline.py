"""The persistence pipeline: one session's file, mirrored from its in-memory state.

* A new session is not written before it holds an assistant message (or
  `ensure_on_disk()` is called); then the whole session is written as a new file
  (`atomic_write`), and from then on each append is one line, written with one
  `os.write` on an `O_APPEND` descriptor (a batch is one write for all its lines). A
  session loaded from an existing file is on disk already: its appends go out at once.
* Whole-file changes (migration, title, move, `rewrite_entries`) go through
  `storage.rewrite` (`core.rewrite`): temp file + fsync + rename + directory fsync,
  carrying over lines other processes append meanwhile, and refused with
  `SessionBusyError` while another process holds the file open for writing. Only the
  lines that change are re-serialised (`core.line_rewrite`); every other line keeps
  its bytes.
* The first persistence error is latched, logged once, and raised again by every later
  persisting call, `flush()` and `close()`.
* What was read is remembered (inode, size, offset of the last complete line), so
  `catch_up` reads only what other processes appended since, and a rewrite notices a
  file that was replaced under it.

The pipeline does no locking: its owner (`SessionManager`) holds its lock around every
call.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from typing import NoReturn

from core.blobs import BlobStore, may_contain_blob_refs
from core.errors import GuestWriteWouldWait, PersistenceError
from core.jsonl import (
    complete_prefix_length,
    consumed_length,
    dumps_line,
    is_header,
    parse_jsonl_lenient,
)
from core.line_rewrite import NotASessionFileError, rewrite_session_lines
from core.migrate import migrate_session_entries
from core.paths import now_iso
from core.persist import MAX_PERSIST_CHARS, prepare_for_persist, resolve_blob_refs
from core.publish_lock import (
    LOCK_WAIT_SECONDS,
    PublishLockBusy,
    is_locked,
    omp_has_published,
    publish_lock,
)
from core.rewrite import (
    SessionBusyError,
    SourceReplacedError,
    refuse_if_held_open,
    seems_unshared,
)
from core.session_files import in_omp_agent_dir, permissions_source
from core.state import Entry, SessionState
from core.storage import (
    FileSessionStorage,
    SessionStorage,
    SessionWriter,
    StorageStat,
    atomic_write,
)
from core.title_slot import (
    TITLE_SLOT_BYTES,
    Slot,
    fold_title_slot,
    new_title_slot,
    slot_bytes,
    slot_matches_header,
    split_title_slot,
)

__all__ = ["PersistencePipeline"]

log = logging.getLogger(__name__)

#: A rewrite that finds its file replaced by another process reloads and tries again.
_REWRITE_ATTEMPTS = 3


class PersistencePipeline:
    """Writes one session's state to its file, in order, and reads others' appends."""

    def __init__(
        self,
        state: SessionState,
        storage: SessionStorage,
        *,
        enabled: bool,
        blob_store: BlobStore | None = None,
        resolve_blobs: bool = True,
    ) -> None:
        self.state = state
        self.storage = storage
        self.enabled = enabled  # False: an in-memory session, never written
        self.blob_store = blob_store
        self.resolve_blobs = resolve_blobs
        self.file: str | None = None
        self.on_disk = False  # the file exists and holds everything persisted so far
        self.needs_rewrite = False  # the next persist must be a full rewrite
        self.error: PersistenceError | None = None
        #: appends as a guest in a file an agent may have open (the mount): each one is
        #: refused (`SessionBusyError`) while another process holds the file open for
        #: writing, made inside omp's publish lock when omp may publish the file
        #: (`_omp_may_publish`), fsynced, and the file closed again
        self.guest = False
        self._in_omp_agent_dir: bool | None = None  # known once a guest write asked
        #: a guest write that would wait raises `GuestWriteWouldWait` instead
        self.refuse_waits = False
        # A new file takes this file's mode and owner (a fork: its source's).
        self.permissions_model: str | None = None
        self._writer: SessionWriter | None = None
        # What was read from disk (catch_up compares against it).
        self._file_inode: int | None = None
        self._loaded_offset = 0
        # `_loaded_offset` when it is the end of a line this pipeline appended itself
        # (so the file's byte before it is a newline); else None.
        self._own_end: int | None = None
        # How many leading entries have their line in the file; the rest are unwritten
        # (a deferred session, or appends waiting for a pending migration rewrite).
        self.disk_entries = 0
        # The file's stat right after our last append (`take_append_stat`).
        self._appended_stat: os.stat_result | None = None

    # ------------------------------------------------------------------ file identity

    def start_new_file(self, file: str | None) -> None:
        """Forget the current file: the state now is a new session for `file`."""
        self.close_writer()
        self.file = file
        self._in_omp_agent_dir = None
        self.permissions_model = None
        self.on_disk = False
        self.needs_rewrite = False
        self.disk_entries = 0
        self._file_inode = None
        self._loaded_offset = 0
        self._own_end = None

    def attach(self, file: str, inode: int, offset: int) -> None:
        """Take ``file`` as loaded up to ``offset`` (its complete lines end there) with
        ``inode``, without reading it: the state was filled by the caller
        (`SessionManager.open_tail`). Appends go out at once; a catch-up reads from
        ``offset``."""
        self.start_new_file(file)
        self.on_disk = True
        self._file_inode = inode
        self._loaded_offset = offset

    def _remember_file(self, st: StorageStat, offset: int) -> None:
        self._file_inode = st.inode
        self._loaded_offset = offset
        self._own_end = None

    def restore_file_identity(self) -> None:
        """After a failed move: look at the (unmoved) file again."""
        if self.file is not None and self.on_disk:
            with contextlib.suppress(OSError):
                self._remember_file(self.storage.stat(self.file), self._loaded_offset)

    # ------------------------------------------------------------------ errors

    def check_error(self) -> None:
        if self.enabled and self.error is not None:
            raise self.error

    def _latch(self, exc: BaseException) -> NoReturn:
        if self.error is None:
            error = PersistenceError(f"Failed to persist session {self.file}: {exc}")
            error.__cause__ = exc
            self.error = error
            log.error("%s", error)
        raise self.error

    def run(self, operation: Callable[[], None]) -> None:
        """Run a disk operation; its first failure is latched and (re)raised."""
        self.check_error()
        try:
            operation()
        except SessionBusyError:
            raise  # refused with the file untouched: nothing to latch
        except Exception as exc:
            self._latch(exc)

    # ------------------------------------------------------------------ loading

    def load(self, file: str) -> bool | None:
        """Load and index `file` into the state. None = not a session (nothing changed);
        else whether migration changed it (then the next persist rewrites it)."""
        try:
            data, st = self.storage.read_bytes_with_stat(file)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        slot, body = split_title_slot(data)
        loaded = parse_jsonl_lenient(data[body:] if body else data)
        if not loaded or not is_header(loaded[0]):
            return None
        fold_title_slot(loaded[0], slot)
        migrated = migrate_session_entries(loaded)
        if self.resolve_blobs and self.blob_store is not None and may_contain_blob_refs(data):
            for entry in loaded:
                resolve_blob_refs(entry, self.blob_store)
        state = self.state
        state.header = loaded[0]
        state.title_slot = slot
        cwd = state.header.get("cwd")
        if isinstance(cwd, str):
            state.cwd = cwd
        del loaded[0]  # O(n) pointer move, no copies of the entries
        state.replace(loaded)
        self.file = file
        self.disk_entries = len(loaded)
        self.on_disk = True
        self.needs_rewrite = migrated
        self._remember_file(st, consumed_length(data))
        return migrated

    def _reload(self) -> None:
        assert self.file is not None
        self.close_writer()
        if self.load(self.file) is None:
            # Replaced by something that is not a session: keep what we have in memory.
            self._file_inode = None

    def catch_up(self) -> int:
        """Read what other processes appended since the last load (complete lines).

        Returns the number of new entries (the leaf moves to the last one), or -1 when
        the file was replaced or shrank and was reloaded whole. One stat when unchanged.
        With `refuse_waits` (a caller that must not block) a file that changed raises
        `GuestWriteWouldWait` before anything is read: what another process wrote may
        be of any size (a replaced file is parsed again whole), work for a thread.
        """
        file = self.file
        if file is None or self._file_inode is None:
            return 0
        try:
            st = self.storage.stat(file)
        except OSError:
            return 0
        if self.refuse_waits and (st.inode != self._file_inode or st.size != self._loaded_offset):
            raise GuestWriteWouldWait(file)
        if st.inode != self._file_inode or st.size < self._loaded_offset:
            self._reload()
            return -1
        retitled = self._catch_up_title_slot()
        if st.size == self._loaded_offset:
            return -1 if retitled else 0
        if self.needs_rewrite:
            # Migrated in memory only: ids of new v1 lines depend on the whole file.
            self._reload()
            return -1
        data = self.storage.read_bytes_from(file, self._loaded_offset)
        end = complete_prefix_length(data)
        if end == 0:
            return 0
        state = self.state
        known = state.by_id
        new = [
            obj
            for obj in parse_jsonl_lenient(data[:end])
            if obj.get("type") != "session"
            and not (isinstance(obj.get("id"), str) and obj["id"] in known)
        ]
        if self.resolve_blobs and self.blob_store is not None:
            for entry in new:
                resolve_blob_refs(entry, self.blob_store)
        if self.disk_entries == len(state.entries):
            self.disk_entries += len(new)
        state.extend(new)
        self._loaded_offset += end
        last = next((e["id"] for e in reversed(new) if isinstance(e.get("id"), str)), None)
        if last is not None:
            state.leaf_id = last
        return len(new)

    def _catch_up_title_slot(self) -> bool:
        """omp renames a session by overwriting its title slot in place (no new size,
        no new inode): read the slot again and fold a changed title into the header."""
        old = self.state.title_slot
        if old is None or self.file is None:
            return False
        try:
            prefix = self.storage.read_text_prefix(self.file, TITLE_SLOT_BYTES)
        except OSError:
            return False
        slot = split_title_slot(prefix.encode("utf-8", "surrogatepass"))[0]
        if slot is None or slot == old:
            return False
        self.state.title_slot = slot
        fold_title_slot(self.state.header, slot)
        return True

    def catch_up_before_rewrite(self) -> None:
        """Whole-file operations start from what is on disk now: lines another process
        appended since our last look would otherwise be lost by the rewrite."""
        if self.enabled and self.on_disk:
            self.catch_up()

    # ------------------------------------------------------------------ appends

    # The copy made by `prepare_for_persist` is only needed when the serialised line
    # shows something it would change. A line of at most MAX_PERSIST_CHARS bytes cannot
    # hold a string over the limit (a UTF-16 length never exceeds the UTF-8 length);
    # without the markers below it has no dropped key, no image block and no image_url.
    # Such a line already is its persisted form, and the costly deep copy is skipped.
    def persisted_line(self, entry: Entry) -> bytes:
        line = dumps_line(entry)
        if (
            len(line) <= MAX_PERSIST_CHARS
            and b'"partialJson"' not in line
            and b'"jsonlEvents"' not in line
            and b'"image' not in line
        ):
            return line
        return dumps_line(prepare_for_persist(entry, self.blob_store))

    def appends_directly(self) -> bool:
        """Whether the next append is one line to the open writer (the hot path)."""
        return (
            self._writer is not None
            and self.enabled
            and self.on_disk
            and not self.needs_rewrite
            and not self.guest
        )

    def write_appended(self, line: bytes) -> None:
        """The hot path: the line of the entry just appended, to the open writer."""
        writer = self._writer
        assert writer is not None
        before = self._loaded_offset
        try:
            writer.write(line)
        except Exception as exc:
            self._latch(exc)
        self.disk_entries = len(self.state.entries)
        self._after_own_append(writer, before)

    def persist_new(self, new: Sequence[Entry]) -> None:
        """Mirror freshly appended entries to disk, following the deferral rules."""
        if not self.enabled:
            return
        if not self.on_disk:
            if self.state.has_assistant:
                self.run(self.write_full)
            return  # deferred until the first assistant message or ensure_on_disk()
        if self.needs_rewrite:
            self.run(self.write_full)
            return
        if len(new) == 1:  # one file in append/: no generator for one line
            data = self.persisted_line(new[0])
        else:
            data = b"".join(self.persisted_line(e) for e in new)
        if self.guest and isinstance(self.storage, FileSessionStorage):
            self._append_as_guest(data)
            return
        try:
            writer = self._open_writer()
            before = self._loaded_offset
            writer.write(data)
            self.disk_entries = len(self.state.entries)
            self._after_own_append(writer, before)
        except Exception as exc:
            self._latch(exc)

    def _omp_may_publish(self, file: str) -> bool:
        """Whether omp may publish ``file`` (append to it or replace it under its lock):
        it has omp 18's title slot, lives in omp's agent dir, or omp's lock file or lock
        sidecar is beside it. Only then is a guest write made inside omp's lock: the
        lock file's create and unlink, and the directory changes the append's fsync
        then commits too, cost more than the append itself; pi takes no such lock."""
        if self.state.title_slot is not None:
            return True
        if self._in_omp_agent_dir is None:
            self._in_omp_agent_dir = in_omp_agent_dir(file)
        return self._in_omp_agent_dir or omp_has_published(file)

    def _guest_write(self, write: Callable[[str], None]) -> None:
        """Run ``write(file)`` as a guest: refused while another process holds the file
        open for writing (an agent running on it would find bytes it did not write),
        else inside omp's publish lock when omp may publish the file, so omp waits for
        it. Our own descriptor is closed first: only other processes count. Refusals
        are not latched. With `refuse_waits`, finding a writer or the lock taken raises
        `GuestWriteWouldWait` at once (one quick probe, no /proc scan, no waiting)."""
        file = self.file
        assert file is not None
        self.close_writer()
        locked = self._omp_may_publish(file)
        if not self.refuse_waits:
            refuse_if_held_open(file)
        elif (locked and is_locked(file)) or not seems_unshared(file):
            raise GuestWriteWouldWait(file)
        try:
            if locked:
                with publish_lock(file, wait=0 if self.refuse_waits else LOCK_WAIT_SECONDS):
                    write(file)
            else:
                write(file)
        except PublishLockBusy:
            if self.refuse_waits:  # taken between our look and our claim
                raise GuestWriteWouldWait(file) from None
            raise
        except SessionBusyError:
            raise
        except Exception as exc:
            self._latch(exc)

    def _append_as_guest(self, data: bytes) -> None:
        storage = self.storage
        assert isinstance(storage, FileSessionStorage)

        def append(file: str) -> None:
            # A writer opened for this one append: `append_synced` makes it without
            # the writer object (the mount's hot path).
            before = self._loaded_offset
            start, end, st = storage.append_synced(
                file, data, before if self._own_end == before else -1
            )
            self.disk_entries = len(self.state.entries)
            self._landed((start, end), before)
            self._appended_stat = st

        self._guest_write(append)

    def overwrite_title_slot(self, slot: Slot) -> None:
        """omp's rename: the file's 256 title slot bytes replaced in place by ``slot``
        (same size, nothing else moves), fsynced; as a guest when this is one."""
        line = slot_bytes(slot)
        self._appended_stat = None  # (the slot changes the file's mtime)

        def overwrite(file: str) -> None:
            current = split_title_slot(self.storage.read_text_prefix(file, len(line)).encode())
            if current[1] != len(line):
                # No slot of the slot's size there now: a rewrite puts one in its place.
                self.state.title_slot = slot
                self.write_full()
                return
            self.storage.overwrite_prefix(file, line)
            self.state.title_slot = slot

        if self.guest and isinstance(self.storage, FileSessionStorage):
            self._guest_write(overwrite)
        else:
            assert self.file is not None
            self.run(lambda: overwrite(str(self.file)))

    def forget_unwritten_after(self, entry_count: int) -> None:
        """A batch rolled back to `entry_count` entries."""
        self.disk_entries = min(self.disk_entries, entry_count)

    def _open_writer(self) -> SessionWriter:
        if self._writer is None:
            if self.file is None:
                raise PersistenceError("this session has no file")
            self._writer = self.storage.open_writer(self.file, "a")
        return self._writer

    def close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:  # noqa: SIM105 -- suppress() costs a context manager on every guest append
                writer.close()
            except Exception:  # best effort: the write was fsynced, or failed before
                pass

    def _after_own_append(self, writer: SessionWriter, before: int) -> None:
        self._landed(getattr(writer, "last_write_span", None), before)

    def take_append_stat(self) -> os.stat_result | None:
        """The file's stat taken right after our last append, once, and only while it
        is the file as we know it (the same inode, ending where we have read to): the
        view records the file's state after a write through the mount from it, so
        that append costs no ``stat`` of the path (and lines another process wrote
        meanwhile are not taken as seen)."""
        st, self._appended_stat = self._appended_stat, None
        if st is None or st.st_ino != self._file_inode or st.st_size != self._loaded_offset:
            return None
        return st

    def _landed(self, span: tuple[int, int] | None, before: int) -> None:
        # Our own lines need no catch-up: advance the offset when nothing else was
        # written in between (then our write started exactly where we had read to).
        if span is not None and span[0] == before:
            self._loaded_offset = self._own_end = span[1]

    # ------------------------------------------------------------------ whole file

    def write_full(self, *, compare_entries: bool = False, target: str | None = None) -> None:
        """Bring the file in line with memory; afterwards appends go line by line.

        A file we have loaded is rewritten in place (`_rewrite_in_place`); otherwise
        the whole session is written as a new file. ``compare_entries``: entries may
        have been edited in place, re-serialise those that differ from the file.
        ``target``: move the file there (same bytes rules) instead.
        """
        if self.file is None:
            raise PersistenceError("this session has no file")
        self.close_writer()
        if self.on_disk and self._file_inode is not None:
            self._rewrite_in_place(self.file, compare_entries=compare_entries, target=target)
        else:
            self._write_new_file(target or self.file)

    def _write_new_file(self, file: str) -> None:
        """Header + every entry (size rules applied: they are all new to this file)."""
        lines = [dumps_line(self.state.header)]
        slot = self.title_slot_now()
        if slot is not None:
            lines.insert(0, slot_bytes(slot))
        lines.extend(self.persisted_line(e) for e in self.state.entries)
        self.storage.ensure_dir(os.path.dirname(file) or ".")
        model = permissions_source(self.storage, file, self.permissions_model)
        atomic_write(self.storage, file, lines, permissions_from=model)
        self.file = file
        self.on_disk = True
        self.needs_rewrite = False
        self.disk_entries = len(self.state.entries)
        written = sum(len(line) for line in lines)
        try:
            self._remember_file(self.storage.stat(file), written)
        except OSError:
            self._file_inode = None

    def _rewrite_in_place(self, file: str, *, compare_entries: bool, target: str | None) -> None:
        """Rewrite (or move) the loaded file, changing only the lines that must change
        and carrying over what others append meanwhile; memory then catches up with
        the lines that were carried."""
        for attempt in range(_REWRITE_ATTEMPTS):
            reflected = 0

            def transform(data: bytes) -> bytes:
                nonlocal reflected
                content, reflected = rewrite_session_lines(
                    data,
                    self._loaded_offset,
                    self.state.header,
                    unwritten=[self.persisted_line(e) for e in self._unwritten_entries()],
                    edited=self._edited_line_finder() if compare_entries else None,
                    title_slot=self.title_slot_now(),
                )
                return content

            try:
                result = self.storage.rewrite(
                    file, transform, expected_inode=self._file_inode, target=target
                )
            except (SourceReplacedError, NotASessionFileError):
                if attempt + 1 == _REWRITE_ATTEMPTS:
                    raise
                self._reload_keeping_changes()
                continue
            break
        if target is not None:
            self.file = target
        self.on_disk = True
        self.needs_rewrite = False
        self.disk_entries = len(self.state.entries)
        self._file_inode = result.inode
        self._loaded_offset = reflected
        self._own_end = None
        # The lines carried over (and whatever came after them). Never refused: the
        # bytes are written, so `refuse_waits`' "nothing was written" no longer holds.
        refusing, self.refuse_waits = self.refuse_waits, False
        try:
            self.catch_up()
        finally:
            self.refuse_waits = refusing

    def title_slot_now(self) -> Slot | None:
        """The title slot the file must start with (None: it has none): the one read,
        or a new one when the header's title changed since."""
        state = self.state
        slot = state.title_slot
        if slot is not None and not slot_matches_header(slot, state.header):
            slot = state.title_slot = new_title_slot(state.header, now_iso())
        return slot

    def _unwritten_entries(self) -> list[Entry]:
        return self.state.entries[self.disk_entries :]

    def _reload_keeping_changes(self) -> None:
        """Another process replaced the file since we read it: load it again, keeping
        our header change and the entries not written yet."""
        header, pending = self.state.header, self._unwritten_entries()
        self._reload()
        if self._file_inode is None:
            raise PersistenceError(f"{self.file} is no longer a session file")
        self.state.header = header
        self.state.extend([e for e in pending if e.get("id") not in self.state.by_id])

    def _edited_line_finder(self) -> Callable[[Entry, bytes], bytes | None]:
        """For `rewrite_entries`: the new line of a stored entry whose in-memory copy
        differs from it (compared with blob refs resolved, as memory holds them)."""
        seen: set[str] = set()
        blob_store = self.blob_store if self.resolve_blobs else None
        by_id = self.state.by_id

        def edited(stored: Entry, raw: bytes) -> bytes | None:
            entry_id = stored.get("id")
            if not isinstance(entry_id, str) or entry_id in seen:
                return None
            seen.add(entry_id)
            current = by_id.get(entry_id)
            if current is None or current == stored:
                return None
            if blob_store is not None and may_contain_blob_refs(raw):
                resolve_blob_refs(stored, blob_store)
                if current == stored:
                    return None
            return self.persisted_line(current)

        return edited

    # ------------------------------------------------------------------ durability

    def flush(self) -> None:
        """Push everything written so far to stable storage (fsync)."""
        self.check_error()
        writer = self._writer
        if writer is None:
            return

        def sync() -> None:
            writer.flush()
            writer.fsync()

        self.run(sync)

    def close(self) -> None:
        """Flush and close the file; best effort, but the first error is raised."""
        writer, self._writer = self._writer, None
        if writer is not None:
            for step in (writer.flush, writer.fsync, writer.close):
                if self.error is not None and step is not writer.close:
                    continue
                try:
                    step()
                except Exception as exc:
                    with contextlib.suppress(PersistenceError):
                        self._latch(exc)
        if self.enabled and self.error is not None:
            raise self.error
