"""``sessionfs sync`` on a terminal: the pass under way as one line, rewritten in
place (files done of those listed, bytes shipped, the rate, the time left at the rate
of files so far), like ``rclone -P``:

    sessionfs sync: 412/1000 files, 35.2 MB, 4.1 MB/s, ~12 s left

It listens to the engine's `SyncProgress`; a log line (the pass's summary, a warning)
first erases it, so the two never share a line. Not on a terminal, nothing of it is
written: the summary line the sync logs after each pass is all there is.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from sessionfs.commands.progress_line import ProgressLine
from sessionfs.store.sync_progress import PassProgress, SyncProgress
from sessionfs.view.progress_text import eta_text, rate_text, size_text

__all__ = ["SyncProgressLine", "show_sync_progress"]


class SyncProgressLine:
    """A `SyncProgress` listener drawing `ProgressLine`."""

    def __init__(self, line: ProgressLine) -> None:
        self.line = line

    def __call__(self, moment: PassProgress) -> None:
        if moment.finished:
            self.line.clear()
            return
        text = (
            f"sessionfs sync: {moment.files_done}/{moment.files_total} files, "
            f"{size_text(moment.bytes_done)}, {rate_text(moment.bytes_done, moment.elapsed)}"
        )
        left = eta_text(moment.elapsed, moment.files_done, moment.files_total)
        self.line.show(
            f"{text}, {left}" if left else text,
            now=moment.files_done == moment.files_total,  # all listed done: always drawn
        )


class _ClearFirst(logging.Filter):
    """Erases the progress line before a log record is written to the terminal."""

    def __init__(self, line: ProgressLine) -> None:
        super().__init__()
        self.line = line

    def filter(self, record: logging.LogRecord) -> bool:
        self.line.clear()
        return True


def show_sync_progress(progress: SyncProgress, stream: TextIO = sys.stderr) -> bool:
    """Show ``progress`` on ``stream`` if it is a terminal; whether it is shown."""
    line = ProgressLine(stream)
    if not line.enabled:
        return False
    progress.listener = SyncProgressLine(line)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ClearFirst(line))
    return True
