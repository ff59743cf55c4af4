"""The terminal progress line and ``sessionfs sync``'s rendering of a pass, without a
terminal: a stream that says it is one, and one that does not."""

from __future__ import annotations

import io

from sessionfs.commands.progress_line import ProgressLine
from sessionfs.commands.sync_progress_line import SyncProgressLine
from sessionfs.store.sync_progress import PassProgress, SyncProgress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pass_drawn_in_place_then_erased() -> None:
    stream = Terminal()
    draw = SyncProgressLine(ProgressLine(stream))
    draw(PassProgress(files_done=4, files_total=4, bytes_done=3 << 20, elapsed=2.0))
    assert stream.getvalue() == "\r\x1b[Ksessionfs sync: 4/4 files, 3.0 MB, 1.5 MB/s"
    draw(PassProgress(4, 4, 3 << 20, 2.0, finished=True))
    assert stream.getvalue().endswith("1.5 MB/s\r\x1b[K")


def test_the_time_left_follows_the_files_done() -> None:
    stream = Terminal()
    line = ProgressLine(stream)
    line.clear()  # nothing shown yet: nothing to erase
    SyncProgressLine(line)(PassProgress(1, 4, 1 << 20, 10.0))
    assert stream.getvalue() == "\r\x1b[Ksessionfs sync: 1/4 files, 1.0 MB, 0.1 MB/s, ~30 s left"


def test_nothing_is_written_where_no_terminal_is() -> None:
    stream = io.StringIO()
    progress = SyncProgress(SyncProgressLine(ProgressLine(stream)))
    progress.begin()
    progress.listed(2)
    progress.file_done(100)
    progress.end()
    assert stream.getvalue() == ""
    moment = progress.now()
    assert (moment.files_done, moment.files_total, moment.bytes_done) == (1, 2, 100)
