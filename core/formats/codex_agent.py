"""The Codex CLI's connector (`CODEX_CLI`, registered in `core.formats.registry`).

* directory: ``$CODEX_HOME`` or ``~/.codex`` (`core.formats.codex_dirs`);
* sessions: a rollout (``sessions/YYYY/MM/DD/``, ``archived_sessions/``, ``.jsonl`` or
  ``.jsonl.zst``) is a session of the project its ``cwd`` names; one whose ``source``
  names a parent thread is below that session's ``subagents/`` (and that one's
  parent's), up to `MAX_SUBAGENT_DEPTH` levels;
* reader: `core.formats.codex.CodexSession` with its title from
  ``session_index.jsonl`` or Codex's state database, and a fork's parent found by
  thread id in the same home; search: `core.search_index.formats.CODEX`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Final

from core.formats import codex_dirs, codex_state
from core.formats.agent_format import AgentFormat, ArchivedFile, ListedSession
from core.formats.codex import ARCHIVE_DIR, CodexSession
from core.formats.file_walk import regular_file, regular_files
from core.paths import child_stem
from core.search_index.formats import CODEX
from core.zstd_files import ZSTD_SUFFIX

__all__ = [
    "CODEX_CLI",
    "MAX_SUBAGENT_DEPTH",
    "archive_codex_files",
    "codex_index_title",
    "list_codex_sessions",
]

#: Sub-agent levels followed (Codex sub-agents may spawn their own).
MAX_SUBAGENT_DEPTH: Final = 3


def list_codex_sessions(root: Path) -> Iterator[ListedSession]:
    """Every rollout of every project, each followed by its sub-agents."""
    index = codex_dirs.CodexIndex.scan(root)
    for project in index.projects():
        for rollout in index.sessions(project):
            yield from _with_sub_agents(index, project, rollout, rollout.stem, 0)


def _with_sub_agents(
    index: codex_dirs.CodexIndex,
    project: str,
    rollout: codex_dirs.CodexRollout,
    stem: str,
    depth: int,
) -> Iterator[ListedSession]:
    yield ListedSession(project, stem, rollout.path, {"id": rollout.id})
    if depth < MAX_SUBAGENT_DEPTH:
        for sub in index.sub_agents(rollout.id):
            yield from _with_sub_agents(index, project, sub, child_stem(stem, sub.stem), depth + 1)


def codex_index_title(path: Path) -> str:
    """The session's name in ``<codex home>/session_index.jsonl`` (last line wins)."""
    home = codex_dirs.home_of_rollout(path)
    rollout = codex_dirs.read_rollout(path, archived=path.parent.name == ARCHIVE_DIR)
    if home is None or rollout is None:
        return ""
    return codex_dirs.read_session_index(home).get(rollout.id, "")


def open_codex_session(path: Path) -> CodexSession:
    """The rollout as a `CodexSession` with what its Codex home knows of it: its name in
    ``session_index.jsonl``, else (``codex exec`` writes no index) the title in Codex's
    state database, looked up when wanted (`core.formats.codex_state`); where a fork's
    parent rollout is."""
    home = codex_dirs.home_of_rollout(path)
    rollout = codex_dirs.read_rollout(path, archived=path.parent.name == ARCHIVE_DIR)
    if home is None or rollout is None:
        return CodexSession(path)
    return CodexSession(
        path,
        index_title=codex_dirs.read_session_index(home).get(rollout.id),
        find_thread=partial(codex_dirs.find_rollout, home),
        state_title=partial(codex_state.thread_title, home, rollout.id),
    )


_JSONL: Final = ".jsonl"
_SESSION_INDEX: Final = "session_index.jsonl"
# rollout-2026-01-02T03-04-05-<thread id>: the date dirs Codex files it under
_ROLLOUT_DATE: Final = re.compile(r"rollout-([0-9]{4})-([0-9]{2})-([0-9]{2})T", re.ASCII)


def archive_codex_files(root: Path) -> Iterator[ArchivedFile]:
    """What the archive keeps: every rollout, live or archived, compressed or not, at
    ``sessions/YYYY/MM/DD/<stem>.jsonl`` from its name (a rollout moved to
    ``archived_sessions/`` and compressed is the same file, continued: told by its
    bytes), ``session_index.jsonl`` (the sessions' names) and the titles in Codex's
    state database (`codex_state.ARCHIVED_TITLES`: ``codex exec`` writes no index)."""
    places = (
        (codex_dirs.SESSIONS_DIR, (_JSONL,)),
        (ARCHIVE_DIR, (_JSONL, _JSONL + ZSTD_SUFFIX)),
    )
    for top, suffixes in places:
        for suffix in suffixes:
            for rel, path, identity in regular_files(root / top, suffix):
                stem = codex_dirs.rollout_stem(path.name)
                if stem is not None:
                    yield ArchivedFile(
                        _rollout_rel(stem, f"{top}/{rel}"),
                        path,
                        identity,
                        compressed=suffix.endswith(ZSTD_SUFFIX),
                        moves=True,
                    )
    index = regular_file(root / _SESSION_INDEX)
    if index is not None:
        yield ArchivedFile(_SESSION_INDEX, root / _SESSION_INDEX, index, moves=True)
    database = codex_state.state_database(root)
    if database is None or regular_file(database) is None:
        return
    try:
        identity = codex_state.state_identity(database)
    except OSError:
        return  # gone since: nothing to keep this pass
    made = partial(codex_state.archived_titles, database)
    yield ArchivedFile(codex_state.ARCHIVED_TITLES, database, identity, made=made)


def _rollout_rel(stem: str, found_at: str) -> str:
    """``sessions/YYYY/MM/DD/<stem>.jsonl`` from the rollout's name; where the name holds
    no date, where it was found (without ``.zst``)."""
    dated = _ROLLOUT_DATE.match(stem)
    if dated is None:
        return found_at.removesuffix(ZSTD_SUFFIX)
    year, month, day = dated.groups()
    return f"{codex_dirs.SESSIONS_DIR}/{year}/{month}/{day}/{stem}{_JSONL}"


CODEX_CLI: Final = AgentFormat(
    name="codex",
    title="the Codex CLI",
    env_var=codex_dirs.CODEX_DIR_ENV,
    default_dir_text=f"${codex_dirs.CODEX_DIR_ENV}, else ~/.codex",
    default_dir=codex_dirs.codex_dir,
    list_sessions=list_codex_sessions,
    open_session=open_codex_session,
    search=CODEX,
    archive_files=archive_codex_files,
)
