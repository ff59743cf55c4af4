"""The store mount's reader loop: the mirror brought up to the store once before the
mount is ready and every few seconds after, and what ``ctl`` says about it.

The S3 client is created by :func:`open_mirror`, which imports it lazily, so importing
this module (as the daemon's store wiring does) never loads boto3. Refreshes are
serialised by a lock: the first one may still run, past its bounded wait, when the
periodic one starts.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .url import AnyStoreURL

if TYPE_CHECKING:
    from .mirror import MirrorResult, StoreMirror

__all__ = ["RefreshStatus", "StoreRefresher", "open_mirror"]

log = logging.getLogger("sessionfs.store.refresher")


def open_mirror(
    url: AnyStoreURL, endpoint_url: str | None, mirror_dir: Path, max_bytes: int
) -> StoreMirror:
    """The mirror of ``url`` in ``mirror_dir`` (an S3 store imports the S3 client: needs
    boto3)."""
    from .mirror import StoreMirror
    from .open_client import open_store_client

    return StoreMirror(open_store_client(url, endpoint_url), mirror_dir, max_bytes=max_bytes)


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / 1e9))


@dataclass
class RefreshStatus:
    """What the refreshes did so far (all counts since the mount started)."""

    store: str
    #: the end of the last refresh that listed the whole store
    last_refresh_ns: int | None = None
    files_updated: int = 0
    blobs_fetched: int = 0
    bytes_fetched: int = 0
    #: the first of the failing refreshes in a row, ``None`` while the store answers
    unreachable_since_ns: int | None = None
    last_error: str | None = None
    #: machine names in the store left out at the last refresh (no session object, or
    #: past the mirror's cap)
    machines_ignored: int = 0

    def ctl_items(self) -> list[tuple[str, Any]]:
        error = self.last_error
        if self.unreachable_since_ns is not None:
            error = (
                f"store unreachable since {_iso(self.unreachable_since_ns)}, "
                f"serving cached data ({self.last_error})"
            )
        return [
            ("store", self.store),
            ("last_refresh", _iso(self.last_refresh_ns)),
            ("files_updated", self.files_updated),
            ("blobs_fetched", self.blobs_fetched),
            ("bytes_fetched", self.bytes_fetched),
            ("machines_ignored", self.machines_ignored),
            ("last_error", error),
        ]

    def record(self, result: MirrorResult) -> None:
        self.files_updated += result.files_changed
        self.blobs_fetched += result.blobs_fetched
        self.bytes_fetched += result.bytes_fetched
        self.machines_ignored = result.machines_ignored
        if result.error is None:
            self.last_refresh_ns = time.time_ns()
            self.unreachable_since_ns = None
            self.last_error = None
        else:
            self.failed(result.error)

    def failed(self, error: str) -> None:
        if self.unreachable_since_ns is None:
            self.unreachable_since_ns = time.time_ns()
        self.last_error = error


class StoreRefresher:
    """Runs ``mirror.refresh()`` one at a time and keeps the status (thread-safe)."""

    def __init__(self, mirror: StoreMirror, label: str) -> None:
        self.mirror = mirror
        self._refreshing = threading.Lock()
        self._status_lock = threading.Lock()
        self._status = RefreshStatus(store=label)

    def refresh(self) -> MirrorResult | None:
        """One refresh; ``None`` when it failed outright (the cache dir, say)."""
        with self._refreshing:
            try:
                result = self.mirror.refresh()
            except Exception as error:  # a refresh must never take the mount down
                log.exception("store refresh failed")
                with self._status_lock:
                    self._status.failed(str(error))
                return None
        if result.error is not None:
            log.warning("store refresh: %s; serving cached data", result.error)
        with self._status_lock:
            self._status.record(result)
        return result

    def first_refresh(self, timeout: float) -> bool:
        """Refresh before the mount is ready, waiting at most ``timeout`` seconds (a slow
        store then goes on filling the mirror behind a mount that serves what it has).
        True when it finished in time."""
        thread = threading.Thread(target=self.refresh, name="store-refresh", daemon=True)
        thread.start()
        thread.join(timeout)
        return not thread.is_alive()

    def is_evicted(self, machine: str, rel: str) -> bool:
        return self.mirror.is_evicted(machine, rel)

    def note_read(self, machine: str, rel: str) -> None:
        self.mirror.note_read(machine, rel)

    def restore(self, machine: str, rel: str) -> bool:
        """Fetch an evicted file again, now (the mount asked for it); between refreshes,
        never beside one. False when it could not be fetched (the store unreachable)."""
        from .client import StoreError  # loaded already: the mirror has a client

        with self._refreshing:
            try:
                return self.mirror.restore(machine, rel)
            except (OSError, StoreError) as error:
                log.warning("%s/%s: evicted and not fetched again: %s", machine, rel, error)
                return False

    def want_blob(self, machine: str, sha: str) -> None:
        """The mount is asked for a blob of ``machine``: fetched again if it was
        evicted, else noted as read."""
        from .client import StoreError  # loaded already: the mirror has a client

        if not self.mirror.is_blob_evicted(sha):
            self.mirror.note_blob_read(sha)
            return
        with self._refreshing:
            try:
                self.mirror.restore_blob(machine, sha)
            except (OSError, StoreError) as error:
                log.warning("blob %s: evicted and not fetched again: %s", sha, error)

    def ctl_items(self) -> list[tuple[str, Any]]:
        with self._status_lock:
            items = self._status.ctl_items()
        mirror = self.mirror
        return [
            *items[:-1],
            # objects that were not what the format says (not fetched again until changed)
            ("failed_objects", mirror.state.failed_count()),
            ("objects_downloaded", mirror.downloads),
            ("mirror_bytes", mirror.used_bytes),
            ("mirror_max_bytes", mirror.max_bytes),
            ("files_evicted", mirror.state.evicted_count()),
            items[-1],
        ]
