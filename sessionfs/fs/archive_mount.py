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
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import trio

from sessionfs.fs.store_mount import FIRST_REFRESH_TIMEOUT, mirror_dir_of
from sessionfs.store.layout import SESSIONS_TREE, agent_tree
from sessionfs.store.refresher import StoreRefresher, open_mirror
from sessionfs.store.url import parse_store_url
from sessionfs.view.archived import mark_archive_mirror

__all__ = ["LocalArchive"]

log = logging.getLogger("sessionfs.archive_mount")

#: The shortest time between two refreshes of the archive's mirror.
ARCHIVE_REFRESH_SECONDS = 60.0


class LocalArchive:
    """The mirror of one archive, and which machine of it this mount shows."""

    def __init__(
        self,
        url: str,
        endpoint_url: str | None,
        cache_dir: Path,
        machine: str,
        refresh_seconds: float,
    ) -> None:
        parsed = parse_store_url(url)
        mirror_dir = mirror_dir_of(cache_dir, parsed, endpoint_url)
        # No disk budget: the listings show what is on disk, so an evicted file would
        # drop out of them (a team store's mount fetches one again when asked by name).
        self.refresher = StoreRefresher(
            open_mirror(parsed, endpoint_url, mirror_dir, sys.maxsize), str(parsed)
        )
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

    def first_refresh(self) -> None:
        if not self.refresher.first_refresh(FIRST_REFRESH_TIMEOUT):
            log.warning("the archive's first refresh takes over %.0f s", FIRST_REFRESH_TIMEOUT)

    async def keep_refreshing(self) -> None:
        """The periodic refresh (a task of the daemon's nursery, cancelled at unmount);
        the agents' listings see new files at their next scan."""
        while True:
            await trio.sleep(self.refresh_seconds)
            await trio.to_thread.run_sync(self.refresher.refresh, abandon_on_cancel=True)
