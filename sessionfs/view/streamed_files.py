"""A session file too big to hold, opened for its renderings to be written a message at
a time: ``open_streamed``, for the agents whose files can be (`STREAMED_AGENTS`).

The render workers (`sessionfs.view.prerender`) open the file once and write each
rendering of `STREAMED` from it: xcsh's through its compact index
(`sessionfs.view.streamed_render`), Claude Code's and Codex's through their readers
over the file read where it is (`sessionfs.view.streamed_agents`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import BinaryIO, Protocol

from core.formats.base import SessionSource
from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.lines import ZSTD_SUFFIX
from core.formats.xcsh import XcshSession
from core.formats.xcsh_file import FileLines
from sessionfs.view.html_images import ImageSource
from sessionfs.view.streamed_agents import (
    ReadAgain,
    claude_read_again,
    codex_read_again,
    open_in_place,
    write_read_again,
)
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


class _AgentFile:
    """A Claude Code or Codex file read where it is, its messages read again as the
    renderings are written (`sessionfs.view.streamed_agents`)."""

    def __init__(
        self, session: ClaudeSession | CodexSession, read_again: Callable[[], ReadAgain]
    ) -> None:
        self.session = session
        self.path = os.fspath(session.path)
        self._read_again = read_again
        self._turns: ReadAgain | None = None

    def source(self) -> SessionSource:
        return self.session

    def write(self, what: str, out: BinaryIO, images: ImageSource | None) -> None:
        if self._turns is None:  # found once for the renderings written from this file
            self._turns = self._read_again()
        write_read_again(self.session, self._turns, what, out, images)

    def file_descriptor(self) -> int | None:
        return None  # their pages' images are in their lines


def open_streamed(agent: str, path: str | os.PathLike[str]) -> StreamedFile:
    """``agent``'s session file ``path`` opened for streamed renderings
    (`NotStreamable`: this agent's, or this file, cannot be)."""
    if agent == "xcsh":
        return _XcshFile(open_index(path))
    if agent == "claude":
        claude = open_in_place(agent, os.fspath(path))
        assert isinstance(claude, ClaudeSession)  # (the "claude" format's reader)
        return _AgentFile(claude, partial(claude_read_again, claude))
    if agent == "codex":
        codex = open_in_place(agent, os.fspath(path))
        assert isinstance(codex, CodexSession)
        if codex.path.name.endswith(ZSTD_SUFFIX):
            raise NotStreamable("a compressed rollout is read whole")
        return _AgentFile(codex, partial(codex_read_again, codex))
    raise NotStreamable(f"{agent}: its session files are not rendered a message at a time")
