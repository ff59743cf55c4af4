"""Which files under a sessions root are indexed: `session_file_keys`, and a single
session's sub-agent files: `subagent_file_keys`; `FileKeys`: keys with the stores that
could not be listed now."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

# Sub-agent session files live in a session's artifacts dir, which may hold its own
# sub-agents' dirs; deeper than this is not a real layout.
_MAX_NESTING = 8


class FileKeys(Iterator[tuple[str, ...]]):
    """Keys a format's ``file_keys`` found, and ``unlisted``: the stores whose keys it
    could not list now (a database locked past its busy timeout, corrupt), each as its
    path below the root -> why. The index keeps what it holds of an unlisted store's
    sessions, leaves them out of that pass, and tries the store again at the next."""

    def __init__(self, keys: Iterable[tuple[str, ...]], unlisted: dict[str, str]) -> None:
        self._keys = iter(keys)
        self.unlisted = unlisted

    def __next__(self) -> tuple[str, ...]:
        return next(self._keys)


def unlisted_stores(keys: Iterator[tuple[str, ...]]) -> dict[str, str]:
    """``keys``' unlisted stores (`FileKeys`; a plain iterator lists every key)."""
    return keys.unlisted if isinstance(keys, FileKeys) else {}


def _scan_sessions(
    directory: str, prefix: tuple[str, ...], depth: int
) -> Iterator[tuple[str, ...]]:
    """Keys (path parts below the root) of ``*.jsonl`` files in ``directory`` and in the
    artifacts dirs (``<stem>/`` next to ``<stem>.jsonl``) found there."""
    try:
        with os.scandir(directory) as scan:
            children = list(scan)
    except OSError:
        return
    stems = set()
    for child in children:
        if child.name.endswith(".jsonl") and _is_file(child):
            stems.add(child.name[: -len(".jsonl")])
            yield (*prefix, child.name)
    if depth >= _MAX_NESTING:
        return
    for child in children:
        # Not following symlinked dirs: a link loop must not recurse for ever.
        if child.name in stems and _is_dir(child, follow=False):
            yield from _scan_sessions(child.path, (*prefix, child.name), depth + 1)


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str], *, follow: bool = True) -> bool:
    try:
        return entry.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def session_file_keys(root: str) -> Iterator[tuple[str, ...]]:
    """Every session file under a sessions root: ``<project>/<file>.jsonl`` and the
    sub-agent files in artifacts dirs, as path parts relative to ``root``."""
    try:
        with os.scandir(root) as scan:
            projects = [child for child in scan if _is_dir(child)]
    except OSError:
        return
    for project in projects:
        yield from _scan_sessions(project.path, (project.name,), 0)


def key_bytes(parts: Sequence[str]) -> bytes:
    return os.fsencode("/".join(parts))


def subagent_file_keys(root: str, project: str, stem: str) -> Iterator[tuple[str, ...]]:
    """The sub-agent session files in ``<project>/<stem>/`` (the artifacts dir of
    ``<project>/<stem>.jsonl``, and its sub-agents' own dirs), as path parts relative
    to ``root``; nothing when the session has no artifacts dir."""
    artifacts = os.path.join(root, project, stem)
    if os.path.islink(artifacts):
        return  # never followed, as in the full scan
    yield from _scan_sessions(artifacts, (project, stem), 1)
