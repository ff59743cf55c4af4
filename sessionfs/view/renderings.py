"""The files of a session dir rendered from its `SessionSource`: ``render_source``.

One function for every agent's session (xcsh -- held compact or parsed -- Claude
Code, Codex): the daemon (`sessionfs.view.loaded_session`) and the render workers
(`sessionfs.view.prerender`) both render through it, so a rendering is the same bytes
wherever it was made.
"""

from __future__ import annotations

from typing import Any

from core.formats.base import SessionSource
from sessionfs.view import render, render_html, render_svg
from sessionfs.view.agent_notes import SessionLinks
from sessionfs.view.archived import archive_note
from sessionfs.view.branch_pages import BRANCHES_DIR, entry_of_page, is_branch_page
from sessionfs.view.html_images import ImageSource

__all__ = ["RENDERINGS", "parses_entries", "render_source"]

#: The renderings a session dir shows, by file name.
RENDERINGS = (
    "header.json",
    "title",
    "context.json",
    "transcript.md",
    "transcript.html",
    "tree.txt",
    "tree.svg",
    "stats.json",
)
#: Renderings made from the header alone (nothing to parse in the compact form).
_HEADER_ONLY = frozenset({"header.json", "title"})


def parses_entries(what: str) -> bool:
    """Whether rendering ``what`` reads every entry (its memory grows with the file)."""
    return what not in _HEADER_ONLY


def render_source(
    source: SessionSource,
    what: str,
    images: ImageSource | None = None,
    links: SessionLinks | None = None,
    path: object = None,
) -> bytes:
    """One rendering of a session dir (`RENDERINGS`, or ``branches/<tip>.html``) from
    any agent's source. ``images``: where ``transcript.html`` reads blobs to inline;
    ``links``: the forks the mount started from or of it (`sessionfs.view.agent_notes`),
    which ``header.json`` (``parentSession``) and ``tree.txt`` show; ``path``: the file
    it was read from, when its header does not name it (``header.json``'s archive note)."""
    if what == "header.json":
        header = source.header()
        if links is not None and links.parent is not None:
            header["parentSession"] = links.parent.parent_file
        return render.pretty_json(_with_archive_note(header, path))
    if what == "title":
        title = source.shown_title()
        return render.title_text({} if title is None else {"title": title})
    if what == "context.json":
        return render.context_json(source.context())
    if what == "transcript.md":
        turns = source.transcript_messages()
        return render.transcript_md_of_turns(
            source.title() or None, ((turn.message, turn.entry_name, turn.time) for turn in turns)
        )
    if what == "transcript.html":
        return render_html.transcript_html(source, images=images)
    tip = _branch_page_tip(what)
    if tip is not None:
        return render_html.transcript_html(source, tip=tip, images=images)
    if what == "tree.txt":
        tree = render.source_tree_text(source)
        return tree + links.tree_lines().encode("utf-8") if links else tree
    if what == "tree.svg":
        return render_svg.tree_svg(source)
    if what == "stats.json":
        return render.pretty_json(source.stats())
    raise KeyError(what)


def _branch_page_tip(what: str) -> str | None:
    """The ``entries/`` file name of the tip ``branches/<tip>.html`` is the page of."""
    return entry_of_page(what.removeprefix(BRANCHES_DIR + "/")) if is_branch_page(what) else None


def _with_archive_note(header: dict[str, Any], path: object) -> dict[str, Any]:
    """A session file only the archive holds says so (`archive_note`)."""
    note = archive_note(header.get("file") or (str(path) if path is not None else None))
    return {**header, "archive": note} if note is not None else header
