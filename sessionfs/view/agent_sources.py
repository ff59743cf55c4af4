"""Where Claude Code and Codex keep their session files, and how each one is opened.

`catalog_for` gives an agent's `AgentCatalog` (what `OtherAgentIndex` lists), over
core's listings (`core.formats.claude_dirs`, `core.formats.codex_dirs`: the first KiB
of each file); `open_agent_file` opens one file as that agent's `SessionSource` -- the
one function the daemon and the render workers (other processes) both use, so a
rendering is the same bytes wherever it was made; `agent_search_view` is an agent's
search index with its hits' paths below ``agents/<agent>/``.

* Claude Code: ``projects/<enc>/<sessionId>.jsonl`` is a session of project ``<enc>``;
  its sub-agents, ``<enc>/<sessionId>/subagents/agent-<id>.jsonl`` (with its
  ``agent-<id>.meta.json``) and an older version's ``<enc>/agent-<id>.jsonl`` naming the
  session in ``sessionId``, are ``subagents/agent-<id>/``.
* Codex: a rollout (``sessions/YYYY/MM/DD/``, ``archived_sessions/``, ``.jsonl`` or
  ``.jsonl.zst``) is a session of the project its ``cwd`` names; one whose ``source``
  names a parent thread is below that session's ``subagents/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.agent_homes import AgentHome
from core.formats import claude_dirs, codex_dirs
from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import ARCHIVE_DIR, CodexSession
from core.search_index import Hit
from core.search_index.formats import FORMATS
from core.zstd_files import ZSTD_SUFFIX
from sessionfs.view.other_agent_index import AgentCatalog, Listed, OtherAgentIndex
from sessionfs.view.search_view import SearchView, entry_mount_path
from sessionfs.view.session_keys import AGENTS_DIR, child_stem, is_valid_name

__all__ = [
    "ClaudeCatalog",
    "CodexCatalog",
    "agent_search_view",
    "catalog_for",
    "open_agent_file",
]

#: Sub-agent levels followed (Codex sub-agents may spawn their own).
MAX_SUBAGENT_DEPTH = 3
_JSONL = ".jsonl"


def open_agent_file(agent: str, path: Path) -> SessionSource:
    """The session file ``path`` of ``agent`` ("claude", "codex") as its source."""
    if agent == "claude":
        return ClaudeSession(path, meta=_claude_meta(path))
    if agent == "codex":
        return CodexSession(path, index_title=codex_index_title(path) or None)
    raise ValueError(f"no reader for {agent!r} sessions")


def catalog_for(home: AgentHome) -> AgentCatalog:
    if home.agent == "claude":
        return ClaudeCatalog(home.root)
    if home.agent == "codex":
        return CodexCatalog(home.root)
    raise ValueError(f"unknown agent {home.agent!r}")


def _claude_meta(path: Path) -> dict[str, Any] | None:
    """A sub-agent's ``agent-<id>.meta.json`` beside its file (None: none)."""
    meta = claude_dirs.read_meta(path.with_name(path.name.removesuffix(_JSONL) + ".meta.json"))
    return meta or None


class ClaudeCatalog:
    """Claude Code's session files, as `core.formats.claude_dirs` lists them."""

    agent = "claude"

    def __init__(self, root: Path) -> None:
        self.root = root

    def scan(self) -> Iterator[Listed]:
        for project in claude_dirs.list_projects(self.root):
            if not is_valid_name(project):
                continue
            project_dir = self.root / "projects" / project
            flat = claude_dirs.flat_sub_agents(project_dir)  # once per project, not per session
            for session in claude_dirs.list_sessions(project_dir):
                yield Listed(project, session.id, session.path, {"id": session.id})
                nested = claude_dirs.nested_sub_agents(session.path)
                stems = {sub.stem for sub in nested}
                for sub in nested + [s for s in flat.get(session.id, []) if s.stem not in stems]:
                    stem = child_stem(session.id, sub.stem)
                    yield Listed(project, stem, sub.path, {"id": sub.stem})


class CodexCatalog:
    """Codex's rollout files, as `core.formats.codex_dirs` lists them: a sub-agent
    below its parent thread (and that one's parent), up to `MAX_SUBAGENT_DEPTH`."""

    agent = "codex"

    def __init__(self, root: Path) -> None:
        self.root = root

    def scan(self) -> Iterator[Listed]:
        index = codex_dirs.CodexIndex.scan(self.root)
        for project in index.projects():
            if is_valid_name(project):
                for rollout in index.sessions(project):
                    yield from self._with_sub_agents(index, project, rollout, rollout.stem, 0)

    def _with_sub_agents(
        self, index: codex_dirs.CodexIndex, project: str, rollout: codex_dirs.CodexRollout,
        stem: str, depth: int,
    ) -> Iterator[Listed]:
        yield Listed(project, stem, rollout.path, {"id": rollout.id})
        if depth < MAX_SUBAGENT_DEPTH:
            for sub in index.sub_agents(rollout.id):
                yield from self._with_sub_agents(
                    index, project, sub, child_stem(stem, sub.stem), depth + 1
                )


def codex_index_title(path: Path) -> str:
    """The session's name in ``<codex home>/session_index.jsonl`` (last line wins)."""
    home = path.parent.parent if path.parent.name == ARCHIVE_DIR else None
    if home is None and len(path.parents) >= 5:
        home = path.parents[4]  # sessions/YYYY/MM/DD/<file>
    rollout = codex_dirs.read_rollout(path, archived=home == path.parent.parent)
    if home is None or rollout is None:
        return ""
    return codex_dirs.read_session_index(home).get(rollout.id, "")


def agent_search_view(
    cache_dir: Path, index: OtherAgentIndex, root: Path | None = None
) -> SearchView:
    """The search index of another agent's directory (or of ``root``: the archive's
    copy of it), its hits pointing at ``agents/<agent>/sessions/…/entries/<name>.json``
    (hits in files the listing does not show as a session are left out)."""
    root = root or index.catalog.root

    def entry_path(hit: Hit) -> str | None:
        file = root / hit.project / f"{hit.stem}.jsonl"
        # an archived Codex rollout may be compressed: `split_key` took both suffixes off
        ref = index.ref_of_path(file) or index.ref_of_path(file.with_name(file.name + ZSTD_SUFFIX))
        if ref is None:
            return None
        within = entry_mount_path(hit._replace(project=ref.project, stem=ref.stem))
        return f"{AGENTS_DIR}/{index.agent}/{within}"

    return SearchView(cache_dir, root, root, FORMATS[index.agent], entry_path)
