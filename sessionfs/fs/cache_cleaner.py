"""The daemon's background task that keeps ``--cache-dir``'s render cache from growing
for ever: one pass at mount start, then one every `CLEAN_INTERVAL_SECONDS`
(`sessionfs.view.render_cache_cleanup`). Each pass gives way to requests, as the
search indexer does (`sessionfs.fs.foreground`): it waits for a quiet moment and runs
in a thread of its own at a lower priority, so a first ``cat`` right after mounting
does not share the cores with it."""

from __future__ import annotations

import logging

import trio

from sessionfs.fs.foreground import Foreground, run_in_background_thread
from sessionfs.view.prerender import Prerenderer
from sessionfs.view.render_cache_cleanup import clean_render_cache

__all__ = ["CLEAN_INTERVAL_SECONDS", "keep_render_cache_clean"]

log = logging.getLogger(__name__)

#: Sessions are deleted rarely: an hourly pass keeps the cache near its live size.
CLEAN_INTERVAL_SECONDS = 3600.0


async def keep_render_cache_clean(
    renders: Prerenderer,
    interval: float = CLEAN_INTERVAL_SECONDS,
    foreground: Foreground | None = None,
) -> None:
    """Clean the render cache now and every ``interval`` seconds until cancelled."""
    cache_root = renders.cache_root
    if cache_root is None:
        return
    while True:
        try:
            if foreground is not None:
                await foreground.quiet()
            await run_in_background_thread(
                lambda: clean_render_cache(cache_root, renders.sessions_root),
                name="sessionfs-cache-cleaner",
            )
        except Exception:  # a cleaning bug must never take the mount down
            log.exception("render cache: cleaning failed")
        await trio.sleep(interval)
