"""What every agent's listing does with the names on disk: a dir's entries in name
order (none when it is missing, not a dir or unreadable), a session file's stem from
its name, and a sub-agent's small ``meta.json`` beside its file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Final

from core.jsonl import loads
from core.safe_open import PathArg, open_regular

__all__ = ["META_LIMIT", "meta_line", "named_stem", "read_meta", "sorted_entries"]

#: a sub-agent's meta.json is a few hundred bytes; more is not a meta file
META_LIMIT: Final = 64 * 1024


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


def read_meta(path: PathArg) -> dict[str, Any]:
    """A sub-agent's meta file, a JSON object (``{}``: none, unreadable, not an
    object, over `META_LIMIT`)."""
    try:
        with open_regular(path) as f:
            data = f.read(META_LIMIT + 1)
        meta = loads(data) if len(data) <= META_LIMIT else None
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def meta_line(path: PathArg) -> bytes:
    """A meta file's bytes as one line, as the archive keeps it (it holds complete
    lines only): a newline added when it ends without one; `OSError` for a file over
    `META_LIMIT` (no reader takes it either)."""
    with open_regular(path) as f:
        data = f.read(META_LIMIT + 1)
    if len(data) > META_LIMIT:
        raise OSError(f"{os.fspath(path)}: over {META_LIMIT} bytes: not a meta document")
    return data if data.endswith(b"\n") else data + b"\n"
