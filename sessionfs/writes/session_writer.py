"""The one place where a write through the mount is applied to a loaded session.

Every function here takes the cached `SessionManager` of one session and does one
user-visible operation with the same discipline:

1. hold ``manager.lock`` for the whole operation, so a reader (which takes the same
   lock) never sees half of it; the caller additionally serialises writes per session;
2. ``catch_up()`` with the file first, so ids an agent appended a moment ago resolve
   and new entries chain onto the agent's latest line;
3. validate everything (ids exist, names are sane) before anything changes;
4. migrate on first write: a v1/v2 file that was browse-loaded is rewritten atomically
   from memory (``ensure_on_disk``) with the very ids the view showed;
5. do the change with one core call (appends inside ``manager.batch()``: one
   ``O_APPEND`` write, all or nothing);
6. make it durable (``flush()`` = fsync) before returning, so the FUSE reply that
   follows (``close()`` returning 0) means the data is on disk.

Every refusal is a `WriteRejected`. A persistence failure (disk full, I/O error) is
``ENOSPC``/``EIO`` with ``reload_session=True``: the manager has latched the error (and
refuses every later write), so the caller must drop it and load the session from disk
again; that is how writes work again once space is freed, without remounting.

Leaf moves (``branch``, ``reset``) change only memory: as in the agents, the leaf is
recorded in the file by the next append.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from core import paths, session_files
from core.manager import EntryNotFoundError, PersistenceError, SessionManager
from sessionfs.view.refusal import WriteRejected
from sessionfs.writes.append_parse import AppendOp
from sessionfs.writes.errors import describe_oserror, persistence_errno
from sessionfs.writes.link_targets import LABELS_DIR, SESSION_DIR, resolve_link_target

__all__ = [
    "BRANCH_POINT_TYPE",
    "AppendResult",
    "append_ops",
    "appends_kind",
    "clear_label",
    "create_session",
    "entry_of_link",
    "extract_session",
    "flush_session",
    "fork_session",
    "record_branch_point",
    "reset_leaf",
    "set_label",
    "set_label_from_link",
    "set_leaf_from_link",
    "set_title",
]


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: the new ids in order (the last one is the new leaf)."""

    new_ids: tuple[str, ...]

    @property
    def leaf_id(self) -> str:
        return self.new_ids[-1]


def _persistence_failure(what: str, exc: BaseException) -> WriteRejected:
    cause: BaseException = exc
    while isinstance(cause, PersistenceError) and cause.__cause__ is not None:
        cause = cause.__cause__
    detail = describe_oserror(cause) if isinstance(cause, OSError) else str(cause)
    # core's writer takes a partial line back out after a short write, so the file is
    # as it was; should even that fail, loaders skip the torn line and the next append
    # starts on a new line — either way no entry was added.
    return WriteRejected(
        persistence_errno(exc),
        f"{what} failed: {detail}; nothing was added to the session",
        reload_session=True,
    )


def _write_step(manager: SessionManager, what: str) -> _WriteStep:
    """Lock, catch up, and translate core's exceptions into `WriteRejected`."""
    return _WriteStep(manager, what)


class _WriteStep:
    """`_write_step`: a plain context manager rather than a generator one (it wraps
    every write, each ``close()`` in ``append/`` among them: issue 26 point 7)."""

    __slots__ = ("_manager", "_what")

    def __init__(self, manager: SessionManager, what: str) -> None:
        self._manager = manager
        self._what = what

    def __enter__(self) -> None:
        manager = self._manager
        manager.lock.acquire()
        try:
            if manager.persist_error is not None:
                # Latched earlier (e.g. disk full): this manager refuses every write
                # until it is replaced by a fresh load.
                raise manager.persist_error
            manager.catch_up()
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self._manager.lock.release()
        if exc is None or isinstance(exc, WriteRejected):
            return
        what = self._what
        if isinstance(exc, EntryNotFoundError):
            raise WriteRejected(errno.ENOENT, f"{what}: {exc}") from exc
        if isinstance(exc, (PersistenceError, OSError)):
            raise _persistence_failure(what, exc) from exc


def _require_entry(manager: SessionManager, field: str, entry_id: str) -> None:
    if manager.get_entry(entry_id) is None:
        raise WriteRejected(errno.ENOENT, f"{field}: entry {entry_id!r} not found")


def _durable(manager: SessionManager) -> None:
    """fsync what was appended (whole-file rewrites fsync on their own)."""
    manager.flush()


# ---------------------------------------------------------------------------
# Appends
# ---------------------------------------------------------------------------


#: Most appends one file may ask for and still go without reading the session: each
#: new id is looked up by one pass over the file (`core.session_tail`).
SCAN_APPEND_OPS = 4


def appends_kind(ops: Sequence[AppendOp]) -> Literal["index", "scan"]:
    """How `append_ops` of ``ops`` may reach the session (`SessionCache.write`'s
    ``appends``): a few entries that refer to none go without reading it ("scan");
    the others need its ids ("index"). Either way no manager of the whole session."""
    refers = any(op.referenced_ids() for op in ops)
    return "index" if refers or len(ops) > SCAN_APPEND_OPS else "scan"


def append_ops(manager: SessionManager, ops: Sequence[AppendOp]) -> AppendResult:
    """Append validated operations in order, each the child of the one before.

    All or nothing: an unknown referenced id (``ENOENT``) is found before anything is
    written; a failing write removes every entry of the batch from memory again.
    """
    if not ops:
        raise WriteRejected(errno.EINVAL, "nothing to append")
    with _write_step(manager, "append"):
        for op in ops:
            for field, entry_id in op.referenced_ids():
                _require_entry(manager, f"line {op.line}: {field}", entry_id)
        # Migration rewrite (v1/v2 browse load) or first write of a new session; a
        # rewrite catches up with the lines it carried over itself.
        manager.ensure_on_disk()
        with manager.batch(caught_up=True):  # by _write_step, under the same lock
            new_ids = tuple(op.apply(manager) for op in ops)
        _durable(manager)
        return AppendResult(new_ids)


# ---------------------------------------------------------------------------
# Leaf
# ---------------------------------------------------------------------------


def entry_of_link(
    manager: SessionManager, target: str, link_dir: str, session_dirs: Iterable[str] = ()
) -> str:
    """The id of this session's entry that a symlink target in ``link_dir`` names
    (`resolve_link_target` against the manager's entries)."""
    return resolve_link_target(
        target,
        link_dir=link_dir,
        has_entry=lambda i: manager.get_entry(i) is not None,
        session_dirs=session_dirs,
        entry_ids=lambda: [e.get("id") for e in manager.get_entries()],
    )


def set_leaf_from_link(
    manager: SessionManager, target: str, *, session_dirs: Iterable[str] = ()
) -> str:
    """``ln -sfn <target> leaf``: resolve the link target, then branch. Returns the id."""
    with _write_step(manager, "branch"):
        entry_id = entry_of_link(manager, target, SESSION_DIR, session_dirs)
        manager.branch(entry_id)
        return entry_id


def reset_leaf(manager: SessionManager) -> None:
    """``rm leaf``: the next append starts a new root."""
    with _write_step(manager, "reset"):
        manager.reset_leaf()


#: ``customType`` of the entry that records a leaf chosen through the mount before an
#: agent runs on the session (``send``): the agents continue from a file's last entry.
BRANCH_POINT_TYPE = "sessionfs.branch"


def record_branch_point(manager: SessionManager) -> str | None:
    """Before an agent continues the file: if the leaf is not the file's last entry
    (``ln -sfn``, ``rm leaf``, ``ctl branch``/``reset``), append a ``custom`` entry
    under it (``data: {"leaf": <id or null>}``), so the file's last entry is on the
    chosen branch. A ``custom`` entry is no part of the model's context. Returns its id,
    or None when the leaf already is the last entry (nothing written)."""
    with _write_step(manager, "send"):
        leaf = manager.get_leaf_id()
        entries = manager.get_entries()
        last = entries[-1].get("id") if entries else None
        if leaf == last:
            return None
        manager.ensure_on_disk()
        with manager.batch():
            new_id = manager.append_custom_entry(BRANCH_POINT_TYPE, {"leaf": leaf})
        _durable(manager)
        return new_id


# ---------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------


def _check_label_name(name: str) -> None:
    if not name or not name.strip():
        raise WriteRejected(errno.EINVAL, "a label name must not be empty")


def set_label(manager: SessionManager, target_id: str, name: str) -> AppendResult | None:
    """Give ``target_id`` the label ``name``; a label name stands for one entry, so any
    other entry carrying ``name`` loses it (``ln -sfn``/``mv`` replace). One batch.
    Returns None when nothing had to change."""
    _check_label_name(name)
    with _write_step(manager, "label"):
        _require_entry(manager, "label target", target_id)
        labels = manager.get_labels()
        others = [t for t, label in labels.items() if label == name and t != target_id]
        if not others and labels.get(target_id) == name:
            return None
        manager.ensure_on_disk()
        with manager.batch():
            new_ids = [manager.append_label_change(t, None) for t in others]
            new_ids.append(manager.append_label_change(target_id, name))
        _durable(manager)
        return AppendResult(tuple(new_ids))


def set_label_from_link(
    manager: SessionManager, name: str, target: str, *, session_dirs: Iterable[str] = ()
) -> AppendResult | None:
    """``ln -s <target> labels/<name>``: resolve (relative to ``labels/``), then label."""
    _check_label_name(name)
    with _write_step(manager, "label"):
        entry_id = entry_of_link(manager, target, LABELS_DIR, session_dirs)
        return set_label(manager, entry_id, name)


def clear_label(manager: SessionManager, target_id: str) -> AppendResult:
    """``rm labels/<name>``: a label entry without a label for ``target_id``."""
    with _write_step(manager, "unlabel"):
        _require_entry(manager, "label target", target_id)
        if manager.get_label(target_id) is None:
            raise WriteRejected(errno.ENOENT, f"entry {target_id!r} has no label")
        manager.ensure_on_disk()
        with manager.batch():
            new_id = manager.append_label_change(target_id, None)
        _durable(manager)
        return AppendResult((new_id,))


# ---------------------------------------------------------------------------
# Title, flush
# ---------------------------------------------------------------------------


def set_title(manager: SessionManager, text: str) -> str:
    """``title`` written and closed: ``set_session_name(text, "user")``: an atomic
    rewrite that keeps every entry, or in a file with omp 18's title slot, a
    ``title_change`` entry and the slot overwritten in place (as omp renames).
    Returns the title as stored (cleaned)."""
    with _write_step(manager, "title"):
        if not manager.is_on_disk:
            manager.ensure_on_disk()
        try:
            manager.set_session_name(text, "user")
        except ValueError as exc:
            raise WriteRejected(errno.EINVAL, f"title: {exc}") from exc
        # set_session_name rewrote the file or appended and overwrote the slot (both
        # fsynced): a pending migration is done too.
        title = manager.get_session_name()
        return title or ""


def flush_session(manager: SessionManager) -> None:
    """``flush``: push everything to stable storage."""
    with _write_step(manager, "flush"):
        _durable(manager)


# ---------------------------------------------------------------------------
# New session files
# ---------------------------------------------------------------------------


def fork_session(manager: SessionManager) -> str:
    """``fork``: every entry copied into a new file in the same project, title kept.
    The mounted session stays as it is. Returns the new file's path."""
    with _write_step(manager, "fork"):
        path = manager.fork(switch=False)
        if path is None:
            raise WriteRejected(errno.EINVAL, "fork: this session has no file")
        return path


def extract_session(manager: SessionManager, entry_id: str) -> str:
    """``extract <id>``: a new file holding the root -> ``entry_id`` path (labels on it
    re-created); the mounted session stays as it is. Returns the new file's path."""
    with _write_step(manager, "extract"):
        _require_entry(manager, "extract", entry_id)
        path = manager.create_branched_session(entry_id, switch=False)
        if path is None:
            raise WriteRejected(errno.EINVAL, "extract: this session has no file")
        return path


def create_session(agent_dir: str | os.PathLike[str], cwd: str, title: str | None) -> str:
    """Root ``new <cwd> [title]``: a session for ``cwd`` in its project dir, on disk at
    once (header only). Returns the new file's path."""
    if not cwd.startswith("/"):
        raise WriteRejected(errno.EINVAL, f"new: cwd must be an absolute path, not {cwd!r}")
    cwd = os.path.normpath(cwd)
    try:
        session_dir = str(paths.session_dir_for_cwd(cwd, agent_dir))
        # omp 18's agent dirs get its title slot; pi 0.73 cannot read one.
        slotted = session_files.uses_title_slots(session_dir)
        manager = SessionManager.create(cwd, session_dir, title_slot=slotted)
        with manager:
            if title is not None and title.strip():
                try:
                    manager.set_session_name(title, "user")
                except ValueError as exc:
                    raise WriteRejected(errno.EINVAL, f"new: title: {exc}") from exc
            manager.ensure_on_disk()
            path = manager.get_session_file()
    except PersistenceError as exc:
        raise _persistence_failure("new", exc) from exc
    except OSError as exc:
        raise _persistence_failure("new", exc) from exc
    if path is None:
        raise WriteRejected(errno.EIO, "new: the session got no file")
    return path
