"""Wiring of the archive into a local mount (``sessionfs mount`` with an archive: the
default local archive when it exists, ``--archive URL``).

The archive's mirror (`sessionfs.store.mirror`, in ``<cache-dir>/store-<hash>``, the same
as ``--store`` uses) is brought up to the archive once before the mount is ready
(bounded: a slow store leaves the mount serving what the cache dir has) and every
``--refresh-seconds`` (at least a minute) after, in a worker thread. This machine's
files in it (``machines/<machine>/agents/<agent>/``) are listed under ``agents/<agent>/``
beside the live ones (`sessionfs.view.archived.ArchivedCatalog`), and the agent dir's
own (``machines/<machine>/sessions/``) under ``sessions/`` beside its live ones
(`sessionfs.view.archived_index.ArchivedAgentIndex`): a session whose file was deleted
shows on, read-only, rendered from the archived bytes.

The mirror's disk is bounded by ``--mirror-max-gb`` (`LiveCopies`): past it, its copies
of files the agents still have are removed, least recently read and then oldest first
(the mount shows the live file; nothing it shows changes), and a removed copy is fetched
again by the refresh after its agent deletes the file. A file only the archive holds is
never removed (it is what the mount shows of that session), nor counted out.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import trio

from core.agent_homes import AgentHome
from sessionfs.fs.store_mount import FIRST_REFRESH_TIMEOUT, mirror_dir_of
from sessionfs.store.layout import SESSIONS_TREE, agent_tree, split_tree_key
from sessionfs.store.mirror import BLOB_STATE_PREFIX
from sessionfs.store.refresher import StoreRefresher, open_mirror
from sessionfs.store.restore import present_files
from sessionfs.store.url import parse_store_url
from sessionfs.view.archived import mark_archive_mirror

__all__ = ["LiveCopies", "LocalArchive"]

#: How long one look at which files the agents have answers `LiveCopies` (seconds).
LIVE_LOOK_SECONDS = 30.0

log = logging.getLogger("sessionfs.archive_mount")

#: The shortest time between two refreshes of the archive's mirror.
ARCHIVE_REFRESH_SECONDS = 60.0


class LiveCopies:
    """Which of the mirror's files (state keys) are copies of files the agents have
    now: the ones it may evict (module docstring). Another machine's files are not
    shown by this mount: evictable too."""

    def __init__(self, machine: str, agent_dir: Path, homes: Sequence[AgentHome]) -> None:
        self.machine, self.agent_dir = machine, agent_dir
        self.homes = {home.agent: home.root for home in homes}
        self._present: set[tuple[str, str]] = set()
        self._looked_at = -LIVE_LOOK_SECONDS

    def __call__(self, state_key: str) -> bool:
        if state_key.startswith(BLOB_STATE_PREFIX):
            return os.path.isfile(self.agent_dir / "blobs" / state_key[len(BLOB_STATE_PREFIX) :])
        machine, _, name = state_key.partition("/")
        return machine != self.machine or split_tree_key(name) in self._live()

    def _live(self) -> set[tuple[str, str]]:
        """(tree, rel) of every file the agents have, as the archive names them: one
        walk of their dirs per `LIVE_LOOK_SECONDS` (a refresh asks for every file)."""
        if time.monotonic() - self._looked_at > LIVE_LOOK_SECONDS:
            self._present = set(present_files(self.agent_dir, self.homes))
            self._looked_at = time.monotonic()
        return self._present


class LocalArchive:
    """The mirror of one archive, and which machine of it this mount shows."""

    def __init__(
        self,
        url: str,
        endpoint_url: str | None,
        cache_dir: Path,
        machine: str,
        refresh_seconds: float,
        live: LiveCopies,
        max_bytes: int,
    ) -> None:
        parsed = parse_store_url(url)
        mirror_dir = mirror_dir_of(cache_dir, parsed, endpoint_url)
        mirror = open_mirror(parsed, endpoint_url, mirror_dir, max_bytes)
        mirror.evictable = live  # only copies of live files: the listings show the rest
        mirror.by_age = True  # the oldest copies first (the mount reads none of them)
        self.refresher = StoreRefresher(mirror, str(parsed))
        mark_archive_mirror(mirror_dir)  # its files' header.json: only in the archive
        self.machine = machine
        # New files come with a sync (every 15 min by the timer), and each refresh
        # lists the whole archive: once a minute is soon enough.
        self.refresh_seconds = max(ARCHIVE_REFRESH_SECONDS, refresh_seconds)
        #: this machine's files in the mirror: an agent dir, ``agents/<agent>/`` in it
        self.machine_dir = self.refresher.mirror.machine_dir(machine)

    def agent_root(self, agent: str) -> Path:
        """Where the mirror keeps ``agent``'s archived files, in the agent's layout."""
        return self.machine_dir / "agents" / agent

    def generations_root(self, agent: str) -> Path:
        """Where the mirror keeps the older generations of ``agent``'s files."""
        return self.refresher.mirror.generations_tree(self.machine, agent_tree(agent))

    def own_generations_root(self) -> Path:
        """Where the mirror keeps the older generations of the agent dir's own files
        (its ``sessions/`` are the machine dir's: `machine_dir`)."""
        return self.refresher.mirror.generations_tree(self.machine, SESSIONS_TREE)

    def ctl_items(self) -> list[tuple[str, object]]:
        """The mirror's disk use and budget (``--mirror-max-gb``), for the root ``ctl``."""
        mirror = self.refresher.mirror
        return [
            ("archive_mirror_bytes", mirror.used_bytes),
            ("archive_mirror_max_bytes", mirror.max_bytes),
            ("archive_files_evicted", mirror.state.evicted_count()),
        ]

    def first_refresh(self) -> None:
        if not self.refresher.first_refresh(FIRST_REFRESH_TIMEOUT):
            log.warning("the archive's first refresh takes over %.0f s", FIRST_REFRESH_TIMEOUT)

    async def keep_refreshing(self) -> None:
        """The periodic refresh (a task of the daemon's nursery, cancelled at unmount);
        the agents' listings see new files at their next scan."""
        while True:
            await trio.sleep(self.refresh_seconds)
            await trio.to_thread.run_sync(self.refresher.refresh, abandon_on_cancel=True)
