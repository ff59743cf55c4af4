"""Where the Codex CLI keeps its rollouts and how a listing finds them.

``$CODEX_HOME`` or ``~/.codex``: ``sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``
and ``archived_sessions/rollout-*.jsonl`` (or ``*.jsonl.zst``). A listing reads at most
the first KiB of each file (the ``session_meta`` line's ``id``, ``cwd`` and a
sub-agent's ``parent_thread_id`` come before its long ``base_instructions``).

* project: the ``cwd`` encoded as the pi agent names project dirs
  (`core.paths.encode_cwd`: ``/home/me/app`` -> ``--home-me-app--``); a rollout that
  records no cwd (the 2025 format) is in `NO_CWD_PROJECT`;
* session: the file's stem (``rollout-…`` without ``.jsonl`` / ``.jsonl.zst``);
* a rollout whose ``source`` names a parent thread is a sub-agent: listed under its
  parent (`CodexIndex.sub_agents`), not in its project;
* ``session_index.jsonl`` (``{id, thread_name, updated_at}`` per line, the last line of
  an id wins) gives titles (`read_session_index`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.formats.codex import ARCHIVE_DIR
from core.formats.dir_scan import named_stem
from core.formats.lines import LineFile
from core.formats.prefix import first_line, read_prefix, string_field
from core.paths import encode_cwd, env_dir_or_home
from core.safe_open import PathArg

__all__ = [
    "CODEX_DIR_ENV",
    "NO_CWD_PROJECT",
    "CodexIndex",
    "CodexRollout",
    "codex_dir",
    "find_rollout",
    "home_of_rollout",
    "list_rollouts",
    "read_rollout",
    "read_session_index",
    "rollout_stem",
]

CODEX_DIR_ENV: Final = "CODEX_HOME"
NO_CWD_PROJECT: Final = encode_cwd("/unknown-cwd")
SESSIONS_DIR: Final = "sessions"
_SUFFIXES: Final = (".jsonl.zst", ".jsonl")
#: sessions/YYYY/MM/DD: how deep rollouts are under sessions/
_SESSIONS_DEPTH: Final = 3
#: a thread id as Codex writes it (a UUID): what `find_rollout` accepts
_THREAD_ID: Final = re.compile(r"[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}")


def codex_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$CODEX_HOME`` when set, else ``~/.codex`` (existing or not)."""
    return env_dir_or_home(CODEX_DIR_ENV, ".codex", env)


def rollout_stem(name: str) -> str | None:
    """``rollout-….jsonl[.zst]`` -> ``rollout-…`` (``None``: not a rollout name)."""
    return named_stem(name, "rollout-", _SUFFIXES)


@dataclass(frozen=True, slots=True)
class CodexRollout:
    """A rollout as a listing sees it (from its first KiB and a stat)."""

    stem: str
    path: Path
    #: the thread id (``session_meta.id``; the stem when the prefix names none)
    id: str
    cwd: str | None
    project: str
    archived: bool
    #: a sub-agent's parent thread id (``None``: a session of its own)
    parent_thread_id: str | None
    mtime_ns: int
    size: int


def read_rollout(path: PathArg, archived: bool) -> CodexRollout | None:
    """What a listing shows of one rollout (``None``: not a rollout, unreadable)."""
    path = Path(path)
    stem = rollout_stem(path.name)
    if stem is None:
        return None
    try:
        st = os.stat(path, follow_symlinks=False)
        head = first_line(read_prefix(path))
    except OSError:
        return None
    cwd = string_field(head, "cwd")
    return CodexRollout(
        stem=stem,
        path=path,
        id=string_field(head, "id") or stem,
        cwd=cwd,
        project=encode_cwd(cwd) if cwd is not None else NO_CWD_PROJECT,
        archived=archived,
        parent_thread_id=string_field(head, "parent_thread_id"),
        mtime_ns=st.st_mtime_ns,
        size=st.st_size,
    )


def _files(directory: Path, depth: int) -> Iterator[Path]:
    """Regular files ``depth`` directory levels below ``directory`` (no symlinks
    followed), in name order."""
    try:
        with os.scandir(directory) as found:
            entries = sorted(found, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        if depth == 0 and entry.is_file(follow_symlinks=False):
            yield Path(entry.path)
        elif depth > 0 and entry.is_dir(follow_symlinks=False):
            yield from _files(Path(entry.path), depth - 1)


def home_of_rollout(path: PathArg) -> Path | None:
    """The Codex home a rollout file is in (``<home>/sessions/YYYY/MM/DD/<file>`` or
    ``<home>/archived_sessions/<file>``); ``None``: in neither layout."""
    path = Path(path)
    if path.parent.name == ARCHIVE_DIR:
        return path.parent.parent
    parents = path.parents
    if len(parents) > _SESSIONS_DEPTH + 1 and parents[_SESSIONS_DEPTH].name == SESSIONS_DIR:
        return parents[_SESSIONS_DEPTH + 1]
    return None


def find_rollout(root: PathArg, thread_id: str) -> Path | None:
    """The rollout of thread ``thread_id`` under ``root`` (its file name ends in
    ``-<thread id>.jsonl[.zst]``), live sessions first; ``None``: none, or an id that is
    not one (it comes from another agent's file: never a pattern or a path)."""
    if _THREAD_ID.fullmatch(thread_id) is None:
        return None
    root = Path(root)
    names = tuple(f"-{thread_id}{suffix}" for suffix in _SUFFIXES)
    for name, depth, _ in _rollout_dirs():
        for path in _files(root / name, depth):
            if path.name.startswith("rollout-") and path.name.endswith(names):
                return path
    return None


def _rollout_dirs() -> list[tuple[str, int, bool]]:
    """(dir below the home, its depth of dirs above the files, archived)."""
    return [(SESSIONS_DIR, _SESSIONS_DEPTH, False), (ARCHIVE_DIR, 0, True)]


def list_rollouts(root: PathArg) -> list[CodexRollout]:
    """Every rollout under ``sessions/`` and ``archived_sessions/``, newest first."""
    root = Path(root)
    found = []
    for name, depth, archived in _rollout_dirs():
        for path in _files(root / name, depth):
            rollout = read_rollout(path, archived)
            if rollout is not None:
                found.append(rollout)
    found.sort(key=lambda r: (-r.mtime_ns, r.stem))
    return found


def read_session_index(root: PathArg) -> dict[str, str]:
    """``session_index.jsonl``: thread id -> name, the last line of an id winning
    (``{}`` when there is none). Malformed lines are skipped."""
    held = LineFile(Path(root) / "session_index.jsonl")
    try:
        lines = held.load()
    except OSError:
        return {}
    names: dict[str, str] = {}
    for line in lines:
        obj = line.obj
        if obj is None:
            continue
        thread_id, name = obj.get("id"), obj.get("thread_name")
        if isinstance(thread_id, str) and isinstance(name, str) and name:
            names[thread_id] = name
    return names


class CodexIndex:
    """One listing of a Codex home: projects, their sessions, sub-agents by parent."""

    def __init__(self, rollouts: list[CodexRollout]) -> None:
        self.rollouts = rollouts
        self._projects: dict[str, list[CodexRollout]] = {}
        self._children: dict[str, list[CodexRollout]] = {}
        for rollout in rollouts:
            if rollout.parent_thread_id is not None:
                self._children.setdefault(rollout.parent_thread_id, []).append(rollout)
            else:
                self._projects.setdefault(rollout.project, []).append(rollout)

    @classmethod
    def scan(cls, root: PathArg) -> CodexIndex:
        return cls(list_rollouts(root))

    def projects(self) -> list[str]:
        return sorted(self._projects)

    def sessions(self, project: str) -> list[CodexRollout]:
        """The project's sessions (sub-agents excluded), newest first."""
        return list(self._projects.get(project, []))

    def sub_agents(self, thread_id: str) -> list[CodexRollout]:
        """Rollouts whose ``source`` names ``thread_id`` as their parent."""
        return list(self._children.get(thread_id, []))
