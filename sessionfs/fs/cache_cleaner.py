"""The daemon's background task that keeps ``--cache-dir``'s render cache from growing
for ever: one pass at mount start, then one every `CLEAN_INTERVAL_SECONDS`
(`sessionfs.view.render_cache_cleanup`; each pass runs in a worker thread)."""

from __future__ import annotations

import logging

import trio

from sessionfs.view.prerender import Prerenderer
from sessionfs.view.render_cache_cleanup import clean_render_cache

__all__ = ["CLEAN_INTERVAL_SECONDS", "keep_render_cache_clean"]

log = logging.getLogger(__name__)

#: Sessions are deleted rarely: an hourly pass keeps the cache near its live size.
CLEAN_INTERVAL_SECONDS = 3600.0


async def keep_render_cache_clean(
    renders: Prerenderer, interval: float = CLEAN_INTERVAL_SECONDS
) -> None:
    """Clean the render cache now and every ``interval`` seconds until cancelled."""
    if renders.cache_root is None:
        return
    while True:
        try:
            await trio.to_thread.run_sync(
                clean_render_cache, renders.cache_root, renders.sessions_root
            )
        except Exception:  # a cleaning bug must never take the mount down
            log.exception("render cache: cleaning failed")
        await trio.sleep(interval)
