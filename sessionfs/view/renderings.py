"""The files of a session dir rendered from its `SessionSource`: ``render_source``.

One function for every agent's session (xcsh -- held compact or parsed -- Claude
Code, Codex): the daemon (`sessionfs.view.loaded_session`) and the render workers
(`sessionfs.view.prerender`) both render through it, so a rendering is the same bytes
wherever it was made.
"""

from __future__ import annotations

from typing import Any

from core.formats.base import SessionSource
from sessionfs.view import render
from sessionfs.view.archived import archive_note

__all__ = ["RENDERINGS", "parses_entries", "render_source"]

#: The renderings a session dir shows, by file name.
RENDERINGS = ("header.json", "title", "context.json", "transcript.md", "tree.txt", "stats.json")
#: Renderings made from the header alone (nothing to parse in the compact form).
_HEADER_ONLY = frozenset({"header.json", "title"})


def parses_entries(what: str) -> bool:
    """Whether rendering ``what`` reads every entry (its memory grows with the file)."""
    return what not in _HEADER_ONLY


def render_source(source: SessionSource, what: str) -> bytes:
    """One rendering of a session dir (`RENDERINGS`) from any agent's source."""
    if what == "header.json":
        return render.pretty_json(_with_archive_note(source.header()))
    if what == "title":
        title = source.shown_title()
        return render.title_text({} if title is None else {"title": title})
    if what == "context.json":
        return render.context_json(source.context())
    if what == "transcript.md":
        turns = source.transcript_messages()
        return render.transcript_md(
            source.title() or None,
            [turn.message for turn in turns],
            [{"id": turn.entry_name, "timestamp": turn.time} for turn in turns],
        )
    if what == "tree.txt":
        return render.source_tree_text(source)
    if what == "stats.json":
        return render.pretty_json(source.stats())
    raise KeyError(what)


def _with_archive_note(header: dict[str, Any]) -> dict[str, Any]:
    """A session file only the archive holds says so (`archive_note`)."""
    note = archive_note(header.get("file"))
    return {**header, "archive": note} if note is not None else header
