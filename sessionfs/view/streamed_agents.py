"""``transcript.md``, ``context.json`` and ``transcript.html`` of a Claude Code or Codex
session file too big to hold parsed, written piece by piece: ``write_read_again``.

Claude Code's and Codex's users have the biggest session files (hundreds of MB).
Rendered in memory, every turn's content is held while the rendering is made (several
times the file). Here:

1. the file is read where it is (`core.formats.lines.LineFile` over the whole-read
   limit: a small record per line, ``pread`` for the rest);
2. the reader's own rules run keeping only where each message is: Claude Code's
   `core.formats.claude_turns.Turns` with ``hold=False`` (the same path, compaction,
   response merging and tool-result placing as in memory, each turn keeping its lines
   and block positions), Codex's history and transcript as `_ItemAt` / `_ShownAt`
   (its compactions replacing and its rollbacks dropping them, as in memory), both
   found in one pass (`CodexSession.read_again`);
3. each message is parsed again from its line as it is written, and let go.

What is held: the per-line records and those positions, one message, and for
``transcript.md`` and the page the tool names seen (a name per call). The bytes are
exactly those of the rendering in memory (`sessionfs.view.renderings.render_source`;
the tests compare them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from core.formats.base import SessionSource, TranscriptMessage
from core.formats.claude import ClaudeSession
from core.formats.claude_turns import Turns
from core.formats.codex import CodexSession
from core.formats.lines import ZSTD_SUFFIX, decompressing_into, set_whole_read_limit
from sessionfs.view import render, render_html
from sessionfs.view.html_images import ImageSource
from sessionfs.view.streamed_json import write_context_json
from sessionfs.view.streamed_render import NotStreamable

__all__ = [
    "ReadAgain",
    "claude_read_again",
    "codex_read_again",
    "open_in_place",
    "write_read_again",
]


def open_in_place(agent: str, path: str | Path, decompress_dir: str | None = None) -> SessionSource:
    """``agent``'s session file ``path`` opened as the daemon opens it, its lines read
    from the file whatever its size (never read whole); a compressed file's from its
    text decompressed into ``decompress_dir`` (`core.formats.lines.decompressing_into`;
    ``None``: read whole)."""
    # Imported here: the agent registry is no import of a render worker's start-up
    # (`sessionfs.view.render_worker`), only of a job for another agent's file.
    from sessionfs.view.agent_sources import open_agent_file

    held = set_whole_read_limit(0)
    held_dir = decompressing_into(decompress_dir)
    try:
        return open_agent_file(agent, Path(path))
    finally:
        set_whole_read_limit(held)
        decompressing_into(held_dir)


@dataclass(frozen=True)
class ReadAgain:
    """What the three renderings read of a session whose messages are read again from
    its lines as they are written."""

    #: `context`'s ``model``
    model: str | None
    #: `context`'s messages, one at a time (called again for each pass)
    context_messages: Callable[[], Iterator[Any]]
    #: how many messages `transcript_messages` has, and them one at a time
    transcript: Callable[[], tuple[int, Iterator[TranscriptMessage]]]


def claude_read_again(session: ClaudeSession) -> ReadAgain:
    """A Claude Code session's (its turns built once, ``hold=False``)."""
    turns = Turns(session, hold=False)
    return ReadAgain(
        turns.model(),
        turns.context_messages,
        lambda: (turns.transcript_length(), turns.transcript_messages()),
    )


def codex_read_again(session: CodexSession) -> ReadAgain:
    """A Codex session's (where its messages are found once, in one pass)."""
    positions = session.read_again()
    return ReadAgain(session.context_model(), positions.context_messages, positions.transcript)


def write_read_again(
    session: SessionSource,
    turns: ReadAgain,
    what: str,
    out: BinaryIO,
    images: ImageSource | None = None,
) -> None:
    """Write rendering ``what`` (``transcript.md``, ``context.json`` or
    ``transcript.html``) of ``session`` to ``out``, one message in memory at a time
    (module docstring)."""
    if what == "context.json":
        context: dict[str, Any] = {"messages": [], "model": turns.model}  # its keys, in order
        write_context_json(context, turns.context_messages, out)
        return
    pieces: Iterator[bytes]
    count, messages = turns.transcript()
    if what == "transcript.md":
        pieces = render.transcript_md_sections(
            session.title() or None,
            ((turn.message, turn.entry_name, turn.time) for turn in messages),
        )
    elif what == "transcript.html":
        shown = _Counted(count, messages)
        pieces = render_html.transcript_html_pieces(session, images=images, turns=shown)
    else:
        raise KeyError(what)
    for piece in pieces:
        out.write(piece)


class _Counted:
    """The transcript's messages, read once in order (`render_html.CountedTurns`),
    counted before."""

    def __init__(self, count: int, messages: Iterator[TranscriptMessage]) -> None:
        self._count = count
        self._messages = messages

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[TranscriptMessage]:
        return self._messages


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


def open_agent_streamed(agent: str, path: str, decompress_dir: str | None) -> _AgentFile:
    """A Claude Code or Codex session file opened for streamed renderings
    (`sessionfs.view.streamed_files.open_streamed`), a compressed rollout's text
    decompressed into ``decompress_dir`` (`NotStreamable` without one: it is read
    whole)."""
    if path.endswith(ZSTD_SUFFIX) and decompress_dir is None:
        raise NotStreamable("a compressed rollout without a dir to decompress it into")
    session = open_in_place(agent, path, decompress_dir)
    if isinstance(session, ClaudeSession):
        return _AgentFile(session, partial(claude_read_again, session))
    assert isinstance(session, CodexSession)  # (the "codex" format's reader)
    return _AgentFile(session, partial(codex_read_again, session))
