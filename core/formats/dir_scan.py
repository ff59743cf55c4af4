"""What every agent's listing does with the names on disk: a dir's entries in name
order (none when it is missing, not a dir or unreadable), and a session file's stem
from its name."""

from __future__ import annotations

import os
from collections.abc import Sequence

from core.safe_open import PathArg

__all__ = ["named_stem", "sorted_entries"]


def sorted_entries(directory: PathArg) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` by name (``[]``: missing, not a dir, unreadable)."""
    try:
        with os.scandir(directory) as found:
            return sorted(found, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def named_stem(name: str, prefix: str, suffixes: Sequence[str]) -> str | None:
    """``<prefix>…<suffix>`` -> ``<prefix>…`` for the first of ``suffixes`` it ends
    with (``None``: not such a name)."""
    if not name.startswith(prefix):
        return None
    for suffix in suffixes:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None
