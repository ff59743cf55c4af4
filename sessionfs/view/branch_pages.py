"""Which branch pages a session dir has: ``branches/<tip>.html``.

``transcript.html`` is the conversation at the session's leaf. Every other branch gets
a page of its own in ``branches/``: one per *tip* (an entry no other entry continues)
that has a parent, named like its ``entries/`` file with ``.html`` for ``.json``, and
holding the transcript as it would be with the leaf at that tip. A branch point on a
page links each branch it does not follow to the page of that branch's newest tip
(from the branch's first entry, the newest child at every fork): a relative link
inside the mount, so the pages work from ``file://``, a copy of the session dir, or
any static file server, with no query strings and nothing to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Final

from core.formats.base import SessionSource

__all__ = [
    "BRANCHES_DIR",
    "PAGE_SUFFIX",
    "branch_tip",
    "entry_of_page",
    "is_branch_page",
    "page_name",
    "tip_indexes",
]

BRANCHES_DIR: Final = "branches"
PAGE_SUFFIX: Final = ".html"
_ENTRY_SUFFIX: Final = ".json"


def page_name(entry_file: str) -> str:
    """The page of the tip whose ``entries/`` file is ``entry_file``."""
    return entry_file.removesuffix(_ENTRY_SUFFIX) + PAGE_SUFFIX


def entry_of_page(page: str) -> str | None:
    """The ``entries/`` file name a page name stands for (``None``: not a page name)."""
    if not page.endswith(PAGE_SUFFIX) or len(page) == len(PAGE_SUFFIX):
        return None
    return page.removesuffix(PAGE_SUFFIX) + _ENTRY_SUFFIX


def is_branch_page(rendering: str) -> bool:
    """Whether a rendering's name (`sessionfs.view.renderings`) is a branch page's."""
    return rendering.startswith(BRANCHES_DIR + "/")


def tip_indexes(source: SessionSource) -> list[int]:
    """The entries that end a branch, in file order: no children, and a parent (a lone
    root -- a metadata line, a single message -- is no branch)."""
    forest = source.forest()
    # (an empty family starts where the next does, as `Forest.tip_count` reads it: no
    # list of each entry's children made to see it is empty)
    return [
        index
        for index, (begin, end) in enumerate(pairwise(forest.children.starts))
        if begin == end and forest.parent(index) is not None
    ]


def branch_tip(children: Sequence[Sequence[int]], start: int) -> int:
    """The newest tip below ``start``: the newest (last) child at every fork."""
    current = start
    while children[current]:
        current = children[current][-1]
    return current
