"""SessionManager: one session's tree, leaf pointer and persistence pipeline.

A session is an append-only list of entries (plain dicts, so unknown fields survive)
plus a movable leaf pointer. The manager keeps them in memory, indexed by id, and
mirrors appends to the session file (spec sections 5-7):

* A new session is not written before it holds an assistant message (or
  `ensure_on_disk()` is called); then the whole session is written by an atomic
  rewrite, and from then on each append is one line, written with one `os.write` on an
  `O_APPEND` descriptor (a `batch()` is one write for all its lines). A session loaded
  from an existing file is on disk already: its appends are written at once.
* Whole-file changes (migration, title, move, `rewrite_entries`) go through
  `storage.rewrite` (`core.rewrite`): temp file + fsync + rename + directory fsync,
  carrying over lines other processes append meanwhile, and refused with
  `SessionBusyError` while another process holds the file open for writing. Only the
  lines that change are re-serialised (`core.line_rewrite`); every other line keeps its
  bytes. New files (first write, fork) go through `atomic_write`.
* The first persistence error is latched, logged once, and raised again by every later
  persisting call, `flush()` and `close()`.

Threading: every public mutating method holds `self.lock` (an RLock), so a caller that
shares a manager between threads can take the same lock to read a consistent state.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from core import discovery, paths
from core.blobs import BlobStore, may_contain_blob_refs
from core.context import UNSET, path_to_root
from core.context import build_session_context as _build_context
from core.jsonl import complete_prefix_length, dumps_line, is_header, loads, parse_jsonl_lenient
from core.line_rewrite import NotASessionFileError, rewrite_session_lines
from core.migrate import CURRENT_SESSION_VERSION, migrate_session_entries
from core.persist import MAX_PERSIST_CHARS, prepare_for_persist, resolve_blob_refs
from core.rewrite import SessionBusyError, SourceReplacedError
from core.storage import (
    FileSessionStorage,
    MemorySessionStorage,
    PathArg,
    SessionStorage,
    SessionWriter,
    StorageStat,
    atomic_write,
)
from core.tree import (
    add_usage,
    build_tree,
    children_index,
    is_assistant_message,
    last_id,
    parent_of,
    usage_totals,
)

__all__ = [
    "EntryNotFoundError",
    "NotASessionError",
    "PersistenceError",
    "SessionBusyError",
    "SessionManager",
    "sanitize_session_name",
]

log = logging.getLogger(__name__)

Entry = dict[str, Any]


class NotASessionError(Exception):
    """The file is missing or has no session header (browse loads, `fork_from`)."""


class PersistenceError(Exception):
    """Writing the session file failed; the cause is chained (`__cause__`)."""


class EntryNotFoundError(KeyError):
    """An entry id that is not in the session ("Entry <id> not found")."""

    def __init__(self, entry_id: object) -> None:
        super().__init__(entry_id)
        self.entry_id = entry_id

    def __str__(self) -> str:
        return f"Entry {self.entry_id} not found"


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE_RUNS = re.compile(r" {2,}")


def sanitize_session_name(name: str) -> str:
    """Control chars (C0/C1) -> spaces, runs of spaces collapsed, trimmed."""
    return _SPACE_RUNS.sub(" ", _CONTROL_CHARS.sub(" ", name)).strip()


@dataclass(slots=True)
class _BatchMark:
    """What a failed batch restores."""

    entry_count: int
    leaf_id: str | None
    labels: dict[str, str]
    has_assistant: bool


def _default_blob_store(path: str, storage: SessionStorage) -> BlobStore | None:
    """`<agent>/blobs` for a file inside an agent dir, else `blobs/` beside the file.

    Only the real filesystem has a blob store: `BlobStore` writes files itself.
    """
    if not isinstance(storage, FileSessionStorage):
        return None
    agent_dir = paths.agent_dir_for_session_file(path)
    if agent_dir is not None:
        return BlobStore(paths.blobs_dir(agent_dir))
    return BlobStore(Path(os.path.dirname(path)) / "blobs")


def _agent_dir_of_session_dir(session_dir: str) -> Path | None:
    """`<agent>` when `session_dir` is `<agent>/sessions/<project>`."""
    p = Path(session_dir)
    return p.parent.parent if p.parent.name == "sessions" else None


def _norm_path(path: PathArg, storage: SessionStorage) -> str:
    text = os.fspath(path)
    if isinstance(storage, FileSessionStorage):
        return os.path.abspath(text)
    return os.path.normpath(text)


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
    ) -> None:
        self.lock = threading.RLock()
        self._storage = storage
        self._persist = persist
        self._cwd = cwd
        self._session_dir = session_dir
        self._session_file: str | None = None
        self._blob_store = blob_store
        self._resolve_blobs = True
        self._header: Entry = {}
        self._entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self._labels: dict[str, str] = {}
        self._leaf_id: str | None = None
        self._has_assistant = False
        # Lazily built caches, kept up to date by appends once they exist.
        self._children: dict[str, list[Entry]] | None = None
        self._usage: dict[str, float] | None = None
        # Persistence state.
        self._on_disk = False  # the file exists and holds everything persisted so far
        self._needs_rewrite = False  # the next persist must be a full atomic rewrite
        self._writer: SessionWriter | None = None
        self._persist_error: PersistenceError | None = None
        self._batch_depth = 0
        # What was loaded from disk (catch_up compares against it).
        self._file_size = 0
        self._file_mtime = 0.0
        self._file_inode: int | None = None
        self._loaded_offset = 0
        # How many leading entries have their line in the file; the rest are unwritten
        # (a deferred session, or appends waiting for a pending migration rewrite).
        self._disk_entries = 0
        # A new file takes this file's mode and owner (a fork: its source's).
        self._permissions_model: str | None = None

    # ------------------------------------------------------------------ factories

    @classmethod
    def create(
        cls, cwd: str, session_dir: PathArg | None = None, storage: SessionStorage | None = None
    ) -> SessionManager:
        """A new session for `cwd`; written once it holds an assistant message."""
        storage = storage if storage is not None else FileSessionStorage()
        directory = _norm_path(
            session_dir if session_dir is not None else paths.session_dir_for_cwd(cwd), storage
        )
        manager = cls(cwd=cwd, session_dir=directory, persist=True, storage=storage)
        manager._new_session()
        manager._blob_store = _default_blob_store(manager._require_file(), storage)
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
    ) -> SessionManager:
        """Load `path`. A missing/header-less file becomes a fresh session written there,
        unless `browse`, which raises `NotASessionError` and never writes at open."""
        storage = storage if storage is not None else FileSessionStorage()
        file = _norm_path(path, storage)
        directory = _norm_path(session_dir, storage) if session_dir is not None else None
        manager = cls(
            cwd=os.getcwd(),
            session_dir=directory or os.path.dirname(file),
            persist=True,
            storage=storage,
            blob_store=blob_store if blob_store is not None else _default_blob_store(file, storage),
        )
        manager._resolve_blobs = resolve_blobs
        manager.set_session_file(file, browse=browse)
        if not browse:
            manager._write_breadcrumb()
        return manager

    @classmethod
    def continue_recent(
        cls, cwd: str, session_dir: PathArg | None = None, storage: SessionStorage | None = None
    ) -> SessionManager:
        """This terminal's last session for `cwd`, else the newest file, else a new one."""
        storage = storage if storage is not None else FileSessionStorage()
        directory = _norm_path(
            session_dir if session_dir is not None else paths.session_dir_for_cwd(cwd), storage
        )
        agent_dir = _agent_dir_of_session_dir(directory)
        target: str | None = None
        if agent_dir is not None:
            crumb = discovery.read_terminal_breadcrumb(cwd, agent_dir, storage=storage)
            if crumb is not None and storage.exists(crumb):
                target = crumb
        if target is None:
            target = discovery.find_most_recent_session(directory, storage=storage)
        if target is None:
            return cls.create(cwd, directory, storage)
        manager = cls.open(target, directory, storage)
        return manager

    @classmethod
    def fork_from(
        cls,
        source: PathArg,
        cwd: str,
        session_dir: PathArg | None = None,
        storage: SessionStorage | None = None,
    ) -> SessionManager:
        """A new session for `cwd` holding a copy of every entry of `source`.

        The source is read (and migrated in memory) but never written. The new header's
        `parentSession` is the source file path, as the agents do for forks across files.
        """
        storage = storage if storage is not None else FileSessionStorage()
        source_path = _norm_path(source, storage)
        try:
            data = storage.read_bytes(source_path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise NotASessionError(f"Cannot fork: {source_path} does not exist") from exc
        loaded = parse_jsonl_lenient(data)
        if not loaded or not is_header(loaded[0]):
            raise NotASessionError(f"Cannot fork: {source_path} is empty or not a session")
        migrate_session_entries(loaded)
        source_blobs = _default_blob_store(source_path, storage)
        if source_blobs is not None and may_contain_blob_refs(data):
            for entry in loaded[1:]:
                resolve_blob_refs(entry, source_blobs)
        directory = _norm_path(
            session_dir if session_dir is not None else paths.session_dir_for_cwd(cwd), storage
        )
        manager = cls(cwd=cwd, session_dir=directory, persist=True, storage=storage)
        manager._new_session(parent_session=source_path, copy_title_from=loaded[0])
        manager._permissions_model = source_path
        manager._blob_store = _default_blob_store(manager._require_file(), storage)
        manager._replace_entries(loaded[1:])
        manager._persisting(manager._write_full)
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

    # ------------------------------------------------------------------ loading

    def _new_session(
        self,
        *,
        with_file: bool = True,
        parent_session: str | None = None,
        copy_title_from: Mapping[str, Any] | None = None,
    ) -> None:
        timestamp = paths.now_iso()
        header: Entry = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": paths.new_session_id(),
            "timestamp": timestamp,
            "cwd": self._cwd,
        }
        if copy_title_from is not None:
            for key in ("title", "titleSource"):
                if key in copy_title_from:
                    header[key] = copy_title_from[key]
        if parent_session is not None:
            header["parentSession"] = parent_session
        self._close_writer()
        self._header = header
        self._replace_entries([])
        self._permissions_model = None
        self._on_disk = False
        self._needs_rewrite = False
        self._file_inode = None
        self._file_size = 0
        self._loaded_offset = 0
        if with_file and self._session_dir is not None:
            self._session_file = os.path.join(
                self._session_dir, paths.session_file_name(timestamp, header["id"])
            )
        else:
            self._session_file = None

    def _replace_entries(self, entries: list[Entry]) -> None:
        """Make `entries` (no header) the session and index them; leaf = last entry."""
        self._entries = []
        self._by_id = {}
        self._labels = {}
        self._has_assistant = False
        self._children = None
        self._usage = None
        self._disk_entries = 0
        self._index_new(entries)
        self._entries = entries
        self._leaf_id = last_id(entries)

    def _index_new(self, entries: Sequence[Entry]) -> None:
        """Add freshly loaded/appended entries to every index (kept cheap per entry)."""
        by_id = self._by_id
        labels = self._labels
        children = self._children
        usage = self._usage
        has_assistant = self._has_assistant
        for entry in entries:
            entry_id = entry.get("id")
            if isinstance(entry_id, str):
                by_id[entry_id] = entry  # duplicate ids: the last one wins, as in the agents
            kind = entry.get("type")
            if kind == "label":
                target = entry.get("targetId")
                if isinstance(target, str):
                    label = entry.get("label")
                    if isinstance(label, str) and label:
                        labels[target] = label
                    else:
                        labels.pop(target, None)
            elif kind == "message" and not has_assistant:
                has_assistant = is_assistant_message(entry)
            if children is not None:
                parent = parent_of(entry)
                if parent is not None:
                    children.setdefault(parent, []).append(entry)
            if usage is not None:
                add_usage(usage, entry)
        self._has_assistant = has_assistant

    def set_session_file(self, path: PathArg, *, browse: bool = False) -> None:
        """Switch to the session at `path` (spec section 5)."""
        with self.lock:
            file = _norm_path(path, self._storage)
            self._close_writer()
            self._session_file = file
            migrated = self._load_from_disk(file)
            if migrated is None:
                if browse:
                    raise NotASessionError(f"{file} is not a session file")
                self._new_session()
                self._session_file = file
                self._persisting(self._write_full)
                return
            if migrated and not browse:
                self._persisting(self._write_full)

    def _load_from_disk(self, file: str) -> bool | None:
        """Load and index `file`. None = not a session; else whether migration changed it."""
        try:
            data, st = self._storage.read_bytes_with_stat(file)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        loaded = parse_jsonl_lenient(data)
        if not loaded or not is_header(loaded[0]):
            return None
        migrated = migrate_session_entries(loaded)
        if self._resolve_blobs and self._blob_store is not None and may_contain_blob_refs(data):
            for entry in loaded:
                resolve_blob_refs(entry, self._blob_store)
        self._header = loaded[0]
        cwd = self._header.get("cwd")
        if isinstance(cwd, str):
            self._cwd = cwd
        del loaded[0]  # O(n) pointer move, no copies of the entries
        self._replace_entries(loaded)
        self._disk_entries = len(loaded)
        self._on_disk = True
        self._needs_rewrite = migrated
        self._remember_file(st, self._consumed_length(data))
        return migrated

    @staticmethod
    def _consumed_length(data: bytes) -> int:
        """Bytes of `data` that hold complete lines. A last line without "\\n" counts
        only if it is a whole JSON object; a torn one is left for a later catch-up."""
        end = complete_prefix_length(data)
        tail = data[end:]
        if not tail.strip():
            return len(data)
        try:
            return len(data) if isinstance(loads(tail), dict) else end
        except ValueError:
            return end

    def _remember_file(self, st: StorageStat, offset: int) -> None:
        self._file_size = st.size
        self._file_mtime = st.mtime
        self._file_inode = st.inode
        self._loaded_offset = offset

    def catch_up(self) -> int:
        """Read what other processes appended since the last load (complete lines).

        Returns the number of new entries (the leaf moves to the last one), or -1 when
        the file was replaced or shrank and was reloaded whole. One stat when unchanged.
        """
        with self.lock:
            file = self._session_file
            if file is None or self._file_inode is None:
                return 0
            try:
                st = self._storage.stat(file)
            except OSError:
                return 0
            if st.inode != self._file_inode or st.size < self._loaded_offset:
                self._reload()
                return -1
            if st.size == self._loaded_offset:
                self._file_size, self._file_mtime = st.size, st.mtime
                return 0
            if self._needs_rewrite:
                # Migrated in memory only: ids of new v1 lines depend on the whole file.
                self._reload()
                return -1
            data = self._storage.read_bytes_from(file, self._loaded_offset)
            end = complete_prefix_length(data)
            if end == 0:
                return 0
            known = self._by_id
            new = [
                obj
                for obj in parse_jsonl_lenient(data[:end])
                if obj.get("type") != "session"
                and not (isinstance(obj.get("id"), str) and obj["id"] in known)
            ]
            if self._resolve_blobs and self._blob_store is not None:
                for entry in new:
                    resolve_blob_refs(entry, self._blob_store)
            if self._disk_entries == len(self._entries):
                self._disk_entries += len(new)
            self._entries.extend(new)
            self._index_new(new)
            self._loaded_offset += end
            self._file_size, self._file_mtime = st.size, st.mtime
            last = last_id(new)
            if last is not None:
                self._leaf_id = last
            return len(new)

    def _reload(self) -> None:
        assert self._session_file is not None
        self._close_writer()
        if self._load_from_disk(self._session_file) is None:
            # Replaced by something that is not a session: keep what we have in memory.
            self._file_inode = None

    # ------------------------------------------------------------------ accessors

    @property
    def storage(self) -> SessionStorage:
        return self._storage

    @property
    def blob_store(self) -> BlobStore | None:
        return self._blob_store

    @property
    def session_file(self) -> str | None:
        return self._session_file

    @property
    def version(self) -> int:
        version = self._header.get("version")
        return version if isinstance(version, int) and not isinstance(version, bool) else 1

    @property
    def needs_rewrite(self) -> bool:
        return self._needs_rewrite

    @property
    def persist_error(self) -> PersistenceError | None:
        return self._persist_error

    @property
    def is_persisted(self) -> bool:
        """Whether this manager writes to a file at all (False for `in_memory`)."""
        return self._persist

    @property
    def is_on_disk(self) -> bool:
        return self._on_disk

    @property
    def file_size(self) -> int:
        return self._file_size

    @property
    def file_mtime(self) -> float:
        return self._file_mtime

    @property
    def file_inode(self) -> int | None:
        return self._file_inode

    def get_header(self) -> Entry:
        return self._header

    def get_session_file(self) -> str | None:
        return self._session_file

    def get_session_id(self) -> str:
        return str(self._header.get("id", ""))

    def get_session_dir(self) -> str | None:
        return self._session_dir

    def get_cwd(self) -> str:
        return self._cwd

    def get_session_name(self) -> str | None:
        title = self._header.get("title")
        return title if isinstance(title, str) else None

    def get_entries(self) -> list[Entry]:
        """All entries (no header) in insertion order; a new list, shared dicts."""
        return list(self._entries)

    def entry_count(self) -> int:
        return len(self._entries)

    def get_entry(self, entry_id: str) -> Entry | None:
        return self._by_id.get(entry_id)

    def get_leaf_id(self) -> str | None:
        return self._leaf_id

    def get_leaf_entry(self) -> Entry | None:
        return self._by_id.get(self._leaf_id) if self._leaf_id is not None else None

    def get_label(self, entry_id: str) -> str | None:
        return self._labels.get(entry_id)

    def get_labels(self) -> dict[str, str]:
        return dict(self._labels)

    def get_children(self, entry_id: str) -> list[Entry]:
        """Direct children of `entry_id`, in insertion order."""
        with self.lock:
            if self._children is None:
                self._children = children_index(self._entries)
            return list(self._children.get(entry_id, ()))

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Root -> `from_id` (default: the leaf) path; [] when the id is unknown/None."""
        start = from_id if from_id is not None else self._leaf_id
        return path_to_root(start, self._by_id)

    def get_tree(self) -> list[dict[str, Any]]:
        """The whole forest as nodes `{entry, children, label}`, children oldest first.

        Roots are entries whose parent is null, themselves, or missing. Entries caught
        in a parent cycle (no root above them) are attached as extra roots, the cycle
        cut at the first of them in file order, so every entry appears exactly once.
        Iterative throughout: a 10^5-deep chain is fine.
        """
        with self.lock:
            return build_tree(self._entries, self._labels)

    def get_usage_statistics(self) -> dict[str, float]:
        """Token and cost totals over every assistant message of the session."""
        with self.lock:
            if self._usage is None:
                self._usage = usage_totals(self._entries)
            return dict(self._usage)

    def build_session_context(self, leaf_id: str | object | None = UNSET) -> dict[str, Any]:
        """The model context at the current leaf (or at `leaf_id`)."""
        with self.lock:
            leaf = self._leaf_id if leaf_id is UNSET else leaf_id
            return _build_context(self._entries, leaf, self._by_id)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ tree moves

    def branch(self, entry_id: str) -> None:
        """Move the leaf to `entry_id`; nothing else changes."""
        with self.lock:
            if entry_id not in self._by_id:
                raise EntryNotFoundError(entry_id)
            self._leaf_id = entry_id

    def reset_leaf(self) -> None:
        """Leaf = None: the next append is a new root."""
        with self.lock:
            self._leaf_id = None

    def branch_with_summary(
        self,
        from_id: str | None,
        summary: str,
        details: Any = None,
        from_extension: bool | None = None,
    ) -> str:
        """Leaf = `from_id` (None = before the first entry), then a `branch_summary`."""
        with self.lock:
            if from_id is not None and from_id not in self._by_id:
                raise EntryNotFoundError(from_id)
            self._check_persist_error()
            self._leaf_id = from_id
            body: Entry = {"fromId": from_id if from_id is not None else "root", "summary": summary}
            if details is not None:
                body["details"] = details
            if from_extension is not None:
                body["fromExtension"] = from_extension
            return self._append("branch_summary", body)

    # ------------------------------------------------------------------ appends

    def _append(self, kind: str, body: Mapping[str, Any]) -> str:
        """Create one entry under the leaf, index it, make it the leaf, persist it.

        This is the hot path of every append, so the common case (a session already on
        disk, no batch) is written out inline rather than through the general helpers.
        """
        with self.lock:
            if self._persist_error is not None and self._persist:
                raise self._persist_error
            by_id = self._by_id
            entry_id = paths.new_entry_id(by_id)
            entry: Entry = {
                "type": kind,
                "id": entry_id,
                "parentId": self._leaf_id,
                "timestamp": paths.now_iso(),
            }
            entry.update(body)
            writer = self._writer
            fast = (
                writer is not None
                and self._persist
                and self._on_disk
                and not self._needs_rewrite
                and not self._batch_depth
            )
            # Serialise before touching memory: an entry that cannot be written (not
            # JSON) is refused without leaving a half-applied append behind.
            line = self._persisted_line(entry) if fast else b""
            self._entries.append(entry)
            if kind == "label" or self._children is not None or self._usage is not None:
                self._index_new((entry,))
            else:
                by_id[entry_id] = entry
                if kind == "message" and not self._has_assistant:
                    self._has_assistant = is_assistant_message(entry)
            self._leaf_id = entry_id
            if not fast or writer is None:
                if not self._batch_depth:
                    self._persist_new((entry,))
                return entry_id
            before = self._loaded_offset
            try:
                writer.write(line)
            except Exception as exc:
                self._latch(exc)
            self._disk_entries = len(self._entries)
            self._after_own_append(writer, before)
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
            if not isinstance(target, str) or target not in self._by_id:
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
            if target_id not in self._by_id:
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

    def append_mode_change(self, mode: str, data: Mapping[str, Any] | None = None) -> str:
        body: Entry = {"mode": mode}
        if data is not None:
            body["data"] = data
        return self._append("mode_change", body)

    @contextlib.contextmanager
    def batch(self) -> Iterator[SessionManager]:
        """Appends inside go to disk as one write on exit, all or nothing.

        The file is caught up first, so new entries chain onto what other processes
        wrote. If the block raises or the write fails, every entry appended inside is
        removed from memory and the leaf restored. Nested batches join the outer one.
        """
        with self.lock:
            if self._batch_depth:
                self._batch_depth += 1
                try:
                    yield self
                finally:
                    self._batch_depth -= 1
                return
            self._check_persist_error()
            if self._persist:
                self.catch_up()
            mark = _BatchMark(
                len(self._entries), self._leaf_id, dict(self._labels), self._has_assistant
            )
            self._batch_depth = 1
            try:
                yield self
                self._batch_depth = 0
                new = self._entries[mark.entry_count :]
                if new:
                    self._persist_new(new)
            except BaseException:
                self._batch_depth = 0
                self._rollback(mark)
                raise

    def _rollback(self, mark: _BatchMark) -> None:
        removed = self._entries[mark.entry_count :]
        del self._entries[mark.entry_count :]
        for entry in removed:
            entry_id = entry.get("id")
            if isinstance(entry_id, str) and self._by_id.get(entry_id) is entry:
                del self._by_id[entry_id]
        self._labels = mark.labels
        self._leaf_id = mark.leaf_id
        self._disk_entries = min(self._disk_entries, mark.entry_count)
        self._has_assistant = mark.has_assistant
        self._children = None
        self._usage = None

    # ------------------------------------------------------------------ persistence

    def _require_file(self) -> str:
        if self._session_file is None:
            raise PersistenceError("this session has no file")
        return self._session_file

    def _check_persist_error(self) -> None:
        if self._persist and self._persist_error is not None:
            raise self._persist_error

    def _latch(self, exc: BaseException) -> NoReturn:
        if self._persist_error is None:
            error = PersistenceError(f"Failed to persist session {self._session_file}: {exc}")
            error.__cause__ = exc
            self._persist_error = error
            log.error("%s", error)
        raise self._persist_error

    def _persisting(self, operation: Callable[[], None]) -> None:
        """Run a disk operation; its first failure is latched and (re)raised."""
        self._check_persist_error()
        try:
            operation()
        except SessionBusyError:
            raise  # refused with the file untouched: nothing to latch
        except Exception as exc:
            self._latch(exc)

    # The copy made by `prepare_for_persist` is only needed when the serialised line
    # shows something it would change. A line of at most MAX_PERSIST_CHARS bytes cannot
    # hold a string over the limit (a UTF-16 length never exceeds the UTF-8 length);
    # without the markers below it has no dropped key, no image block and no image_url.
    # Such a line already is its persisted form, and the costly deep copy is skipped.
    def _persisted_line(self, entry: Entry) -> bytes:
        line = dumps_line(entry)
        if (
            len(line) <= MAX_PERSIST_CHARS
            and b'"partialJson"' not in line
            and b'"jsonlEvents"' not in line
            and b'"image' not in line
        ):
            return line
        return dumps_line(prepare_for_persist(entry, self._blob_store))

    def _persist_new(self, new: Sequence[Entry]) -> None:
        """Mirror freshly appended entries to disk, following the deferral rules."""
        if not self._persist:
            return
        if not self._on_disk:
            if self._has_assistant:
                self._persisting(self._write_full)
            return  # deferred until the first assistant message or ensure_on_disk()
        if self._needs_rewrite:
            self._persisting(self._write_full)
            return
        self._append_line(b"".join(self._persisted_line(e) for e in new))

    def _append_line(self, data: bytes) -> None:
        """One write of whole lines to the append writer; failures are latched."""
        try:
            self._write_append(data)
        except Exception as exc:
            self._latch(exc)

    def _open_writer(self) -> SessionWriter:
        if self._writer is None:
            self._writer = self._storage.open_writer(self._require_file(), "a")
        return self._writer

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()

    def _write_append(self, data: bytes) -> None:
        writer = self._open_writer()
        before = self._loaded_offset
        writer.write(data)
        self._disk_entries = len(self._entries)
        self._after_own_append(writer, before)

    def _after_own_append(self, writer: SessionWriter, before: int) -> None:
        # Our own lines need no catch-up: advance the offset when nothing else was
        # written in between (then our write started exactly where we had read to).
        span = getattr(writer, "last_write_span", None)
        if span is not None and span[0] == before:
            self._loaded_offset = self._file_size = span[1]

    def _write_full(self, *, compare_entries: bool = False, target: str | None = None) -> None:
        """Bring the file in line with memory; afterwards appends go line by line.

        A file we have loaded is rewritten in place (`_rewrite_in_place`); otherwise
        the whole session is written as a new file. ``compare_entries``: entries may
        have been edited in place, re-serialise those that differ from the file.
        ``target``: move the file there (same bytes rules) instead.
        """
        file = self._require_file()
        self._close_writer()
        if self._on_disk and self._file_inode is not None:
            self._rewrite_in_place(file, compare_entries=compare_entries, target=target)
        else:
            self._write_new_file(target or file)

    def _write_new_file(self, file: str) -> None:
        """Header + every entry (size rules applied: they are all new to this file)."""
        lines = [dumps_line(self._header)]
        lines.extend(self._persisted_line(e) for e in self._entries)
        self._storage.ensure_dir(os.path.dirname(file) or ".")
        atomic_write(self._storage, file, lines, permissions_from=self._permissions_source(file))
        self._session_file = file
        self._on_disk = True
        self._needs_rewrite = False
        self._disk_entries = len(self._entries)
        written = sum(len(line) for line in lines)
        try:
            self._remember_file(self._storage.stat(file), written)
        except OSError:
            self._file_inode = None

    def _permissions_source(self, file: str) -> str | None:
        """Whose mode a new file takes: the file itself when it exists, else the fork
        source, else another session in the same dir (a private project stays so)."""
        if self._storage.exists(file):
            return None
        if self._permissions_model is not None and self._storage.exists(self._permissions_model):
            return self._permissions_model
        siblings = self._storage.list_files(os.path.dirname(file) or ".", "*.jsonl")
        return min(siblings) if siblings else None

    _REWRITE_ATTEMPTS = 3

    def _rewrite_in_place(self, file: str, *, compare_entries: bool, target: str | None) -> None:
        """Rewrite (or move) the loaded file, changing only the lines that must change
        and carrying over what others append meanwhile; memory then catches up with
        the lines that were carried."""
        for attempt in range(self._REWRITE_ATTEMPTS):
            reflected = 0

            def transform(data: bytes) -> bytes:
                nonlocal reflected
                content, reflected = rewrite_session_lines(
                    data,
                    self._loaded_offset,
                    self._header,
                    unwritten=[self._persisted_line(e) for e in self._unwritten_entries()],
                    edited=self._edited_line_finder() if compare_entries else None,
                )
                return content

            try:
                result = self._storage.rewrite(
                    file, transform, expected_inode=self._file_inode, target=target
                )
            except (SourceReplacedError, NotASessionFileError):
                if attempt + 1 == self._REWRITE_ATTEMPTS:
                    raise
                self._reload_keeping_changes()
                continue
            break
        if target is not None:
            self._session_file = target
        self._on_disk = True
        self._needs_rewrite = False
        self._disk_entries = len(self._entries)
        self._file_inode = result.inode
        self._loaded_offset = self._file_size = reflected
        self.catch_up()  # the lines carried over (and whatever came after them)

    def _unwritten_entries(self) -> list[Entry]:
        return self._entries[self._disk_entries :]

    def _reload_keeping_changes(self) -> None:
        """Another process replaced the file since we read it: load it again, keeping
        our header change and the entries not written yet."""
        header, pending = self._header, self._unwritten_entries()
        self._reload()
        if self._file_inode is None:
            raise PersistenceError(f"{self._session_file} is no longer a session file")
        self._header = header
        fresh = [e for e in pending if e.get("id") not in self._by_id]
        self._entries.extend(fresh)
        self._index_new(fresh)

    def _edited_line_finder(self) -> Callable[[Entry, bytes], bytes | None]:
        """For `rewrite_entries`: the new line of a stored entry whose in-memory copy
        differs from it (compared with blob refs resolved, as memory holds them)."""
        seen: set[str] = set()
        resolve = self._resolve_blobs and self._blob_store is not None

        def edited(stored: Entry, raw: bytes) -> bytes | None:
            entry_id = stored.get("id")
            if not isinstance(entry_id, str) or entry_id in seen:
                return None
            seen.add(entry_id)
            current = self._by_id.get(entry_id)
            if current is None or current == stored:
                return None
            if resolve and may_contain_blob_refs(raw):
                resolve_blob_refs(stored, self._blob_store)
                if current == stored:
                    return None
            return self._persisted_line(current)

        return edited

    def _catch_up_before_rewrite(self) -> None:
        """Whole-file operations start from what is on disk now: lines another process
        appended since our last look would otherwise be lost by the rewrite."""
        if self._persist and self._on_disk:
            self.catch_up()

    def ensure_on_disk(self) -> None:
        """Write the session now (even without an assistant message); later appends
        go straight to disk. A pending migration rewrite happens here too."""
        with self.lock:
            if self._persist and (not self._on_disk or self._needs_rewrite):
                self._persisting(self._write_full)

    def rewrite_entries(self) -> None:
        """Atomically rewrite the file after in-place entry edits: the entries that
        differ from their stored line are re-serialised, every other line is kept."""
        with self.lock:
            if self._persist and (self._on_disk or self._has_assistant):
                self._persisting(lambda: self._write_full(compare_entries=True))

    def flush(self) -> None:
        """Push everything written so far to stable storage (fsync)."""
        with self.lock:
            self._check_persist_error()
            writer = self._writer
            if writer is None:
                return

            def sync() -> None:
                writer.flush()
                writer.fsync()

            self._persisting(sync)

    def close(self) -> None:
        """Flush and close the file; best effort, but the first error is raised."""
        with self.lock:
            writer, self._writer = self._writer, None
            if writer is not None:
                for step in (writer.flush, writer.fsync, writer.close):
                    if self._persist_error is not None and step is not writer.close:
                        continue
                    try:
                        step()
                    except Exception as exc:
                        with contextlib.suppress(PersistenceError):
                            self._latch(exc)
            if self._persist and self._persist_error is not None:
                raise self._persist_error

    def __enter__(self) -> SessionManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ whole-session ops

    def set_session_name(self, name: str, source: str = "auto") -> bool:
        """Set the header title. Returns False when an "auto" name would replace a
        "user" one; raises ValueError when nothing is left after cleaning."""
        clean = sanitize_session_name(name)
        if not clean:
            raise ValueError("session name is empty")
        with self.lock:
            if self._batch_depth:
                raise RuntimeError("set_session_name inside batch()")
            self._check_persist_error()
            self._catch_up_before_rewrite()
            if source == "auto" and self._header.get("titleSource") == "user":
                return False
            before: Entry = {
                k: self._header[k] for k in ("title", "titleSource") if k in self._header
            }
            self._header["title"] = clean
            self._header["titleSource"] = source
            if self._persist and self._on_disk:
                try:
                    self._persisting(self._write_full)
                except (PersistenceError, SessionBusyError):
                    self._header.pop("title", None)
                    self._header.pop("titleSource", None)
                    self._header.update(before)
                    raise
            return True

    def _path_without_labels(self, leaf_id: str) -> list[Entry]:
        """Root -> leaf path minus label entries; an entry whose parent was a dropped
        label gets a copy re-parented to the nearest kept ancestor (still one chain)."""
        kept: list[Entry] = []
        for entry in path_to_root(leaf_id, self._by_id):
            if entry.get("type") == "label":
                continue
            expected_parent = kept[-1].get("id") if kept else None
            if entry.get("parentId") != expected_parent:
                entry = {**entry, "parentId": expected_parent}
            kept.append(entry)
        return kept

    def create_branched_session(self, leaf_id: str, *, switch: bool = True) -> str | None:
        """A new session holding only the root -> `leaf_id` path (labels re-created).

        With `switch` (the default, as in the agents) this manager moves to the new
        session, which is written under the usual deferral rules. With `switch=False`
        the new file is written at once and this manager is left as it was.
        Returns the new file path (None for an in-memory session).
        """
        with self.lock:
            if leaf_id not in self._by_id:
                raise EntryNotFoundError(leaf_id)
            if self._batch_depth:
                raise RuntimeError("create_branched_session inside batch()")
            self._check_persist_error()
            self._catch_up_before_rewrite()
            path = self._path_without_labels(leaf_id)
            taken = {e["id"] for e in path if isinstance(e.get("id"), str)}
            parent_id = path[-1].get("id") if path else None
            for entry in path:
                target = entry.get("id")
                label = self._labels.get(target) if isinstance(target, str) else None
                if label is None:
                    continue
                label_id = paths.new_entry_id(taken)
                taken.add(label_id)
                path.append(
                    {
                        "type": "label",
                        "id": label_id,
                        "parentId": parent_id,
                        "timestamp": paths.now_iso(),
                        "targetId": target,
                        "label": label,
                    }
                )
                parent_id = label_id
            old_file = self._session_file
            target_manager = self if switch else self._sibling()
            target_manager._new_session(
                with_file=self._persist, parent_session=old_file if self._persist else None
            )
            target_manager._permissions_model = old_file
            target_manager._replace_entries(path)
            # Switching keeps the deferral rule (written once an assistant message is
            # there); a detached copy is written now so the new file exists.
            if target_manager._persist and (not switch or target_manager._has_assistant):
                target_manager._persisting(target_manager._write_full)
            if not switch:
                target_manager.close()
            return target_manager._session_file

    def _sibling(self) -> SessionManager:
        """An empty manager with this one's settings (for ops that leave `self` alone)."""
        other = SessionManager(
            cwd=self._cwd,
            session_dir=self._session_dir,
            persist=self._persist,
            storage=self._storage,
            blob_store=self._blob_store,
        )
        return other

    def fork(self, *, switch: bool = True) -> str | None:
        """Copy every entry into a new session (new id and file, same dir), title kept,
        `parentSession` = this session's id; written at once (atomically)."""
        with self.lock:
            if self._batch_depth:
                raise RuntimeError("fork inside batch()")
            self._check_persist_error()
            self._catch_up_before_rewrite()
            old_id = self.get_session_id()
            source_file = self._session_file
            entries = list(self._entries)
            leaf = self._leaf_id
            target = self if switch else self._sibling()
            target._new_session(
                with_file=self._persist, parent_session=old_id, copy_title_from=self._header
            )
            target._permissions_model = source_file
            target._replace_entries(entries)
            target._leaf_id = leaf
            if target._persist:
                target._persisting(target._write_full)
            if not switch:
                target.close()
            return target._session_file

    def move_to(self, new_cwd: str) -> str | None:
        """Move the session (file and its artifacts dir) to `new_cwd`'s session dir.

        Every step is undone if a later one fails; the header's cwd is rewritten in
        the new place. Returns the new file path.
        """
        with self.lock:
            if self._batch_depth:
                raise RuntimeError("move_to inside batch()")
            self._check_persist_error()
            self._catch_up_before_rewrite()
            old_file, old_dir, old_cwd = self._session_file, self._session_dir, self._cwd
            old_header_cwd = self._header.get("cwd")
            if old_file is None or not self._persist:
                self._cwd = new_cwd
                self._header["cwd"] = new_cwd
                return old_file
            agent_dir = paths.agent_dir_for_session_file(old_file)
            if agent_dir is not None:
                new_dir = str(paths.session_dir_for_cwd(new_cwd, agent_dir))
            else:
                parent = os.path.dirname(os.path.dirname(old_file))
                new_dir = os.path.join(parent, paths.encode_cwd(os.path.abspath(new_cwd)))
            new_dir = _norm_path(new_dir, self._storage)
            new_file = os.path.join(new_dir, os.path.basename(old_file))
            if new_file != old_file and self._storage.exists(new_file):
                raise FileExistsError(f"{new_file} already exists")
            old_artifacts = old_file[: -len(".jsonl")] if old_file.endswith(".jsonl") else None
            new_artifacts = new_file[: -len(".jsonl")] if old_artifacts is not None else None
            moved: list[tuple[str, str]] = []
            self._close_writer()
            try:
                if new_file != old_file:
                    self._storage.ensure_dir(new_dir)
                    if (
                        old_artifacts is not None
                        and new_artifacts is not None
                        and self._storage.is_dir(old_artifacts)
                    ):
                        self._storage.rename(old_artifacts, new_artifacts)
                        moved.append((old_artifacts, new_artifacts))
                self._header["cwd"] = new_cwd
                if self._on_disk and self._storage.exists(old_file):
                    # The session file moves last, by the carrying rewrite itself: lines
                    # an agent appends to the old file meanwhile are carried over.
                    self._write_full(target=new_file if new_file != old_file else None)
                self._session_file, self._session_dir, self._cwd = new_file, new_dir, new_cwd
            except BaseException:
                for src, dst in reversed(moved):
                    with contextlib.suppress(OSError):
                        self._storage.rename(dst, src)
                self._session_file, self._session_dir, self._cwd = old_file, old_dir, old_cwd
                if old_header_cwd is None:
                    self._header.pop("cwd", None)
                else:
                    self._header["cwd"] = old_header_cwd
                self._close_writer()
                if self._on_disk:
                    with contextlib.suppress(OSError):
                        self._remember_file(self._storage.stat(old_file), self._loaded_offset)
                raise
            return new_file

    # ------------------------------------------------------------------ breadcrumbs

    def _write_breadcrumb(self) -> None:
        """Remember this session for this terminal (best effort, never fatal)."""
        if not self._persist or self._session_file is None or self._session_dir is None:
            return
        agent_dir = _agent_dir_of_session_dir(self._session_dir)
        if agent_dir is None:
            return
        discovery.write_terminal_breadcrumb(
            self._cwd, self._session_file, agent_dir, storage=self._storage
        )
