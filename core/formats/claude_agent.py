"""Claude Code's connector (`CLAUDE_CODE`, registered in `core.formats.registry`).

* directory: ``$CLAUDE_CONFIG_DIR`` or ``~/.claude`` (`core.formats.claude_dirs`);
* sessions: ``projects/<enc>/<sessionId>.jsonl`` is a session of project ``<enc>``;
  its sub-agents, ``<enc>/<sessionId>/subagents/agent-<id>.jsonl`` (with its
  ``agent-<id>.meta.json``) and an older version's ``<enc>/agent-<id>.jsonl`` naming
  the session in ``sessionId``, are ``subagents/agent-<id>/``;
* reader: `core.formats.claude.ClaudeSession`; search: `core.search_index.formats.CLAUDE`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

from core.formats import claude_dirs
from core.formats.agent_format import AgentFormat, ArchivedFile, ListedSession
from core.formats.claude import ClaudeSession
from core.formats.dir_scan import meta_line, read_meta
from core.formats.file_walk import regular_files
from core.paths import child_stem
from core.search_index.formats import CLAUDE

__all__ = [
    "CLAUDE_CODE",
    "archive_claude_files",
    "list_claude_sessions",
    "open_claude_session",
]

_JSONL: Final = ".jsonl"
_META: Final = ".meta.json"


def archive_claude_files(root: Path) -> Iterator[ArchivedFile]:
    """What the archive keeps: every ``projects/**/*.jsonl`` (sessions, nested and
    flat sub-agents' files), at its own path, and each nested sub-agent's
    ``.meta.json`` (its type and task, in its ``header.json``) as a document."""
    for rel, path, identity in regular_files(root / "projects", _JSONL):
        yield ArchivedFile(f"projects/{rel}", path, identity)
    for rel, path, identity in regular_files(root / "projects", _META):
        if path.parent.name == "subagents":
            yield ArchivedFile(f"projects/{rel}", path, identity, made=partial(meta_line, path))


def list_claude_sessions(root: Path) -> Iterator[ListedSession]:
    """Every session of every project, each followed by its sub-agents (both layouts,
    nested first)."""
    for project in claude_dirs.list_projects(root):
        project_dir = root / "projects" / project
        flat = claude_dirs.flat_sub_agents(project_dir)  # once per project, not per session
        for session in claude_dirs.list_sessions(project_dir):
            yield ListedSession(project, session.id, session.path, {"id": session.id})
            nested = claude_dirs.nested_sub_agents(session.path)
            stems = {sub.stem for sub in nested}
            for sub in nested + [s for s in flat.get(session.id, []) if s.stem not in stems]:
                stem = child_stem(session.id, sub.stem)
                yield ListedSession(project, stem, sub.path, {"id": sub.stem})


def open_claude_session(path: Path) -> ClaudeSession:
    """The file as a `ClaudeSession`, with a sub-agent's ``meta.json`` beside it."""
    return ClaudeSession(path, meta=_sub_agent_meta(path))


def _sub_agent_meta(path: Path) -> dict[str, Any] | None:
    """A sub-agent's ``agent-<id>.meta.json`` beside its file (None: none)."""
    meta = read_meta(path.with_name(path.name.removesuffix(_JSONL) + _META))
    return meta or None


CLAUDE_CODE: Final = AgentFormat(
    name="claude",
    title="Claude Code",
    env_var=claude_dirs.CLAUDE_DIR_ENV,
    default_dir_text=f"${claude_dirs.CLAUDE_DIR_ENV}, else ~/.claude",
    default_dir=claude_dirs.claude_dir,
    list_sessions=list_claude_sessions,
    open_session=open_claude_session,
    search=CLAUDE,
    archive_files=archive_claude_files,
)
