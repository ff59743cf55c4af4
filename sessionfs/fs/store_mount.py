"""Wiring of the store mount (``sessionfs mount --store s3://BUCKET[/PREFIX]``).

The store's mirror (`sessionfs.store.mirror`) lives in ``<cache-dir>/store-<hash>``:
one agent dir per machine under ``machines/``, byte-identical to the machine's files.
Each machine gets the local mount's views over its mirrored agent dir (a
`MirroredAgentIndex`, which fetches a file the mirror evicted under ``--mirror-max-gb``
when it is asked for, and a `SessionCache` sharing ``--cache-mb`` with the others), made
when first shown; only machines with sessions, and at most `MAX_MACHINES`. The
mirror is refreshed once before the mount is ready (bounded: an unreachable store
leaves the mount serving what the cache dir has) and every ``--refresh-seconds`` after;
a refresh that changed files has every loaded session checked at once, so the kernel's
caches of what changed are dropped (``ops.session_changed``). Each machine has its own
search index in ``--cache-dir`` (`SearchView`, kept current by a `SearchIndexer` task
started when the machine is first seen), and so has each of its other agents' dirs the
store holds (``machines/<m>/agents/<agent>/``: Claude Code, Codex, … synced from it);
root ``search/<words>`` merges all their hits by time as ``search/`` merges agents
(`search_result`).

The S3 library is loaded only here, by `open_mirror`, and this module is imported by the
daemon only for ``--store``.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from core.agent_homes import OTHER_AGENTS, AgentHome
from core.search_index import Hit
from sessionfs.fs.agent_mounts import AgentMounts
from sessionfs.fs.foreground import Foreground
from sessionfs.fs.memory import release_free_memory
from sessionfs.fs.mirrored_index import MirroredAgentIndex, MirroredFiles
from sessionfs.fs.nodes.base import MountContext
from sessionfs.fs.nodes.store import MACHINES, StoreRootDir
from sessionfs.fs.ops import SessionFsOperations
from sessionfs.fs.search_indexer import SearchIndexer
from sessionfs.store.layout import MAX_MACHINES, SESSIONS_TREE, is_machine_name, split_tree_key
from sessionfs.store.mirror import BLOB_STATE_PREFIX
from sessionfs.store.refresher import StoreRefresher, open_mirror
from sessionfs.store.url import AnyStoreURL, parse_store_url
from sessionfs.view.access import Caller
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.cache_dir import agent_cache_dir
from sessionfs.view.history import HistoryView
from sessionfs.view.prerender import Prerenderer
from sessionfs.view.search_view import SearchView, entry_mount_path, search_result
from sessionfs.view.session_cache import SessionCache

__all__ = ["FIRST_REFRESH_TIMEOUT", "StoreMount", "fetched_again_by_name", "mirror_dir_of"]

log = logging.getLogger("sessionfs.store_mount")

#: How long the mount waits for the first refresh before it serves what it has.
FIRST_REFRESH_TIMEOUT = 15.0


def fetched_again_by_name(state_key: str) -> bool:
    """Which of the mirror's files (state keys) ``--mirror-max-gb`` may evict: the
    ones the mount fetches again when asked for by name (`MirroredAgentIndex`), a
    machine's agent-dir sessions and the blobs. Another agent's file
    (``machines/<m>/agents/<agent>/``) is shown by a scan of its dir, so evicted it
    would be gone from the mount and from ``search/`` until the mirror was cleared:
    never evicted (one evicted before comes back with the next refresh)."""
    if state_key.startswith(BLOB_STATE_PREFIX):
        return True
    _machine, _, name = state_key.partition("/")
    return split_tree_key(name)[0] == SESSIONS_TREE


def mirror_dir_of(cache_dir: Path, url: AnyStoreURL, endpoint_url: str | None) -> Path:
    """The store's mirror in ``--cache-dir``: one dir per endpoint and store URL, so two
    stores never share (or clobber) each other's objects."""
    digest = hashlib.sha256(f"{endpoint_url or ''}|{url}".encode()).hexdigest()[:20]
    return cache_dir / f"store-{digest}"


def _has_sessions(machine_dir: Path) -> bool:
    """The mirror has sessions of the machine: its agent dir's, or another agent's."""
    return (machine_dir / "sessions").is_dir() or (machine_dir / "agents").is_dir()


class MachineContexts:
    """One `MountContext` per mirrored machine, made on first use (thread-safe)."""

    def __init__(
        self,
        machines_dir: Path,
        cache_dir: Path,
        budget_bytes: int,
        mountpoint: str,
        started_ns: int,
        files: MirroredFiles | None = None,
    ) -> None:
        #: the mirror's evicted files, fetched again on demand (None: nothing evicted)
        self.files = files
        self.machines_dir = machines_dir
        self.cache_dir = cache_dir
        self.budget_bytes = budget_bytes
        self.mountpoint = mountpoint
        self.started_ns = started_ns
        self._contexts: dict[str, MountContext] = {}
        self._lock = threading.Lock()
        #: called with each new machine's cache (the daemon's invalidation listeners)
        self.on_new_cache: Callable[[SessionCache], None] = lambda cache: None

    def names(self) -> list[str]:
        """The machines the mirror has sessions of (whatever the store says right now),
        at most `MAX_MACHINES`: each costs an index, a cache and a search indexer."""
        try:
            with os.scandir(self.machines_dir) as it:
                names = sorted(e.name for e in it if self._shown(e))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return names[:MAX_MACHINES]

    @staticmethod
    def _shown(entry: os.DirEntry[str]) -> bool:
        return (
            is_machine_name(entry.name)
            and entry.is_dir(follow_symlinks=False)
            and _has_sessions(Path(entry.path))
        )

    def context(self, name: str) -> MountContext | None:
        if not is_machine_name(name) or not _has_sessions(self.machines_dir / name):
            return None
        with self._lock:
            found = self._contexts.get(name)
            if found is None:
                if len(self._contexts) >= MAX_MACHINES:
                    return None
                found = self._contexts[name] = self._new_context(name)
                self._share_budget()
        return found

    def all(self) -> list[MountContext]:
        with self._lock:
            return list(self._contexts.values())

    def _new_context(self, name: str) -> MountContext:
        agent_dir = self.machines_dir / name
        index = (
            MirroredAgentIndex(agent_dir, name, self.files)
            if self.files is not None
            else AgentIndex(agent_dir)
        )
        cache = SessionCache(index, self.budget_bytes, after_eviction=release_free_memory)
        self.on_new_cache(cache)
        context = MountContext(
            index=index,
            sessions=cache,
            history=HistoryView(agent_dir / "history.db"),  # never shipped: never shown
            started_ns=self.started_ns,
            mountpoint=self.mountpoint,
            renders=Prerenderer(
                index.sessions_root, agent_cache_dir(self.cache_dir, agent_dir) / "renders"
            ),
            prefix=(MACHINES, name),
        )
        context.agents = self._agents_of(agent_dir, context)
        return context

    def _agents_of(self, agent_dir: Path, context: MountContext) -> AgentMounts | None:
        """The machine's other agents' files the store holds (``agents/<agent>/`` in
        its mirrored dir), shown under ``machines/<m>/agents/`` like a local mount's."""
        homes = [
            AgentHome(agent, agent_dir / "agents" / agent)
            for agent in OTHER_AGENTS
            if (agent_dir / "agents" / agent).is_dir()
        ]
        if not homes:
            return None
        agents = AgentMounts(
            homes, context, self.cache_dir, self.budget_bytes, after_eviction=release_free_memory
        )
        for cache in agents.caches():
            self.on_new_cache(cache)
        return agents

    def _share_budget(self) -> None:
        """``--cache-mb`` bounds all machines' loaded sessions together."""
        share = max(1, self.budget_bytes // len(self._contexts))
        for context in self._contexts.values():
            context.sessions.budget = share


class StoreMount:
    """The store mount's state: the mirror's refresher and the machines' views."""

    def __init__(
        self,
        url: AnyStoreURL,
        endpoint_url: str | None,
        cache_dir: Path,
        budget_bytes: int,
        mountpoint: str,
        refresh_seconds: float,
        mirror_max_bytes: int,
    ) -> None:
        self.refresh_seconds = refresh_seconds
        self.cache_dir = cache_dir
        #: the FUSE requests in flight (set with the operations)
        self.foreground: Foreground | None = None
        #: each machine's search indexes, made with their indexers (`_index_new_machines`):
        #: (its ``ctl`` name, the index) of its agent dir, then of each of its other
        #: agents as its ``agents/`` lists them
        self.searches: dict[str, list[tuple[str, SearchView]]] = {}
        self._searches_lock = threading.Lock()  # added to by one thread, read by others
        #: indexers made before the event loop runs (`first_refresh`), started by
        #: `keep_refreshing`
        self._unstarted: list[SearchIndexer] = []
        mirror_dir = mirror_dir_of(cache_dir, url, endpoint_url)
        label = f"{url} at {endpoint_url}" if endpoint_url else str(url)
        mirror = open_mirror(url, endpoint_url, mirror_dir, mirror_max_bytes)
        mirror.evictable = fetched_again_by_name
        self.refresher = StoreRefresher(mirror, label)
        self.started_ns = time.time_ns()
        self.machines = MachineContexts(
            mirror_dir / MACHINES,
            cache_dir,
            budget_bytes,
            mountpoint,
            self.started_ns,
            files=self.refresher,
        )
        # The root's own context: it shows no agent dir (the machines do); its views
        # point at the mirror's top, which has no sessions/.
        root_index = AgentIndex(mirror_dir)
        self.root_context = MountContext(
            index=root_index,
            sessions=SessionCache(root_index, 1),
            history=HistoryView(mirror_dir / "history.db"),
            started_ns=self.started_ns,
            mountpoint=mountpoint,
        )

    # -- StoreViews (what the nodes ask) ---------------------------------------------

    def machine_names(self) -> list[str]:
        return self.machines.names()

    def machine_context(self, name: str) -> MountContext | None:
        return self.machines.context(name)

    def ctl_items(self) -> list[tuple[str, Any]]:
        return [
            *self.refresher.ctl_items(),
            *(
                item
                for name, view in self._views()
                for item in view.progress.ctl_items(f"search_{name}")
            ),
        ]

    def search(self, query: str, caller: Caller) -> bytes:
        """Root ``search/<query>``: the newest hits that ``caller`` may read in the
        mirror, of every machine and of its other agents, each entry path under
        ``machines/<name>/`` (an agent's under ``machines/<name>/agents/<agent>/``):
        the indexes merged by time as ``search/`` merges an agent dir's and the other
        agents' (`search_result`: each read only as far as the merge needs; hits of one
        millisecond by machine name, then the machine's agent dir before its agents in
        ``agents/`` order, then session file and entry id; cached for a moment, so
        ``stat`` and ``read`` agree). Blocking: a worker thread."""
        return search_result([view for _, view in self._views()], query, caller)

    # -- the daemon's side -----------------------------------------------------------

    def operations(self, debug: bool) -> SessionFsOperations:
        """The read-only FUSE operations of this mount (every write: ``EROFS``)."""
        ops = SessionFsOperations(
            StoreRootDir(self.root_context, (), self), read_only=True, debug=debug
        )

        def listen(cache: SessionCache) -> None:
            cache.listeners.append(ops.session_changed)
            cache.dehydrate_listeners.append(ops.session_dehydrated)

        self.machines.on_new_cache = listen
        self.foreground = ops.foreground  # the machines' indexers give way to requests
        return ops

    def first_refresh(self) -> None:
        """Before the mount serves: the first refresh (bounded), then the indexes of
        the machines it brought, so that a search right after mounting waits for their
        first builds as a local mount's root ``search/`` does (``search_indexers``)."""
        if not self.refresher.first_refresh(FIRST_REFRESH_TIMEOUT):
            log.warning(
                "the store's first refresh takes over %.0f s; serving what is cached meanwhile",
                FIRST_REFRESH_TIMEOUT,
            )
        self._unstarted = self._index_new_machines()

    async def keep_refreshing(self) -> None:
        """The periodic refresh and each machine's search indexer (a task of the
        daemon's nursery, cancelled at unmount)."""
        async with trio.open_nursery() as indexers:
            new, self._unstarted = self._unstarted, []
            while True:
                for indexer in new:
                    indexers.start_soon(indexer.run)
                await trio.sleep(self.refresh_seconds)
                result = await trio.to_thread.run_sync(
                    self.refresher.refresh, abandon_on_cancel=True
                )
                if result is not None and result.files_changed:
                    for context in self.machines.all():
                        await context.sessions.recheck_loaded()
                new = await trio.to_thread.run_sync(self._index_new_machines)

    def _views(self) -> list[tuple[str, SearchView]]:
        """(``ctl`` name, index) of every index, in the order hits of one millisecond
        are shown: by machine name, each machine's agent dir before its agents."""
        with self._searches_lock:
            return [found for name in sorted(self.searches) for found in self.searches[name]]

    def _index_new_machines(self) -> list[SearchIndexer]:
        """The search indexes of each machine not indexed yet: its agent dir's, then
        each of its other agents' dirs'. Their indexers join the root's
        ``search_indexers`` (its ``search/`` waits for their first builds) and are
        returned, to be started (one first build at a time per machine, its agent
        dir's first)."""
        new: list[SearchIndexer] = []
        for name in self.machines.names():
            context = self.machines.context(name)
            if name in self.searches or context is None:
                continue
            view = SearchView(
                self.cache_dir,
                context.index.agent_dir,
                context.index.sessions_root,
                entry_path=functools.partial(_machine_entry_path, name),
            )
            indexer = SearchIndexer(view, self.foreground)
            context.sessions.listeners.append(indexer.session_changed)
            indexers, views = [indexer], [(name, view)]
            for agent, agent_view, cache in _agent_searches(context):
                indexer = SearchIndexer(agent_view, self.foreground, after=indexer)
                cache.listeners.append(indexer.session_changed)
                indexers.append(indexer)
                views.append((f"{name}/{agent}", agent_view))
            with self._searches_lock:
                self.searches[name] = views
            self.root_context.search_indexers.extend(indexers)  # (one append: GIL-atomic)
            new += indexers
        return new

    def close(self) -> None:
        for context in (self.root_context, *self.machines.all()):
            context.history.close()
            if context.renders is not None:
                context.renders.close()  # its render workers
            if isinstance(context.agents, AgentMounts):
                context.agents.close()  # its agents' search indexes too
        with self._searches_lock:
            own = [views[0][1] for views in self.searches.values()]
        for view in own:
            view.close()


def _agent_searches(context: MountContext) -> list[tuple[str, SearchView, SessionCache]]:
    """(agent, search index, session cache) of each of a machine's other agents (their
    indexes' hits are below ``machines/<m>/agents/<agent>/``: `AgentMounts`)."""
    agents = context.agents
    if not isinstance(agents, AgentMounts):
        return []
    return [(a, view, agents.contexts[a].sessions) for a, view in agents.searches.items()]


def _machine_entry_path(machine: str, hit: Hit) -> str:
    """A machine's hit's entry file, from the store mount's root."""
    return f"{MACHINES}/{machine}/{entry_mount_path(hit)}"


def open_store_mount(
    store: str,
    endpoint_url: str | None,
    cache_dir: Path,
    budget_bytes: int,
    mountpoint: str,
    refresh_seconds: float,
    mirror_max_bytes: int,
) -> StoreMount:
    """`StoreMount` for the ``--store`` text; `StoreURLError` (a `ValueError`, with the
    reason) for a bad URL, `ImportError` without boto3."""
    url = parse_store_url(store)
    return StoreMount(
        url, endpoint_url, cache_dir, budget_bytes, mountpoint, refresh_seconds, mirror_max_bytes
    )
