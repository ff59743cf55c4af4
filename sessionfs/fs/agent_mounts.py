"""Wiring of ``agents/<agent>/``: one `MountContext` per other agent shown.

Each agent found (`core.agent_homes`) gets the local mount's views over its own
directory: an `OtherAgentIndex` listing its files, a `SessionCache` whose sessions are
`LoadedSession`s read through the agent's reader (``opener``), a `Prerenderer` whose
workers render its transcripts into ``--cache-dir`` (one renders dir per agent
directory, as for an agent dir). Their
``prefix`` is ``("agents", <agent>)``, their ``read_only_reason`` makes every write
``EROFS``, and refusals are recorded in the root's ``ctl`` (a session of theirs has no
``ctl``: a rendering refused as too big is named there too). With an archive
(``archive``: where its mirror keeps an agent's files), each agent's listing has the
archived sessions its dir lost too, and their older generations (`ArchivedCatalog`).

An agent ``send`` can run (`sessionfs.fs.agent_branching`: Claude Code, Codex) gets
its own `AgentRuns` (logs in its cache dir), the command its template or default
makes, and `AgentNotes` (its chosen leaves and forks, in its cache dir).

Memory: each agent's cache gets half of ``--cache-mb`` and shares the daemon's real-RSS
bound with the local cache, so what the process holds stays bounded by the same check
however many agents are shown.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import trio

from core.agent_homes import AgentHome
from core.formats.lines import decompressing_into, set_whole_read_limit
from sessionfs.fs.agent_branching import BRANCHING_AGENTS, BranchingCommand, branching_command
from sessionfs.fs.agent_runs import AgentRuns
from sessionfs.fs.nodes.agents import AGENTS
from sessionfs.fs.nodes.base import MountContext
from sessionfs.fs.send_log import SendLogs
from sessionfs.view.agent_notes import NOTES_FILE, AgentNotes
from sessionfs.view.agent_sources import agent_search_view, catalog_for, open_agent_file
from sessionfs.view.archived import ArchivedCatalog, ArchiveDirs
from sessionfs.view.cache_dir import agent_cache_dir
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.other_agent_index import AgentCatalog, OtherAgentIndex
from sessionfs.view.prerender import Prerenderer
from sessionfs.view.refusal import READ_ONLY_REASON, WriteRejected
from sessionfs.view.rss_bound import RssBound
from sessionfs.view.search_view import SearchView
from sessionfs.view.session_cache import SessionCache
from sessionfs.view.session_keys import mount_parts
from sessionfs.view.session_ref import SessionRef
from sessionfs.view.streamed_files import STREAMED_AGENTS

__all__ = ["AgentMounts", "BranchingOptions"]


@dataclass(frozen=True)
class BranchingOptions:
    """How ``send`` runs the other agents: ``--claude-cmd``/``--codex-cmd`` (or an
    ``--agent-cmd`` holding ``{agent}``), ``--send-timeout``, ``--send-grace``."""

    templates: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30 * 60.0
    grace: float = 5.0


class AgentMounts:
    """The ``agents/`` tree's contexts (`sessionfs.fs.nodes.agents.AgentViews`)."""

    def __init__(
        self,
        homes: Sequence[AgentHome],
        root: MountContext,
        cache_dir: Path,
        budget_bytes: int,
        rss_bound: RssBound | None = None,
        after_eviction: Callable[[], None] = lambda: None,
        branching: BranchingOptions | None = None,
        archive: ArchiveDirs | None = None,
    ) -> None:
        self.contexts: dict[str, MountContext] = {}
        self.searches: dict[str, SearchView] = {}
        #: with an archive: the search index of each agent's archived files (its hits in
        #: the sessions only the archive holds)
        self.archive_searches: dict[str, SearchView] = {}
        #: each agent's listing (`scan_first` makes their first scans)
        self.indexes: list[OtherAgentIndex] = []
        for home in homes:
            catalog: AgentCatalog = catalog_for(home)
            if archive is not None:  # the archive's sessions the live dir lost
                archived = catalog_for(AgentHome(home.agent, archive.agent_root(home.agent)))
                catalog = ArchivedCatalog(catalog, archived, archive.generations_root(home.agent))
            index = OtherAgentIndex(catalog)
            self.indexes.append(index)
            if archive is not None:
                self.archive_searches[home.agent] = agent_search_view(
                    cache_dir, index, archive.agent_root(home.agent), root.prefix
                )
            agent = home.agent

            def new_session(ref: SessionRef, agent: str = agent) -> LoadedSession:
                return LoadedSession(ref=ref, opener=lambda r: open_agent_file(agent, r.path))

            own_cache = agent_cache_dir(cache_dir, home.root)
            cache = SessionCache(
                index,
                max(1, budget_bytes // 2),
                after_eviction=after_eviction,
                rss_bound=rss_bound,
                new_session=new_session,
                notes=AgentNotes.load(own_cache / NOTES_FILE),
            )
            cache.refusal_listeners.append(_root_ctl_notice(root, agent))
            # A file too big to render is not read into memory either: its lines are
            # read from the file when asked (the same for every agent: one budget); a
            # compressed one's text so big, from a copy in the cache dir that has no
            # name (private, gone with the session's reading: `core.formats.lines`).
            set_whole_read_limit(cache.largest_renderable())
            decompressing_into(str(cache_dir))
            renders_dir = own_cache / "renders"
            renders = Prerenderer(
                home.root, renders_dir, agent=agent, stream_over=cache.largest_renderable()
            )
            # (a store machine's hits are below ``machines/<m>/``, as its agents/ is)
            self.searches[agent] = agent_search_view(cache_dir, index, prefix=root.prefix)
            self.contexts[agent] = MountContext(
                index=index,
                sessions=cache,
                history=root.history,
                started_ns=root.started_ns,
                mountpoint=root.mountpoint,
                renders=renders,
                page_renders=renders.pages(renders_dir.with_name("pages"), None),
                # files too big for the daemon to render, written a message at a time
                # (another agent's context of such a file stays EFBIG: a worker would
                # hold it all)
                context_renders=(
                    renders.sibling("context.json", renders_dir.with_name("contexts"))
                    if agent in STREAMED_AGENTS
                    else None
                ),
                search=self.searches[agent],
                prefix=(*root.prefix, AGENTS, agent),  # a store machine's: below it
                read_only_reason=READ_ONLY_REASON,
                root=root,
            )
            if branching is not None and agent in BRANCHING_AGENTS:
                self._can_send(self.contexts[agent], home, own_cache, branching)

    @staticmethod
    def _can_send(
        context: MountContext, home: AgentHome, own_cache: Path, options: BranchingOptions
    ) -> None:
        command: BranchingCommand | str = branching_command(
            home.agent, home.root, options.templates.get(home.agent), os.environ
        )
        context.agent_command = command
        context.runs = AgentRuns(
            SendLogs(own_cache / "send-logs"), timeout=options.timeout, grace=options.grace
        )

    async def scan_first(self) -> None:
        """Every agent's first scan, each in a worker thread, all at once: the mount
        serves meanwhile (a lookup that comes first waits in a thread of its own)."""
        async with trio.open_nursery() as nursery:
            for index in self.indexes:
                nursery.start_soon(
                    partial(trio.to_thread.run_sync, index.first_scan, abandon_on_cancel=True)
                )

    def runs(self) -> list[AgentRuns]:
        """The runs of every agent ``send`` can run (the daemon serves and ends them)."""
        return [c.runs for c in self.contexts.values() if c.runs is not None]

    # -- AgentViews ---------------------------------------------------------------------

    def agent_names(self) -> list[str]:
        return list(self.contexts)

    def agent_context(self, name: str) -> MountContext | None:
        return self.contexts.get(name)

    def search_views(self) -> list[tuple[str, SearchView]]:
        archived = [(f"{agent}_archive", view) for agent, view in self.archive_searches.items()]
        return [*self.searches.items(), *archived]

    def archive_search_views(self) -> list[SearchView]:
        """The archived files' indexes (no context of their own: the daemon runs their
        indexers beside the agents')."""
        return list(self.archive_searches.values())

    def caches(self) -> list[SessionCache]:
        return [context.sessions for context in self.contexts.values()]

    def close(self) -> None:
        for context in self.contexts.values():
            for sibling in (context.page_renders, context.context_renders):
                if sibling is not None:
                    sibling.close()
            if context.renders is not None:
                context.renders.close()
        for view in (*self.searches.values(), *self.archive_searches.values()):
            view.close()


def _root_ctl_notice(
    root: MountContext, agent: str
) -> Callable[[LoadedSession, WriteRejected], None]:
    """Puts a session's refused rendering in the root ``ctl``, naming the session."""

    def notice(session: LoadedSession, exc: WriteRejected) -> None:
        where = "/".join((AGENTS, agent, *mount_parts(session.ref.project, session.ref.stem)))
        root.record_root_refusal(WriteRejected(exc.errno, f"{where}/{exc.reason}"))

    return notice
