"""Finding sessions on disk: recent lists, listings, id resolution, terminal breadcrumbs.

Listing functions accept any sub-directory name under `<agent>/sessions` (newer agents
write home-relative names such as `-proj`); a cwd's own sessions are looked for under
every name the agents give its dir (`paths.project_dir_names`). A session file
`<stem>.jsonl` may have an artifacts dir `<stem>/` holding one session file per
sub-agent run (`<task-id>.jsonl`): `list_all` and `resolve_session` include those (a
sub-agent's own artifacts dir too, down to `paths.MAX_SESSION_DEPTH`); an artifacts dir
is never a project.
Every function takes an optional `storage` so tests can run against memory, and an
unreadable or invalid file is skipped, never fatal.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core import paths
from core.jsonl import is_header, parse_session_lenient
from core.storage import FileSessionStorage, PathArg, SessionStorage
from core.title_slot import split_title_slot

__all__ = [
    "RecentSession",
    "SessionInfo",
    "find_most_recent_session",
    "find_most_recent_session_in",
    "get_recent_sessions",
    "list_all",
    "list_sessions",
    "read_terminal_breadcrumb",
    "resolve_session",
    "session_files_of_project",
    "sub_agent_files",
    "write_terminal_breadcrumb",
]

#: How much of each file the light listings read.
PREFIX_BYTES = 4096
DISPLAY_NAME_CHARS = 40
NO_MESSAGES = "(no messages)"

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class RecentSession:
    """A light record for "recent sessions" pickers (read from the file's first 4 KiB)."""

    path: str
    mtime: float
    id: str
    name: str
    display_name: str


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a session listing shows about one file (read in full)."""

    path: str
    id: str
    cwd: str
    title: str | None
    parent_session: str | None
    created: datetime
    modified: datetime
    message_count: int
    first_message: str
    all_messages_text: str
    #: For a sub-agent session: the session file whose task tool ran it.
    parent_file: str | None = None


def _storage(storage: SessionStorage | None) -> SessionStorage:
    return storage if storage is not None else FileSessionStorage()


def message_text(message: Any) -> str:
    """The text of an AgentMessage: string content, or its text blocks joined."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return ""


def _one_line(text: str) -> str:
    first = text.strip().split("\n", 1)[0]
    return " ".join(_CONTROL_CHARS.sub(" ", first).split())


def _display(name: str) -> str:
    if len(name) <= DISPLAY_NAME_CHARS:
        return name
    return name[: DISPLAY_NAME_CHARS - 1] + "…"


def _user_text(entry: dict[str, Any]) -> str | None:
    if entry.get("type") != "message":
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    return message_text(message)


def _read_prefix_objects(path: str, storage: SessionStorage) -> list[dict[str, Any]]:
    """Complete JSON lines of the file's first 4 KiB (a cut last line is never a whole
    object, so lenient parsing drops it). A header longer than that is read whole."""
    text = storage.read_text_prefix(path, PREFIX_BYTES)
    data = text.encode("utf-8", "surrogatepass")
    header_at = split_title_slot(data)[1]  # after omp 18's title slot, if any
    if b"\n" not in data[header_at:] and len(data) >= PREFIX_BYTES:
        whole = storage.read_text(path).encode("utf-8", "surrogatepass")
        end = whole.find(b"\n", header_at)
        data = whole if end < 0 else whole[:end]
    return parse_session_lenient(data)


def _mtime_or_none(path: str, storage: SessionStorage) -> float | None:
    try:
        return storage.stat(path).mtime
    except OSError:
        return None


def _jsonl_files(directory: PathArg, storage: SessionStorage) -> list[str]:
    """`*.jsonl` files of a dir; an unreadable or missing dir has none (never fatal)."""
    try:
        return storage.list_files(directory, "*.jsonl")
    except OSError:
        return []


def _subdirs(directory: PathArg, storage: SessionStorage) -> list[str]:
    try:
        return storage.list_dirs(directory)
    except OSError:
        return []


def _artifacts_dir(session_file: str) -> str:
    return session_file[: -len(".jsonl")]


def sub_agent_files(
    session_file: str, *, storage: SessionStorage | None = None, depth: int = 1
) -> list[tuple[str, str]]:
    """(sub-agent session file, the session file that ran it) for every sub-agent run
    under `session_file`'s artifacts dir, and theirs in turn (bounded depth; a dir
    that has no session file beside it is tool output, not a sub-agent)."""
    store = _storage(storage)
    found: list[tuple[str, str]] = []
    pending = [(session_file, depth)]
    while pending:
        parent, level = pending.pop()
        if level > paths.MAX_SESSION_DEPTH:
            continue
        artifacts = _artifacts_dir(parent)
        if not store.is_dir(artifacts):
            continue
        for child in sorted(_jsonl_files(artifacts, store)):
            found.append((child, parent))
            pending.append((child, level + 1))
    return found


def session_files_of_project(
    project: PathArg, *, storage: SessionStorage | None = None
) -> list[tuple[str, str | None]]:
    """(session file, parent file or None) for a project dir: its own sessions, then
    the sub-agent sessions in their artifacts dirs."""
    store = _storage(storage)
    own = _jsonl_files(project, store)
    found: list[tuple[str, str | None]] = [(path, None) for path in own]
    for path in own:
        found.extend(sub_agent_files(path, storage=store))
    return found


def _mtime_and_path(paths_: list[str], storage: SessionStorage) -> list[tuple[float, str]]:
    found = []
    for path in paths_:
        mtime = _mtime_or_none(path, storage)
        if mtime is not None:
            found.append((mtime, path))
    return found


def _files_newest_first(session_dir: PathArg, storage: SessionStorage) -> list[tuple[float, str]]:
    found = []
    for path in _jsonl_files(session_dir, storage):
        mtime = _mtime_or_none(path, storage)
        if mtime is not None:
            found.append((mtime, path))
    found.sort(key=lambda item: item[0], reverse=True)
    return found


def get_recent_sessions(
    session_dir: PathArg, limit: int = 3, *, storage: SessionStorage | None = None
) -> list[RecentSession]:
    """The `limit` newest valid sessions of a dir, by file mtime."""
    store = _storage(storage)
    out: list[RecentSession] = []
    for mtime, path in _files_newest_first(session_dir, store):
        if len(out) >= limit:
            break
        try:
            objects = _read_prefix_objects(path, store)
        except OSError:
            continue
        if not objects or not is_header(objects[0]):
            continue
        header = objects[0]
        name = ""
        title = header.get("title")
        if isinstance(title, str):
            name = _one_line(title)
        if not name:
            for obj in objects[1:]:
                text = _user_text(obj)
                if text and _one_line(text):
                    name = _one_line(text)
                    break
        if not name:
            name = _one_line(header["id"])
        out.append(RecentSession(path, mtime, header["id"], name, _display(name)))
    return out


def _is_valid_session(path: str, storage: SessionStorage) -> bool:
    try:
        objects = _read_prefix_objects(path, storage)
    except OSError:
        return False
    return bool(objects) and is_header(objects[0])


def find_most_recent_session(
    session_dir: PathArg, *, storage: SessionStorage | None = None
) -> str | None:
    """The newest (by mtime) valid `*.jsonl` in `session_dir`, or None."""
    store = _storage(storage)
    for _, path in _files_newest_first(session_dir, store):
        if _is_valid_session(path, store):
            return path
    return None


def find_most_recent_session_in(
    session_dirs: Sequence[PathArg], *, storage: SessionStorage | None = None
) -> str | None:
    """The newest valid `*.jsonl` over several dirs (a cwd's old and new dir names)."""
    store = _storage(storage)
    found: list[tuple[float, str]] = []
    for directory in dict.fromkeys(os.fspath(d) for d in session_dirs):
        found.extend(_files_newest_first(directory, store))
    found.sort(key=lambda item: item[0], reverse=True)
    for _, path in found:
        if _is_valid_session(path, store):
            return path
    return None


def _datetime_from_ms(ms: int | None, fallback: float) -> datetime:
    seconds = ms / 1000 if ms is not None else fallback
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return datetime.fromtimestamp(fallback, tz=UTC)


def session_info(
    path: PathArg, *, storage: SessionStorage | None = None, parent_file: str | None = None
) -> SessionInfo | None:
    """Read one file in full and summarise it; None if unreadable or not a session."""
    store = _storage(storage)
    file = os.fspath(path)
    try:
        data, st = store.read_bytes_with_stat(file)
    except OSError:
        return None
    objects = parse_session_lenient(data)
    if not objects or not is_header(objects[0]):
        return None
    header = objects[0]
    title = header.get("title") if isinstance(header.get("title"), str) else None
    message_count = 0
    first_message: str | None = None
    texts: list[str] = []
    latest_short_summary: str | None = None
    for entry in objects[1:]:
        kind = entry.get("type")
        if kind == "message":
            message_count += 1
            message = entry.get("message")
            role = message.get("role") if isinstance(message, dict) else None
            if role in ("user", "assistant"):
                text = message_text(message)
                if text:
                    texts.append(text)
                    if role == "user" and first_message is None:
                        first_message = text
        elif kind == "compaction" and isinstance(entry.get("shortSummary"), str):
            latest_short_summary = entry["shortSummary"]
    parent = header.get("parentSession")
    cwd = header.get("cwd")
    return SessionInfo(
        path=file,
        id=header["id"],
        cwd=cwd if isinstance(cwd, str) else "",
        title=title if title else latest_short_summary,
        parent_session=parent if isinstance(parent, str) else None,
        created=_datetime_from_ms(paths.iso_to_ms(header.get("timestamp")), st.mtime),
        modified=datetime.fromtimestamp(st.mtime, tz=UTC),
        message_count=message_count,
        first_message=first_message if first_message is not None else NO_MESSAGES,
        all_messages_text=" ".join(texts),
        parent_file=parent_file,
    )


def _infos_of(files: list[tuple[str, str | None]], storage: SessionStorage) -> list[SessionInfo]:
    infos = []
    for path, parent in files:
        info = session_info(path, storage=storage, parent_file=parent)
        if info is not None:
            infos.append(info)
    return infos


def _cwd_dirs(cwd: str, session_dir: PathArg | None, agent_dir: PathArg | None) -> list[str]:
    """The given dir, else every dir the agents may keep `cwd`'s sessions in."""
    if session_dir is not None:
        return [os.fspath(session_dir)]
    return [os.fspath(d) for d in paths.session_dirs_for_cwd(cwd, agent_dir)]


def _newest_first(infos: list[SessionInfo]) -> list[SessionInfo]:
    return sorted(infos, key=lambda info: info.modified, reverse=True)


def list_sessions(
    cwd: str,
    session_dir: PathArg | None = None,
    *,
    agent_dir: PathArg | None = None,
    storage: SessionStorage | None = None,
) -> list[SessionInfo]:
    """Sessions of one working directory (under each name the agents give its dir,
    unless `session_dir` is given), newest modified first."""
    store = _storage(storage)
    files: dict[str, None] = {}
    for directory in _cwd_dirs(cwd, session_dir, agent_dir):
        files.update(dict.fromkeys(_jsonl_files(directory, store)))
    return _newest_first(_infos_of([(path, None) for path in files], store))


def list_all(
    agent_dir: PathArg | None = None, *, storage: SessionStorage | None = None
) -> list[SessionInfo]:
    """Every session of every project of the agent dir, sub-agent sessions included
    (their `parent_file` set), newest modified first."""
    store = _storage(storage)
    infos: list[SessionInfo] = []
    for project in _subdirs(paths.sessions_root(agent_dir), store):
        infos.extend(_infos_of(session_files_of_project(project, storage=store), store))
    return _newest_first(infos)


def _matches(arg: str, path: str, storage: SessionStorage) -> bool:
    name = os.path.basename(path).lower()
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    if name.startswith(arg) or stem.rsplit("_", 1)[-1].startswith(arg):
        return True
    try:
        objects = _read_prefix_objects(path, storage)
    except OSError:
        return False
    return bool(objects) and is_header(objects[0]) and objects[0]["id"].lower().startswith(arg)


def resolve_session(
    arg: str,
    cwd: str,
    *,
    agent_dir: PathArg | None = None,
    session_dir: PathArg | None = None,
    storage: SessionStorage | None = None,
) -> str | None:
    """The session file `arg` names: a (prefix of a) session id, of a file name, or of
    the id part after the file name's last `_`; case-insensitive. The cwd's own dir is
    searched first, then every project and every sub-agent session. Several matches:
    the newest file wins."""
    needle = arg.strip().lower()
    if not needle:
        return None
    store = _storage(storage)
    local = _cwd_dirs(cwd, session_dir, agent_dir)
    local_keys = {os.path.normpath(d) for d in local}
    for _, path in sorted(
        (item for d in local for item in _files_newest_first(d, store)), reverse=True
    ):
        if _matches(needle, path, store):
            return path
    candidates: list[tuple[float, str]] = []
    for project in _subdirs(paths.sessions_root(agent_dir), store):
        files = session_files_of_project(project, storage=store)
        if os.path.normpath(project) in local_keys:
            files = [(path, parent) for path, parent in files if parent is not None]
        candidates.extend(_mtime_and_path([path for path, _ in files], store))
    candidates.sort(key=lambda item: item[0], reverse=True)
    for _, path in candidates:
        if _matches(needle, path, store):
            return path
    return None


# ---------------------------------------------------------------------------
# Terminal breadcrumbs: <agent>/terminal-sessions/<terminal-id> = "<cwd>\n<file>\n"
# ---------------------------------------------------------------------------


def _same_dir(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def _breadcrumb_dir(agent_dir: PathArg | None, layout: paths.AgentLayout | None) -> Path:
    return (
        layout.terminal_sessions if layout is not None else paths.terminal_sessions_dir(agent_dir)
    )


def write_terminal_breadcrumb(
    cwd: str,
    session_file: str,
    agent_dir: PathArg | None = None,
    *,
    layout: paths.AgentLayout | None = None,
    storage: SessionStorage | None = None,
    terminal: str | None = None,
) -> bool:
    """Remember `session_file` as this terminal's session for `cwd`. Best effort:
    returns False (never raises) when there is no terminal or writing fails."""
    term = terminal if terminal is not None else paths.terminal_id()
    if not term:
        return False
    store = _storage(storage)
    directory = _breadcrumb_dir(agent_dir, layout)
    with contextlib.suppress(OSError, ValueError):
        store.ensure_dir(directory)
        store.write_text(directory / term, f"{cwd}\n{session_file}\n")
        return True
    return False


def read_terminal_breadcrumb(
    cwd: str,
    agent_dir: PathArg | None = None,
    *,
    layout: paths.AgentLayout | None = None,
    storage: SessionStorage | None = None,
    terminal: str | None = None,
) -> str | None:
    """This terminal's last session file for `cwd`, if the breadcrumb matches and the
    file still exists."""
    term = terminal if terminal is not None else paths.terminal_id()
    if not term:
        return None
    store = _storage(storage)
    try:
        text = store.read_text(_breadcrumb_dir(agent_dir, layout) / term)
    except (OSError, ValueError):
        return None
    lines = text.split("\n")
    if len(lines) < 2 or not lines[1] or not _same_dir(lines[0], cwd):
        return None
    return lines[1] if store.exists(lines[1]) else None
