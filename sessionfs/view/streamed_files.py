"""A session file too big to hold, opened for its renderings to be written a message at
a time: ``open_streamed``, for the agents whose files can be (`STREAMED_AGENTS`).

The render workers (`sessionfs.view.prerender`) open the file once and write each
rendering of `STREAMED` from it: xcsh's through its compact index
(`sessionfs.view.streamed_render`), Claude Code's and Codex's through their readers
over the file read where it is (`sessionfs.view.streamed_agents`).
"""

from __future__ import annotations

import os
from typing import BinaryIO, Protocol

from core.formats.base import SessionSource
from core.formats.xcsh import XcshSession
from core.formats.xcsh_file import FileLines
from sessionfs.view.html_images import ImageSource
from sessionfs.view.streamed_render import (
    STREAMED,
    NotStreamable,
    StreamIndex,
    open_index,
    write_streamed,
)

__all__ = ["STREAMED", "STREAMED_AGENTS", "NotStreamable", "StreamedFile", "open_streamed"]

#: The agents whose files over the render limit are streamed.
STREAMED_AGENTS = frozenset({"xcsh", "claude", "codex"})


class StreamedFile(Protocol):
    """One session file opened for streamed renderings."""

    path: str

    def source(self) -> SessionSource:
        """The session as a `SessionSource` over the same reading (``header.json``,
        ``title``)."""

    def write(self, what: str, out: BinaryIO, images: ImageSource | None) -> None:
        """Write rendering ``what`` (of `STREAMED`) to ``out``."""

    def file_descriptor(self) -> int | None:
        """The open session file (whose readers may read its page's images)."""


class _XcshFile:
    def __init__(self, index: StreamIndex) -> None:
        self.index = index
        self.path = index.path

    def source(self) -> SessionSource:
        return XcshSession(self.index.path, index=self.index)

    def write(self, what: str, out: BinaryIO, images: ImageSource | None) -> None:
        write_streamed(self.index, what, out, images)

    def file_descriptor(self) -> int | None:
        data = self.index.data
        return data.fd if isinstance(data, FileLines) else None


def open_streamed(
    agent: str, path: str | os.PathLike[str], decompress_dir: str | None = None
) -> StreamedFile:
    """``agent``'s session file ``path`` opened for streamed renderings
    (`NotStreamable`: this agent's, or this file, cannot be). ``decompress_dir``: where
    a compressed file's text is decompressed to be read where it is (a file without a
    name, 0600, gone with the reading; ``None``: a compressed file is not streamed)."""
    if agent == "xcsh":
        return _XcshFile(open_index(path))
    if agent in ("claude", "codex"):
        # Imported here: their readers are no import of a render worker's start-up
        # (`sessionfs.view.render_worker`), only of a job for such a file.
        from sessionfs.view.streamed_agents import open_agent_streamed

        return open_agent_streamed(agent, os.fspath(path), decompress_dir)
    raise NotStreamable(f"{agent}: its session files are not rendered a message at a time")
