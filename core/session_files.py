"""Where session files live and how new ones come to be: paths, blob stores, modes,
breadcrumbs, and what a fork, a branched copy and a move put where.

These are the file-level decisions of the manager's whole-session operations (spec
section 6: `fork`, `fork_from`, `create_branched_session`, `move_to`); the manager
wires them to its state and its persistence pipeline. `core.discovery` and
`core.history` (and with it SQLite) are imported by the functions that need them: a
process that only reads sessions through a manager, such as a render worker, does not
pay for them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core import paths
from core.blobs import BlobStore, may_contain_blob_refs
from core.context import path_to_root
from core.errors import NotASessionError
from core.jsonl import is_header, parse_session_lenient
from core.migrate import CURRENT_SESSION_VERSION, migrate_session_entries
from core.persist import resolve_blob_refs
from core.storage import FileSessionStorage, PathArg, SessionStorage
from core.title_slot import read_title_slot, split_title_slot

__all__ = [
    "branched_entries",
    "continue_dirs",
    "default_blob_store",
    "in_omp_agent_dir",
    "is_omp_agent_dir",
    "layout_of_session_dir",
    "move_artifacts",
    "move_destination",
    "new_header",
    "new_session_file",
    "norm_path",
    "permissions_source",
    "read_fork_source",
    "recent_session",
    "record_title",
    "session_dir_for",
    "undo_moves",
    "uses_title_slots",
    "write_breadcrumb",
]

Entry = dict[str, Any]


def norm_path(path: PathArg, storage: SessionStorage) -> str:
    """Absolute on the real file system; normalised (no cwd involved) in memory."""
    text = os.fspath(path)
    if isinstance(storage, FileSessionStorage):
        return os.path.abspath(text)
    return os.path.normpath(text)


def session_dir_for(cwd: str, session_dir: PathArg | None, storage: SessionStorage) -> str:
    """The directory new sessions of `cwd` go to (given, else the agent's default)."""
    directory = session_dir if session_dir is not None else paths.session_dir_for_cwd(cwd)
    return norm_path(directory, storage)


def layout_of_session_dir(session_dir: str) -> paths.AgentLayout | None:
    """The agent layout of `<sessions>/<project>` (or of a sub-agent's artifacts dir
    below it), else None."""
    return paths.layout_of_session_file(os.path.join(session_dir, "x.jsonl"))


def default_blob_store(path: str, storage: SessionStorage) -> BlobStore | None:
    """The agents' one global blob store for the session file `path`: its agent dir's
    (sub-agent files included; the XDG data dir for the default agent), or the
    default agent's for a file outside any agent dir.

    Only the real filesystem has a blob store: `BlobStore` writes files itself.
    """
    if not isinstance(storage, FileSessionStorage):
        return None
    return BlobStore(paths.blobs_dir_for_session_file(path))


def permissions_source(storage: SessionStorage, file: str, model: str | None) -> str | None:
    """Whose mode a new file takes: the file itself when it exists, else `model` (a
    fork's source), else another session in the same dir (a private project stays so)."""
    if storage.exists(file):
        return None
    if model is not None and storage.exists(model):
        return model
    siblings = storage.list_files(os.path.dirname(file) or ".", "*.jsonl")
    return min(siblings) if siblings else None


def write_breadcrumb(storage: SessionStorage, cwd: str, file: str, session_dir: str) -> None:
    """Remember `file` as this terminal's session for `cwd` (best effort, never fatal)."""
    from core.discovery import write_terminal_breadcrumb  # (see the module docstring)

    layout = layout_of_session_dir(session_dir)
    if layout is not None:
        write_terminal_breadcrumb(cwd, file, layout=layout, storage=storage)


def recent_session(cwd: str, directories: Sequence[str], storage: SessionStorage) -> str | None:
    """`continue_recent`'s choice: this terminal's breadcrumb, else the newest file of
    `directories` (every dir that may hold `cwd`'s sessions)."""
    from core.discovery import find_most_recent_session_in, read_terminal_breadcrumb

    layout = layout_of_session_dir(directories[0]) if directories else None
    if layout is not None:
        crumb = read_terminal_breadcrumb(cwd, layout=layout, storage=storage)
        if crumb is not None and storage.exists(crumb):
            return crumb
    return find_most_recent_session_in(directories, storage=storage)


def continue_dirs(cwd: str, session_dir: PathArg | None, storage: SessionStorage) -> list[str]:
    """Where `continue_recent` looks: the given dir, else every name `cwd`'s sessions
    may be under (the newer agents' and the seed's)."""
    if session_dir is not None:
        return [norm_path(session_dir, storage)]
    return [norm_path(d, storage) for d in paths.session_dirs_for_cwd(cwd)]


def record_title(file: str, session_id: str, title: str) -> None:
    """omp 18's title index: the title in the `session_titles` table of the file's
    agent dir's `history.db`, when it has that table (best effort)."""
    layout = paths.layout_of_session_file(file)
    if layout is not None:
        from core.history import record_session_title  # (see the module docstring)

        record_session_title(layout.history_db, session_id, title)


#: The model configuration file only omp reads (pi's is models.json).
OMP_MODELS_FILE = "models.yml"
#: How many projects (most recently changed first) `uses_title_slots` looks into.
_PROJECTS_LOOKED_AT = 8


def _projects_newest_first(sessions_root: PathArg) -> list[str]:
    try:
        with os.scandir(sessions_root) as it:
            found = [(e.stat().st_mtime, e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [path for _, path in sorted(found, reverse=True)]


def uses_title_slots(session_dir: str) -> bool:
    """Whether new files in `session_dir` should start with omp 18's title slot: the
    newest session there (else in the agent dir's most recently changed project) has
    one; with no session at all, the agent dir is omp's (`paths.agent_name`, or it has
    omp's `models.yml`). pi 0.73 cannot read a slot: without evidence a file gets none."""
    from core.discovery import find_most_recent_session  # (see the module docstring)

    layout = layout_of_session_dir(session_dir)
    candidates = [session_dir]
    if layout is not None:
        candidates += _projects_newest_first(layout.sessions)[:_PROJECTS_LOOKED_AT]
    for directory in candidates:
        newest = find_most_recent_session(directory)
        if newest is not None:
            try:
                return read_title_slot(newest) is not None
            except OSError:
                return False
    # No session yet: omp's own dir.
    return layout is not None and is_omp_agent_dir(layout.agent_dir)


def is_omp_agent_dir(agent: Path) -> bool:
    """omp's own agent dir (by place), or a dir with the model configuration only omp
    reads."""
    return paths.agent_name(agent) == "oh-my-pi 18" or (agent / OMP_MODELS_FILE).is_file()


def in_omp_agent_dir(file: str) -> bool:
    """Whether the session file `file` lives in omp's agent dir (`is_omp_agent_dir`)."""
    layout = paths.layout_of_session_file(file)
    return layout is not None and is_omp_agent_dir(layout.agent_dir)


# ------------------------------------------------------------------ new sessions


def new_header(
    cwd: str,
    *,
    parent_session: str | None = None,
    copy_title_from: Mapping[str, Any] | None = None,
) -> Entry:
    """A fresh header (new id, now); a fork keeps its source's title and titleSource."""
    header: Entry = {
        "type": "session",
        "version": CURRENT_SESSION_VERSION,
        "id": paths.new_session_id(),
        "timestamp": paths.now_iso(),
        "cwd": cwd,
    }
    if copy_title_from is not None:
        for key in ("title", "titleSource"):
            if key in copy_title_from:
                header[key] = copy_title_from[key]
    if parent_session is not None:
        header["parentSession"] = parent_session
    return header


def new_session_file(session_dir: str, header: Mapping[str, Any]) -> str:
    return os.path.join(session_dir, paths.session_file_name(header["timestamp"], header["id"]))


def read_fork_source(source_path: str, storage: SessionStorage) -> tuple[Entry, list[Entry], bool]:
    """Header and entries of `source_path`, migrated and with blob refs resolved in
    memory (the source is never written), and whether it starts with a title slot."""
    try:
        data = storage.read_bytes(source_path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise NotASessionError(f"Cannot fork: {source_path} does not exist") from exc
    loaded = parse_session_lenient(data)
    if not loaded or not is_header(loaded[0]):
        raise NotASessionError(f"Cannot fork: {source_path} is empty or not a session")
    migrate_session_entries(loaded)
    source_blobs = default_blob_store(source_path, storage)
    if source_blobs is not None and may_contain_blob_refs(data):
        for entry in loaded[1:]:
            resolve_blob_refs(entry, source_blobs)
    return loaded[0], loaded[1:], split_title_slot(data)[0] is not None


def _path_without_labels(leaf_id: str, by_id: Mapping[str, Entry]) -> list[Entry]:
    """Root -> leaf path minus label entries; an entry whose parent was a dropped
    label gets a copy re-parented to the nearest kept ancestor (still one chain)."""
    kept: list[Entry] = []
    for entry in path_to_root(leaf_id, by_id):
        if entry.get("type") == "label":
            continue
        expected_parent = kept[-1].get("id") if kept else None
        if entry.get("parentId") != expected_parent:
            entry = {**entry, "parentId": expected_parent}
        kept.append(entry)
    return kept


def branched_entries(
    leaf_id: str, by_id: Mapping[str, Entry], labels: Mapping[str, str]
) -> list[Entry]:
    """What `create_branched_session` keeps: the root -> `leaf_id` path without label
    entries, then a fresh label entry (chained after the path) per label on it."""
    path = _path_without_labels(leaf_id, by_id)
    taken = {e["id"] for e in path if isinstance(e.get("id"), str)}
    parent_id = path[-1].get("id") if path else None
    for entry in list(path):
        target = entry.get("id")
        label = labels.get(target) if isinstance(target, str) else None
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
    return path


# ------------------------------------------------------------------ moves


def move_destination(old_file: str, new_cwd: str, storage: SessionStorage) -> tuple[str, str]:
    """(new session dir, new file) of a move to `new_cwd`: the agent's dir for that
    cwd, or (outside an agent dir) a sibling of the current session dir."""
    layout = paths.layout_of_session_file(old_file)
    if layout is not None:
        new_dir = str(paths.session_dir_for_cwd(new_cwd, layout.agent_dir))
    else:
        parent = os.path.dirname(os.path.dirname(old_file))
        new_dir = os.path.join(parent, paths.encode_cwd(os.path.abspath(new_cwd)))
    new_dir = norm_path(new_dir, storage)
    return new_dir, os.path.join(new_dir, os.path.basename(old_file))


def _artifacts_dir(session_file: str) -> str | None:
    """The sibling artifacts dir of a session file: its path without `.jsonl`."""
    return session_file[: -len(".jsonl")] if session_file.endswith(".jsonl") else None


def move_artifacts(
    storage: SessionStorage, old_file: str, new_file: str, new_dir: str
) -> list[tuple[str, str]]:
    """Create `new_dir` and move the artifacts dir beside `new_file`; returns the
    renames made, for `undo_moves` (the session file itself moves by a rewrite)."""
    storage.ensure_dir(new_dir)
    old_artifacts = _artifacts_dir(old_file)
    if old_artifacts is None or not storage.is_dir(old_artifacts):
        return []
    new_artifacts = new_file[: -len(".jsonl")]
    storage.rename(old_artifacts, new_artifacts)
    return [(old_artifacts, new_artifacts)]


def undo_moves(storage: SessionStorage, moved: list[tuple[str, str]]) -> None:
    for src, dst in reversed(moved):
        with contextlib.suppress(OSError):
            storage.rename(dst, src)
