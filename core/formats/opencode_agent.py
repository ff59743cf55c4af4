"""opencode's connector (`OPENCODE`, registered in `core.formats.registry`).

* directory: ``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``
  (`core.formats.opencode_dirs`);
* sessions: each row of the ``session`` table of ``opencode.db`` (and of other
  channels' ``opencode-<channel>.db``), its path ``<database>/<session id>``
  (`core.session_stat`: stat'ed as the database and its WAL), and each session file of
  the older ``storage/`` layout; a session whose ``parent_id`` names a listed session
  (a task tool's sub-agent) is below it, up to `MAX_SUBAGENT_DEPTH` levels;
* reader: `core.formats.opencode.OpencodeSession`;
* search: none yet -- the index reads session files as lines and reads a hit's line
  back from its offset, which rows of a database are not (``docs/agents.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from core.formats import opencode_dirs
from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.opencode import OpencodeSession
from core.paths import child_stem
from core.search_index.formats import FileFormat, Lines
from core.search_index.rows import MODE_LEGACY, Row
from core.session_stat import row_session_path, split_row_session_path

__all__ = ["MAX_SUBAGENT_DEPTH", "OPENCODE", "list_opencode_sessions", "open_opencode_session"]

log = logging.getLogger(__name__)

#: Sub-agent levels followed (a sub-agent may start its own).
MAX_SUBAGENT_DEPTH: Final = 3


def _path(info: opencode_dirs.OpencodeSessionInfo) -> Path:
    return Path(row_session_path(info.store, info.id)) if info.in_db else info.store


def list_opencode_sessions(root: Path) -> Iterator[ListedSession]:
    """Every session, each followed by its sub-agents; a store that cannot be read is
    logged and left out (its sessions' own reads say why in ``ctl``)."""
    listing = opencode_dirs.list_sessions(root)
    for store, reason in listing.skipped.items():
        log.warning("opencode: skipping %s: %s", store, reason)
    known = {info.id for info in listing.sessions}
    children: dict[str, list[opencode_dirs.OpencodeSessionInfo]] = {}
    for info in listing.sessions:
        if info.parent_id is not None and info.parent_id in known:
            children.setdefault(info.parent_id, []).append(info)
    for info in sorted(listing.sessions, key=lambda s: s.id):
        if info.parent_id is None or info.parent_id not in known:
            yield from _with_children(info, info.project, info.id, children, 0)


def _with_children(
    info: opencode_dirs.OpencodeSessionInfo,
    project: str,
    stem: str,
    children: dict[str, list[opencode_dirs.OpencodeSessionInfo]],
    depth: int,
) -> Iterator[ListedSession]:
    yield ListedSession(project, stem, _path(info), {"id": info.id})
    if depth < MAX_SUBAGENT_DEPTH:
        for child in sorted(children.get(info.id, ()), key=lambda s: s.id):
            yield from _with_children(
                child, project, child_stem(stem, child.id), children, depth + 1
            )


def open_opencode_session(path: Path) -> OpencodeSession:
    """``<database>/<session id>``, or an older layout's session file."""
    found = split_row_session_path(path)
    if found is not None:
        return OpencodeSession(found[0], found[1])
    return OpencodeSession(path)


def _no_keys(root: str) -> Iterator[tuple[str, ...]]:
    return iter(())


def _no_rows(lines: Lines) -> Iterator[Row]:
    return iter(())


def _no_whole(lines: Lines) -> tuple[int, Iterator[Row]]:
    return MODE_LEGACY, iter(())


#: an index of no files (module docstring)
OPENCODE_SEARCH: Final = FileFormat(
    "opencode", _no_keys, _no_whole, _no_rows, lambda obj: None, lambda key: None
)

OPENCODE: Final = AgentFormat(
    name="opencode",
    title="opencode",
    env_var="XDG_DATA_HOME",
    default_dir_text="$XDG_DATA_HOME/opencode, else ~/.local/share/opencode",
    default_dir=opencode_dirs.opencode_dir,
    list_sessions=list_opencode_sessions,
    open_session=open_opencode_session,
    search=OPENCODE_SEARCH,
)
