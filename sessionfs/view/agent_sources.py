"""Another agent's session files as the views see them, from its registered connector
(`core.formats.registry`).

`catalog_for` gives an agent's `AgentCatalog` (what `OtherAgentIndex` lists: its
connector's `list_sessions`); `open_agent_file` opens one file as that agent's
`SessionSource` -- the one function the daemon and the render workers (other
processes) both use, so a rendering is the same bytes wherever it was made;
`agent_search_view` is an agent's search index with its hits' paths below
``agents/<agent>/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from core.agent_homes import AgentHome
from core.formats.agent_format import AgentFormat
from core.formats.base import SessionSource
from core.formats.registry import agent_format
from core.search_index import Hit
from core.zstd_files import ZSTD_SUFFIX
from sessionfs.view.other_agent_index import AgentCatalog, Listed, OtherAgentIndex
from sessionfs.view.search_view import SearchView, entry_mount_path
from sessionfs.view.session_keys import AGENTS_DIR

__all__ = [
    "RegisteredCatalog",
    "agent_search_view",
    "catalog_for",
    "open_agent_file",
]


def open_agent_file(agent: str, path: Path) -> SessionSource:
    """The session file ``path`` of ``agent`` ("claude", "codex", …) as its source."""
    return agent_format(agent).open_session(path)


def catalog_for(home: AgentHome) -> AgentCatalog:
    return RegisteredCatalog(agent_format(home.agent), home.root)


class RegisteredCatalog:
    """An agent's session files, as its connector lists them."""

    def __init__(self, connector: AgentFormat, root: Path) -> None:
        self.connector = connector
        self.agent = connector.name
        self.root = root

    def scan(self) -> Iterator[Listed]:
        return iter(self.connector.list_sessions(self.root))


def _hit_files(root: Path, hit: Hit) -> Iterator[Path]:
    """The files a hit may be in: `split_key` took ``.jsonl`` (or ``.jsonl.zst``) off
    the key; a key with another suffix kept it."""
    base = root / hit.project / hit.stem
    yield base.with_name(base.name + ".jsonl")
    yield base.with_name(base.name + ".jsonl" + ZSTD_SUFFIX)
    yield base


def agent_search_view(
    cache_dir: Path,
    index: OtherAgentIndex,
    root: Path | None = None,
    prefix: tuple[str, ...] = (),
) -> SearchView:
    """The search index of another agent's directory (or of ``root``: the archive's
    copy of it), its hits pointing at ``agents/<agent>/sessions/…/entries/<name>.json``
    below ``prefix`` (a store machine's ``machines/<m>``; hits in files the listing
    does not show as a session are left out)."""
    root = root or index.catalog.root

    def entry_path(hit: Hit) -> str | None:
        ref = next(filter(None, map(index.ref_of_path, _hit_files(root, hit))), None)
        if ref is None:
            return None
        within = entry_mount_path(hit._replace(project=ref.project, stem=ref.stem))
        return "/".join((*prefix, AGENTS_DIR, index.agent, within))

    # The first hit's path needs the agent's listing (a scan of its session files,
    # ~60 ms for 1,000 on a loaded machine): made after the first build, not then.
    return SearchView(
        cache_dir,
        root,
        root,
        agent_format(index.agent).search,
        entry_path,
        prepare_entry_paths=index.all_sessions,
    )
