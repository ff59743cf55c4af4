"""SessionManager: the spec's front door to one session (spec sections 6, 7 and 12).

A session is an append-only list of entries (plain dicts, so unknown fields survive)
plus a movable leaf pointer. The manager delegates:

* `core.state.SessionState`: the entries in memory, indexed by id, labels, the leaf;
* `core.pipeline.PersistencePipeline`: mirroring them to the session file (deferral
  until the first assistant message, ordered appends through one writer, rewrites
  that carry others' appends, latched errors, catch-up of others' appends);
* `core.session_files`: where files go and what a fork, a branched copy or a move
  writes (paths, blob stores, modes of new files, breadcrumbs);
* `core.tree`: the forest and usage totals.

Threading: every public mutating method holds `self.lock` (an RLock), so a caller that
shares a manager between threads can take the same lock to read a consistent state.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from core import paths, session_files
from core.blobs import BlobStore
from core.context import UNSET, Unset, path_to_root
from core.context import build_session_context as _build_context
from core.errors import EntryNotFoundError, NotASessionError, PersistenceError
from core.pipeline import PersistencePipeline
from core.rewrite import SessionBusyError
from core.session_tail import FileTail, KnownEntries, TailIndex
from core.state import BatchMark, Entry, SessionState
from core.storage import FileSessionStorage, MemorySessionStorage, PathArg, SessionStorage
from core.title_slot import new_title_slot
from core.tree import TreeNode, build_tree

__all__ = [
    "EntryNotFoundError",
    "NotASessionError",
    "PersistenceError",
    "SessionBusyError",
    "SessionManager",
    "sanitize_session_name",
]

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE_RUNS = re.compile(r" {2,}")


def sanitize_session_name(name: str) -> str:
    """Control chars (C0/C1) -> spaces, runs of spaces collapsed, trimmed."""
    return _SPACE_RUNS.sub(" ", _CONTROL_CHARS.sub(" ", name)).strip()


class _RefusingWaits:
    """`SessionManager.refusing_waits`: the manager's lock held and the pipeline told not
    to wait. A plain context manager, not a generator one: it wraps every append the
    mount makes on its event loop (issue 26 point 7)."""

    __slots__ = ("_lock", "_pipeline")

    def __init__(self, lock: threading.RLock, pipeline: PersistencePipeline) -> None:
        self._lock = lock
        self._pipeline = pipeline

    def __enter__(self) -> None:
        self._lock.acquire()
        self._pipeline.refuse_waits = True

    def __exit__(self, *exc: object) -> None:
        self._pipeline.refuse_waits = False
        self._lock.release()


class _Batch:
    """`SessionManager.batch`: a plain context manager rather than a generator one (it
    wraps every append the mount makes: issue 26 point 7)."""

    __slots__ = ("_caught_up", "_manager", "_mark", "_nested")

    def __init__(self, manager: SessionManager, caught_up: bool) -> None:
        self._manager = manager
        self._caught_up = caught_up
        self._mark: BatchMark | None = None
        self._nested = False

    def __enter__(self) -> SessionManager:
        manager = self._manager
        manager.lock.acquire()
        if manager._batch_depth:
            manager._batch_depth += 1
            self._nested = True
            return manager
        try:
            pipeline = manager._pipeline
            pipeline.check_error()
            if pipeline.enabled and not self._caught_up:
                pipeline.catch_up()
            self._mark = manager._state.mark()
        except BaseException:
            manager.lock.release()
            raise
        manager._batch_depth = 1
        return manager

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        manager = self._manager
        try:
            if self._nested:
                manager._batch_depth -= 1
                return
            manager._batch_depth = 0
            mark = self._mark
            assert mark is not None
            if exc is not None:
                manager._rollback_batch(mark)
                return
            new = manager._state.entries[mark.entry_count :]
            if new:
                try:
                    manager._pipeline.persist_new(new)
                except BaseException:
                    manager._rollback_batch(mark)
                    raise
        finally:
            manager.lock.release()


class SessionManager:
    """One session in memory, mirrored to its file. Build it with the classmethods."""

    def __init__(
        self,
        *,
        cwd: str,
        session_dir: str | None,
        persist: bool,
        storage: SessionStorage,
        blob_store: BlobStore | None = None,
        resolve_blobs: bool = True,
    ) -> None:
        self.lock = threading.RLock()
        self._storage = storage
        self._session_dir = session_dir
        self._state = SessionState(cwd)
        self._pipeline = PersistencePipeline(
            self._state,
            storage,
            enabled=persist,
            blob_store=blob_store,
            resolve_blobs=resolve_blobs,
        )
        self._batch_depth = 0

    # ------------------------------------------------------------------ factories

    @classmethod
    def create(
        cls,
        cwd: str,
        session_dir: PathArg | None = None,
        storage: SessionStorage | None = None,
        *,
        title_slot: bool = False,
    ) -> SessionManager:
        """A new session for `cwd`; written once it holds an assistant message.
        ``title_slot``: the file starts with omp 18's title slot (`core.title_slot`);
        only for agent dirs whose agent reads one (pi 0.73 does not)."""
        storage = storage if storage is not None else FileSessionStorage()
        directory = session_files.session_dir_for(cwd, session_dir, storage)
        manager = cls(cwd=cwd, session_dir=directory, persist=True, storage=storage)
        manager._new_session(title_slot=title_slot)
        manager._use_default_blob_store()
        manager._write_breadcrumb()
        return manager

    @classmethod
    def open(
        cls,
        path: PathArg,
        session_dir: PathArg | None = None,
        storage: SessionStorage | None = None,
        *,
        browse: bool = False,
        resolve_blobs: bool = True,
        blob_store: BlobStore | None = None,
        guest: bool = False,
    ) -> SessionManager:
        """Load `path`. A missing/header-less file becomes a fresh session written there,
        unless `browse`, which raises `NotASessionError` and never writes at open.
        ``guest``: this process writes into a file an agent may be running on (the
        mount): every append is refused with `SessionBusyError` while another process
        holds the file open for writing, and is made inside omp's publish lock."""
        storage = storage if storage is not None else FileSessionStorage()
        file = session_files.norm_path(path, storage)
        directory = (
            session_files.norm_path(session_dir, storage) if session_dir is not None else None
        )
        manager = cls(
            cwd=os.getcwd(),
            session_dir=directory or os.path.dirname(file),
            persist=True,
            storage=storage,
            blob_store=(
                blob_store
                if blob_store is not None
                else session_files.default_blob_store(file, storage)
            ),
            resolve_blobs=resolve_blobs,
        )
        manager._pipeline.guest = guest
        manager.set_session_file(file, browse=browse)
        if not browse:
            manager._write_breadcrumb()
        return manager

    @classmethod
    def open_tail(
        cls, path: PathArg, tail: FileTail, known: KnownEntries, labels: Mapping[str, str]
    ) -> SessionManager:
        """A manager that appends to the session file at ``path`` without loading it
        (`core.session_tail`): it starts from the file's ``tail`` (header, leaf, where
        its lines end), asks ``known`` about the entries already there (a new id's
        uniqueness, an id an append refers to) and holds only the entries appended or
        caught up through it, so it answers for appends and nothing else (no context,
        tree or entry list of the session). ``labels``: the file's, for label appends.
        Always a guest (the mount's), like `open`'s, with the same pipeline: ordered
        appends, fsync, latched errors, catch-up of others' lines from ``tail.end``."""
        storage = FileSessionStorage()
        file = session_files.norm_path(path, storage)
        cwd = tail.header.get("cwd")
        manager = cls(
            cwd=cwd if isinstance(cwd, str) else os.getcwd(),
            session_dir=os.path.dirname(file),
            persist=True,
            storage=storage,
            blob_store=session_files.default_blob_store(file, storage),
            resolve_blobs=False,
        )
        state = manager._state
        state.header = dict(tail.header)
        state.title_slot = tail.title_slot
        state.by_id = TailIndex(known)
        state.labels = dict(labels)
        state.leaf_id = tail.leaf_id
        manager._pipeline.guest = True
        manager._pipeline.attach(file, tail.inode, tail.end)
        return manager

    @classmethod
    def continue_recent(
        cls, cwd: str, session_dir: PathArg | None = None, storage: SessionStorage | None = None
    ) -> SessionManager:
        """This terminal's last session for `cwd`, else the newest file (under any name
        the agents give `cwd`'s dir, unless `session_dir` is given), else a new one."""
        storage = storage if storage is not None else FileSessionStorage()
        directories = session_files.continue_dirs(cwd, session_dir, storage)
        target = session_files.recent_session(cwd, directories, storage)
        if target is None:
            return cls.create(cwd, session_dir, storage)
        return cls.open(
            target, session_dir if session_dir is not None else os.path.dirname(target), storage
        )

    @classmethod
    def fork_from(
        cls,
        source: PathArg,
        cwd: str,
        session_dir: PathArg | None = None,
        storage: SessionStorage | None = None,
        *,
        title_slot: bool | None = None,
    ) -> SessionManager:
        """A new session for `cwd` holding a copy of every entry of `source`.

        The source is read (and migrated in memory) but never written. The new header's
        `parentSession` is the source file path, as the agents do for forks across files.
        ``title_slot``: the new file starts with a title slot (None: when the source has
        one).
        """
        storage = storage if storage is not None else FileSessionStorage()
        source_path = session_files.norm_path(source, storage)
        header, entries, slotted = session_files.read_fork_source(source_path, storage)
        directory = session_files.session_dir_for(cwd, session_dir, storage)
        manager = cls(cwd=cwd, session_dir=directory, persist=True, storage=storage)
        manager._new_session(
            parent_session=source_path,
            copy_title_from=header,
            title_slot=slotted if title_slot is None else title_slot,
        )
        manager._pipeline.permissions_model = source_path
        manager._use_default_blob_store()
        manager._state.replace(entries)
        manager._pipeline.run(manager._pipeline.write_full)
        manager._write_breadcrumb()
        return manager

    @classmethod
    def in_memory(
        cls, cwd: str | None = None, storage: SessionStorage | None = None
    ) -> SessionManager:
        """A session that is never written (its storage is a `MemorySessionStorage`)."""
        manager = cls(
            cwd=cwd if cwd is not None else os.getcwd(),
            session_dir=None,
            persist=False,
            storage=storage if storage is not None else MemorySessionStorage(),
        )
        manager._new_session(with_file=False)
        return manager

    def _new_session(
        self,
        *,
        with_file: bool = True,
        parent_session: str | None = None,
        copy_title_from: Mapping[str, Any] | None = None,
        title_slot: bool = False,
    ) -> None:
        """Make this manager hold a new, empty session (and name its file); with
        ``title_slot`` the file will start with omp 18's title slot."""
        header = session_files.new_header(
            self._state.cwd, parent_session=parent_session, copy_title_from=copy_title_from
        )
        file = None
        if with_file and self._session_dir is not None:
            file = session_files.new_session_file(self._session_dir, header)
        self._pipeline.start_new_file(file)
        self._state.header = header
        self._state.title_slot = new_title_slot(header, header["timestamp"]) if title_slot else None
        self._state.replace([])

    def _use_default_blob_store(self) -> None:
        file = self._pipeline.file
        assert file is not None  # a persisted new session always has a file
        self._pipeline.blob_store = session_files.default_blob_store(file, self._storage)

    def _write_breadcrumb(self) -> None:
        """Remember this session for this terminal (best effort, never fatal)."""
        file = self._pipeline.file
        if self._pipeline.enabled and file is not None and self._session_dir is not None:
            session_files.write_breadcrumb(self._storage, self._state.cwd, file, self._session_dir)

    # ------------------------------------------------------------------ loading

    def set_session_file(self, path: PathArg, *, browse: bool = False) -> None:
        """Switch to the session at `path` (spec section 5)."""
        with self.lock:
            file = session_files.norm_path(path, self._storage)
            pipeline = self._pipeline
            pipeline.close_writer()
            migrated = pipeline.load(file)
            if migrated is None:
                if browse:
                    raise NotASessionError(f"{file} is not a session file")
                self._new_session()
                pipeline.file = file
                pipeline.run(pipeline.write_full)
                return
            if migrated and not browse:
                pipeline.run(pipeline.write_full)

    def catch_up(self) -> int:
        """Read what other processes appended since the last load (complete lines).

        Returns the number of new entries (the leaf moves to the last one), or -1 when
        the file was replaced or shrank and was reloaded whole. One stat when unchanged.
        """
        with self.lock:
            return self._pipeline.catch_up()

    # ------------------------------------------------------------------ accessors

    @property
    def session_file(self) -> str | None:
        return self._pipeline.file

    @property
    def version(self) -> int:
        version = self._state.header.get("version")
        return version if isinstance(version, int) and not isinstance(version, bool) else 1

    @property
    def needs_rewrite(self) -> bool:
        return self._pipeline.needs_rewrite

    @property
    def persist_error(self) -> PersistenceError | None:
        return self._pipeline.error

    @property
    def is_persisted(self) -> bool:
        """Whether this manager writes to a file at all (False for `in_memory`)."""
        return self._pipeline.enabled

    @property
    def is_on_disk(self) -> bool:
        return self._pipeline.on_disk

    def take_append_stat(self) -> os.stat_result | None:
        """The session file's stat right after this manager's last append, once, while
        nothing else is known to have changed it since (`PersistencePipeline.take_append_stat`)."""
        return self._pipeline.take_append_stat()

    def refusing_waits(self) -> _RefusingWaits:
        """Inside the block a guest write that would have to wait (another process
        holds the file open for writing, or omp's lock is taken) raises
        `GuestWriteWouldWait` instead, before anything is written (a batch is rolled
        back): for a caller that must not block, an event loop, which then does the
        write again from a thread. The write's own probe decides, so it is made once.
        So does a catch-up that finds the file changed since our last look (by its
        one stat, before reading anything): the caller need not stat it first."""
        return _RefusingWaits(self.lock, self._pipeline)

    def get_header(self) -> Entry:
        return self._state.header

    def get_session_file(self) -> str | None:
        return self._pipeline.file

    def get_session_id(self) -> str:
        return str(self._state.header.get("id", ""))

    def get_cwd(self) -> str:
        return self._state.cwd

    def get_session_name(self) -> str | None:
        title = self._state.header.get("title")
        return title if isinstance(title, str) else None

    def get_entries(self) -> list[Entry]:
        """All entries (no header) in insertion order; a new list, shared dicts."""
        return list(self._state.entries)

    def entry_count(self) -> int:
        return len(self._state.entries)

    def get_entry(self, entry_id: str) -> Entry | None:
        return self._state.by_id.get(entry_id)

    def get_leaf_id(self) -> str | None:
        return self._state.leaf_id

    def get_label(self, entry_id: str) -> str | None:
        return self._state.labels.get(entry_id)

    def get_labels(self) -> dict[str, str]:
        return dict(self._state.labels)

    def get_children(self, entry_id: str) -> list[Entry]:
        """Direct children of `entry_id`, in insertion order."""
        with self.lock:
            return self._state.children_of(entry_id)

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Root -> `from_id` (default: the leaf) path; [] when the id is unknown/None."""
        start = from_id if from_id is not None else self._state.leaf_id
        return path_to_root(start, self._state.by_id)

    def get_tree(self) -> list[TreeNode]:
        """The whole forest as nodes `{entry, children, label}` (`core.tree.build_tree`:
        children oldest first by parsed timestamp, parent cycles cut)."""
        with self.lock:
            return build_tree(self._state.entries, self._state.labels)

    def get_usage_statistics(self) -> dict[str, float]:
        """Token and cost totals over every assistant message of the session, plus the
        sub-agent usage `task` tool results report (a new dict each call)."""
        with self.lock:
            return self._state.usage_statistics()

    def build_session_context(self, leaf_id: str | Unset | None = UNSET) -> dict[str, Any]:
        """The model context at the current leaf (or at `leaf_id`: None = before the
        first entry)."""
        with self.lock:
            leaf = self._state.leaf_id if isinstance(leaf_id, Unset) else leaf_id
            return _build_context(self._state.entries, leaf, self._state.by_id)

    # ------------------------------------------------------------------ tree moves

    def branch(self, entry_id: str) -> None:
        """Move the leaf to `entry_id`; nothing else changes."""
        with self.lock:
            if entry_id not in self._state.by_id:
                raise EntryNotFoundError(entry_id)
            self._state.leaf_id = entry_id

    def reset_leaf(self) -> None:
        """Leaf = None: the next append is a new root."""
        with self.lock:
            self._state.leaf_id = None

    def branch_with_summary(
        self,
        from_id: str | None,
        summary: str,
        details: Any = None,
        from_extension: bool | None = None,
    ) -> str:
        """Leaf = `from_id` (None = before the first entry), then a `branch_summary`."""
        with self.lock:
            if from_id is not None and from_id not in self._state.by_id:
                raise EntryNotFoundError(from_id)
            self._pipeline.check_error()
            self._state.leaf_id = from_id
            body: Entry = {"fromId": from_id if from_id is not None else "root", "summary": summary}
            if details is not None:
                body["details"] = details
            if from_extension is not None:
                body["fromExtension"] = from_extension
            return self._append("branch_summary", body)

    # ------------------------------------------------------------------ appends

    def _append(self, kind: str, body: Mapping[str, Any]) -> str:
        """Create one entry under the leaf, index it, make it the leaf, persist it.

        The hot path of every append: a session already on disk, outside a batch,
        writes the entry's line at once to the open writer.
        """
        with self.lock:
            pipeline = self._pipeline
            pipeline.check_error()
            state = self._state
            entry_id = paths.new_entry_id(state.by_id)
            entry: Entry = {
                "type": kind,
                "id": entry_id,
                "parentId": state.leaf_id,
                "timestamp": paths.now_iso(),
            }
            entry.update(body)
            direct = not self._batch_depth and pipeline.appends_directly()
            # Serialise before touching memory: an entry that cannot be written (not
            # JSON) is refused without leaving a half-applied append behind.
            line = pipeline.persisted_line(entry) if direct else b""
            # Only an append that is persisted on its own may be refused afterwards.
            mark = state.mark() if not direct and not self._batch_depth else None
            state.append(entry)
            if direct:
                pipeline.write_appended(line)
            elif not self._batch_depth:
                try:
                    pipeline.persist_new((entry,))
                except SessionBusyError:  # refused, nothing written: nothing appended
                    assert mark is not None
                    state.rollback(mark)
                    pipeline.forget_unwritten_after(mark.entry_count)
                    raise
            return entry_id

    def append_entry(self, body: Mapping[str, Any]) -> str:
        """Append an entry of any type (`body["type"]`); id, parentId and timestamp are
        assigned here. Unknown types are kept as they are."""
        kind = body.get("type")
        if not isinstance(kind, str) or not kind or kind == "session":
            raise ValueError("an entry needs a string 'type' other than 'session'")
        rest = {k: v for k, v in body.items() if k not in ("type", "id", "parentId", "timestamp")}
        if kind == "label":
            target = rest.get("targetId")
            if not isinstance(target, str) or target not in self._state.by_id:
                raise EntryNotFoundError(target)
        return self._append(kind, rest)

    def append_message(self, message: Mapping[str, Any]) -> str:
        return self._append("message", {"message": message})

    def append_thinking_level_change(self, thinking_level: str | None) -> str:
        return self._append("thinking_level_change", {"thinkingLevel": thinking_level})

    def append_model_change(self, model: str, role: str | None = None) -> str:
        body: Entry = {"model": model}
        if role is not None:
            body["role"] = role
        return self._append("model_change", body)

    def append_compaction(
        self,
        summary: str,
        short_summary: str | None,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_extension: bool | None = None,
        preserve_data: Any = None,
    ) -> str:
        body: Entry = {"summary": summary}
        if short_summary is not None:
            body["shortSummary"] = short_summary
        body["firstKeptEntryId"] = first_kept_entry_id
        body["tokensBefore"] = tokens_before
        for key, value in (
            ("details", details),
            ("fromExtension", from_extension),
            ("preserveData", preserve_data),
        ):
            if value is not None:
                body[key] = value
        return self._append("compaction", body)

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        body: Entry = {"customType": custom_type}
        if data is not None:
            body["data"] = data
        return self._append("custom", body)

    def append_custom_message_entry(
        self,
        custom_type: str,
        content: str | list[Any],
        display: bool,
        details: Any = None,
        attribution: str = "agent",
    ) -> str:
        body: Entry = {"customType": custom_type, "content": content, "display": display}
        if details is not None:
            body["details"] = details
        body["attribution"] = attribution
        return self._append("custom_message", body)

    def append_label_change(self, target_id: str, label: str | None) -> str:
        """Label `target_id` (None or "" clears its label)."""
        with self.lock:
            if target_id not in self._state.by_id:
                raise EntryNotFoundError(target_id)
            body: Entry = {"targetId": target_id}
            if label is not None:
                body["label"] = label
            return self._append("label", body)

    def append_ttsr_injection(self, rules: Sequence[str]) -> str:
        return self._append("ttsr_injection", {"injectedRules": list(rules)})

    def append_session_init(
        self,
        system_prompt: str,
        task: str,
        tools: Sequence[Any],
        output_schema: Any = None,
    ) -> str:
        body: Entry = {"systemPrompt": system_prompt, "task": task, "tools": list(tools)}
        if output_schema is not None:
            body["outputSchema"] = output_schema
        return self._append("session_init", body)

    def append_service_tier_change(self, service_tier: Any) -> str:
        """The agents' `appendServiceTierChange`: None clears the tier."""
        return self._append("service_tier_change", {"serviceTier": service_tier})

    def append_context_change(
        self, context_name: str | None, tenant: str | None, namespace: str | None
    ) -> str:
        """The agents' `appendContextChange` (the active platform context)."""
        return self._append(
            "context_change",
            {"contextName": context_name, "tenant": tenant, "namespace": namespace},
        )

    def append_mcp_tool_selection(self, selected_tool_names: Sequence[str]) -> str:
        """The agents' `appendMCPToolSelection` (latest on the path wins)."""
        return self._append("mcp_tool_selection", {"selectedToolNames": list(selected_tool_names)})

    def append_mode_change(self, mode: str, data: Mapping[str, Any] | None = None) -> str:
        body: Entry = {"mode": mode}
        if data is not None:
            body["data"] = data
        return self._append("mode_change", body)

    def batch(self, *, caught_up: bool = False) -> _Batch:
        """Appends inside go to disk as one write on exit, all or nothing.

        The file is caught up first (``caught_up``: the caller did, holding `lock`
        since), so new entries chain onto what other processes wrote. If the block
        raises or the write fails, every entry appended inside is removed from memory
        and the leaf restored. Nested batches join the outer one.
        """
        return _Batch(self, caught_up)

    def _rollback_batch(self, mark: BatchMark) -> None:
        """A batch failed: the entries appended inside it leave memory again."""
        self._state.rollback(mark)
        self._pipeline.forget_unwritten_after(mark.entry_count)

    # ------------------------------------------------------------------ durability

    def ensure_on_disk(self) -> None:
        """Write the session now (even without an assistant message); later appends
        go straight to disk. A pending migration rewrite happens here too."""
        with self.lock:
            pipeline = self._pipeline
            if pipeline.enabled and (not pipeline.on_disk or pipeline.needs_rewrite):
                pipeline.run(pipeline.write_full)

    def rewrite_entries(self) -> None:
        """Atomically rewrite the file after in-place entry edits: the entries that
        differ from their stored line are re-serialised, every other line is kept."""
        with self.lock:
            pipeline = self._pipeline
            if pipeline.enabled and (pipeline.on_disk or self._state.has_assistant):
                pipeline.run(lambda: pipeline.write_full(compare_entries=True))

    def flush(self) -> None:
        """Push everything written so far to stable storage (fsync)."""
        with self.lock:
            self._pipeline.flush()

    def close(self) -> None:
        """Flush and close the file; best effort, but the first error is raised."""
        with self.lock:
            self._pipeline.close()

    def __enter__(self) -> SessionManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ whole-session ops

    def _start_whole_session_op(self, name: str) -> None:
        """Common preamble: not inside a batch, no latched error, caught up with disk."""
        if self._batch_depth:
            raise RuntimeError(f"{name} inside batch()")
        self._pipeline.check_error()
        self._pipeline.catch_up_before_rewrite()

    def set_session_name(self, name: str, source: str = "auto", trigger: str | None = None) -> bool:
        """Set the title. Returns False when an "auto" name would replace a "user" one;
        raises ValueError when nothing is left after cleaning.

        A file with omp 18's title slot is renamed as omp renames it: a `title_change`
        entry is appended (the new leaf) and the slot's 256 bytes are overwritten in
        place; the title is also recorded in `history.db`'s `session_titles` when that
        table exists. Any other file gets the title in its header (a rewrite)."""
        clean = sanitize_session_name(name)
        if not clean:
            raise ValueError("session name is empty")
        with self.lock:
            self._start_whole_session_op("set_session_name")
            header = self._state.header
            if source == "auto" and header.get("titleSource") == "user":
                return False
            pipeline = self._pipeline
            if self._state.title_slot is not None and pipeline.enabled and pipeline.on_disk:
                self._rename_in_slot(clean, source, trigger)
                return True
            before: Entry = {k: header[k] for k in ("title", "titleSource") if k in header}
            header["title"] = clean
            header["titleSource"] = source
            pipeline = self._pipeline
            if pipeline.enabled and pipeline.on_disk:
                try:
                    pipeline.run(pipeline.write_full)
                except (PersistenceError, SessionBusyError):
                    header.pop("title", None)
                    header.pop("titleSource", None)
                    header.update(before)
                    raise
            return True

    def _rename_in_slot(self, title: str, source: str, trigger: str | None) -> None:
        """omp 18's rename of a slot file (see `set_session_name`)."""
        state, pipeline = self._state, self._pipeline
        header = state.header
        body: Entry = {"title": title, "source": source}
        previous = header.get("title")
        if isinstance(previous, str) and previous:
            body["previousTitle"] = previous
        if trigger:
            body["trigger"] = trigger
        entry_id = self._append("title_change", body)
        before: Entry = {k: header[k] for k in ("title", "titleSource") if k in header}
        header["title"], header["titleSource"] = title, source
        try:
            slot = new_title_slot(header, state.by_id[entry_id]["timestamp"])
            pipeline.overwrite_title_slot(slot)
        except BaseException:
            # The entry is on disk; the header keeps the title the slot still holds.
            header.pop("title", None)
            header.pop("titleSource", None)
            header.update(before)
            raise
        file = pipeline.file
        if file is not None and isinstance(self._storage, FileSessionStorage):
            session_files.record_title(file, self.get_session_id(), title)

    def create_branched_session(self, leaf_id: str, *, switch: bool = True) -> str | None:
        """A new session holding only the root -> `leaf_id` path (labels re-created).

        With `switch` (the default, as in the agents) this manager moves to the new
        session, which is written under the usual deferral rules. With `switch=False`
        the new file is written at once and this manager is left as it was.
        Returns the new file path (None for an in-memory session).
        """
        with self.lock:
            if leaf_id not in self._state.by_id:
                raise EntryNotFoundError(leaf_id)
            self._start_whole_session_op("create_branched_session")
            entries = session_files.branched_entries(leaf_id, self._state.by_id, self._state.labels)
            persist = self._pipeline.enabled
            old_file = self._pipeline.file
            target = self if switch else self._sibling()
            target._new_session(
                with_file=persist,
                parent_session=old_file if persist else None,
                title_slot=self._state.title_slot is not None,
            )
            target._pipeline.permissions_model = old_file
            target._state.replace(entries)
            # Switching keeps the deferral rule (written once an assistant message is
            # there); a detached copy is written now so the new file exists.
            if persist and (not switch or target._state.has_assistant):
                target._pipeline.run(target._pipeline.write_full)
            if not switch:
                target.close()
            return target._pipeline.file

    def _sibling(self) -> SessionManager:
        """An empty manager with this one's settings (for ops that leave `self` alone)."""
        return SessionManager(
            cwd=self._state.cwd,
            session_dir=self._session_dir,
            persist=self._pipeline.enabled,
            storage=self._storage,
            blob_store=self._pipeline.blob_store,
        )

    def fork(self, *, switch: bool = True) -> str | None:
        """Copy every entry into a new session (new id and file, same dir), title kept,
        `parentSession` = this session's id; written at once (atomically)."""
        with self.lock:
            self._start_whole_session_op("fork")
            old_id = self.get_session_id()
            source_file = self._pipeline.file
            entries = list(self._state.entries)
            leaf = self._state.leaf_id
            target = self if switch else self._sibling()
            target._new_session(
                with_file=self._pipeline.enabled,
                parent_session=old_id,
                copy_title_from=self._state.header,
                title_slot=self._state.title_slot is not None,
            )
            target._pipeline.permissions_model = source_file
            target._state.replace(entries)
            target._state.leaf_id = leaf
            if target._pipeline.enabled:
                target._pipeline.run(target._pipeline.write_full)
            if not switch:
                target.close()
            return target._pipeline.file

    def move_to(self, new_cwd: str) -> str | None:
        """Move the session (file and its artifacts dir) to `new_cwd`'s session dir.

        Every step is undone if a later one fails; the header's cwd is rewritten in
        the new place. Returns the new file path.
        """
        with self.lock:
            self._start_whole_session_op("move_to")
            state, pipeline = self._state, self._pipeline
            old_file, old_dir, old_cwd = pipeline.file, self._session_dir, state.cwd
            old_header_cwd = state.header.get("cwd")
            if old_file is None or not pipeline.enabled:
                state.cwd = new_cwd
                state.header["cwd"] = new_cwd
                return old_file
            new_dir, new_file = session_files.move_destination(old_file, new_cwd, self._storage)
            if new_file != old_file and self._storage.exists(new_file):
                raise FileExistsError(f"{new_file} already exists")
            moved: list[tuple[str, str]] = []
            pipeline.close_writer()
            try:
                if new_file != old_file:
                    moved = session_files.move_artifacts(self._storage, old_file, new_file, new_dir)
                state.header["cwd"] = new_cwd
                if pipeline.on_disk and self._storage.exists(old_file):
                    # The session file moves last, by the carrying rewrite itself: lines
                    # an agent appends to the old file meanwhile are carried over.
                    pipeline.write_full(target=new_file if new_file != old_file else None)
                pipeline.file, self._session_dir, state.cwd = new_file, new_dir, new_cwd
            except BaseException:
                session_files.undo_moves(self._storage, moved)
                pipeline.file, self._session_dir, state.cwd = old_file, old_dir, old_cwd
                if old_header_cwd is None:
                    state.header.pop("cwd", None)
                else:
                    state.header["cwd"] = old_header_cwd
                pipeline.close_writer()
                pipeline.restore_file_identity()
                raise
            return new_file
