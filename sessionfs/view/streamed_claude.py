"""``transcript.md``, ``context.json`` and ``transcript.html`` of a Claude Code session
file too big to hold parsed, written piece by piece: ``write_claude_streamed``.

Claude Code's own users have the biggest session files (hundreds of MB). Rendered in
memory, every turn's content is held while the rendering is made (several times the
file). Here:

1. the file is read where it is (`core.formats.lines.LineFile` over the whole-read
   limit: a small record per line, ``pread`` for the rest);
2. `core.formats.claude_turns.Turns` is built with ``hold=False``: the same path,
   compaction, response merging and tool-result placing as in memory, each turn
   keeping only where its content is (lines and block positions);
3. each turn's lines are parsed again as it is written, and let go.

What is held: the per-line records and the turns' positions, one turn's content, and
for ``transcript.md`` and the page the tool names seen (a name per call). The bytes are
exactly those of the rendering in memory (`sessionfs.view.renderings.render_source`;
the tests compare them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from core.formats.base import SessionSource, TranscriptMessage
from core.formats.claude import ClaudeSession
from core.formats.claude_turns import Turns
from core.formats.lines import set_whole_read_limit
from sessionfs.view import render, render_html
from sessionfs.view.agent_sources import open_agent_file
from sessionfs.view.html_images import ImageSource
from sessionfs.view.streamed_json import write_context_json

__all__ = ["open_in_place", "write_claude_streamed"]


def open_in_place(agent: str, path: str | Path) -> SessionSource:
    """``agent``'s session file ``path`` opened as the daemon opens it, its lines read
    from the file whatever its size (never read whole)."""
    held = set_whole_read_limit(0)
    try:
        return open_agent_file(agent, Path(path))
    finally:
        set_whole_read_limit(held)


def write_claude_streamed(
    session: ClaudeSession,
    what: str,
    out: BinaryIO,
    images: ImageSource | None = None,
    turns: Turns | None = None,
) -> None:
    """Write rendering ``what`` (``transcript.md``, ``context.json`` or
    ``transcript.html``) of ``session`` to ``out``, one turn's content in memory at a
    time (module docstring). ``turns``: the session's, built with ``hold=False``
    already (the renderings of one file share them: building reads the path twice)."""
    if turns is None:
        turns = Turns(session, hold=False)
    if what == "context.json":
        context: dict[str, Any] = {"messages": [], "model": turns.model()}  # its keys, in order
        write_context_json(context, turns.context_messages, out)
        return
    pieces: Iterator[bytes]
    if what == "transcript.md":
        pieces = render.transcript_md_sections(
            session.title() or None,
            ((turn.message, turn.entry_name, turn.time) for turn in turns.transcript_messages()),
        )
    elif what == "transcript.html":
        shown = _ShownTurns(turns)
        pieces = render_html.transcript_html_pieces(session, images=images, turns=shown)
    else:
        raise KeyError(what)
    for piece in pieces:
        out.write(piece)


class _ShownTurns:
    """The transcript's messages, each turn's content read from its lines when reached
    (`render_html.CountedTurns`: counted from the turns' positions)."""

    def __init__(self, turns: Turns) -> None:
        self._turns = turns

    def __len__(self) -> int:
        return self._turns.transcript_length()

    def __iter__(self) -> Iterator[TranscriptMessage]:
        return self._turns.transcript_messages()
