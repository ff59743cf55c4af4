"""Where Claude Code keeps its sessions and how a listing finds them.

``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; sessions in ``projects/<enc>/<sessionId>.jsonl``
(``<enc>``: the cwd with every non-alphanumeric character made ``-``, lossy: the real
cwd is read from the file). Sub-agents come in two layouts:

* ``<enc>/<sessionId>/subagents/agent-<id>.jsonl`` with ``agent-<id>.meta.json``
  (``agentType``, ``description``, ``toolUseId``);
* older: flat ``<enc>/agent-<id>.jsonl`` whose lines name their session's
  ``sessionId`` (not sessions of their own).

A listing reads at most the first KiB of each file (`core.formats.prefix`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.formats.dir_scan import read_meta, sorted_entries
from core.formats.prefix import read_prefix, string_field
from core.paths import env_dir_or_home
from core.safe_open import PathArg

__all__ = [
    "CLAUDE_DIR_ENV",
    "ClaudeSessionFile",
    "ClaudeSubAgentFile",
    "claude_dir",
    "flat_sub_agents",
    "list_projects",
    "list_sessions",
    "nested_sub_agents",
    "sub_agents",
]

CLAUDE_DIR_ENV: Final = "CLAUDE_CONFIG_DIR"
_SUFFIX: Final = ".jsonl"
_AGENT_PREFIX: Final = "agent-"
_META_SUFFIX: Final = ".meta.json"


def claude_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude`` (existing or not)."""
    return env_dir_or_home(CLAUDE_DIR_ENV, ".claude", env)


def list_projects(root: PathArg) -> list[str]:
    """The project dir names under ``<root>/projects`` (sorted)."""
    projects = sorted_entries(Path(root) / "projects")
    return [e.name for e in projects if e.is_dir(follow_symlinks=False)]


@dataclass(frozen=True, slots=True)
class ClaudeSessionFile:
    """A session as a listing sees it (from the first KiB and a stat)."""

    id: str
    path: Path
    #: the cwd the file records (``None``: not in its first KiB)
    cwd: str | None
    mtime_ns: int
    size: int


@dataclass(frozen=True, slots=True)
class ClaudeSubAgentFile:
    """A sub-agent's file: ``stem`` (``agent-<id>``) names its ``subagents/`` dir."""

    stem: str
    path: Path
    #: its ``meta.json`` (``{}`` when none or unreadable)
    meta: dict[str, Any] = field(default_factory=dict)


def _is_session_file(entry: os.DirEntry[str]) -> bool:
    return entry.name.endswith(_SUFFIX) and entry.is_file(follow_symlinks=False)


def list_sessions(project_dir: PathArg) -> list[ClaudeSessionFile]:
    """The sessions of one project dir, newest first (flat ``agent-*.jsonl``
    sub-agent files are not sessions)."""
    found = []
    for entry in sorted_entries(project_dir):
        if not _is_session_file(entry) or entry.name.startswith(_AGENT_PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            prefix = read_prefix(entry.path)
        except OSError:
            continue
        stem = entry.name[: -len(_SUFFIX)]
        found.append(
            ClaudeSessionFile(
                id=stem,
                path=Path(entry.path),
                cwd=string_field(prefix, "cwd"),
                mtime_ns=st.st_mtime_ns,
                size=st.st_size,
            )
        )
    found.sort(key=lambda s: (-s.mtime_ns, s.id))
    return found


def nested_sub_agents(session_path: PathArg) -> list[ClaudeSubAgentFile]:
    """``<sessionId>/subagents/agent-<id>.jsonl`` (+ ``.meta.json``) beside the file."""
    path = Path(session_path)
    directory = path.with_name(path.name[: -len(_SUFFIX)]) / "subagents"
    found = []
    for entry in sorted_entries(directory):
        if _is_session_file(entry) and entry.name.startswith(_AGENT_PREFIX):
            stem = entry.name[: -len(_SUFFIX)]
            meta = read_meta(directory / (stem + _META_SUFFIX))
            found.append(ClaudeSubAgentFile(stem, Path(entry.path), meta))
    return found


def flat_sub_agents(project_dir: PathArg) -> dict[str, list[ClaudeSubAgentFile]]:
    """The older flat ``agent-<id>.jsonl`` files of a project by the ``sessionId``
    their first KiB names (a file naming none is left out)."""
    found: dict[str, list[ClaudeSubAgentFile]] = {}
    for entry in sorted_entries(project_dir):
        if not (_is_session_file(entry) and entry.name.startswith(_AGENT_PREFIX)):
            continue
        try:
            session_id = string_field(read_prefix(entry.path), "sessionId")
        except OSError:
            continue
        if session_id is not None:
            stem = entry.name[: -len(_SUFFIX)]
            found.setdefault(session_id, []).append(ClaudeSubAgentFile(stem, Path(entry.path)))
    return found


def sub_agents(session_path: PathArg, session_id: str) -> list[ClaudeSubAgentFile]:
    """Every sub-agent file of one session, both layouts (nested first), by stem."""
    path = Path(session_path)
    nested = nested_sub_agents(path)
    stems = {s.stem for s in nested}
    flat = [s for s in flat_sub_agents(path.parent).get(session_id, []) if s.stem not in stems]
    return nested + flat
