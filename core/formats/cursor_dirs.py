"""Where Cursor's agent CLI keeps its sessions and how a listing finds them.

``~/.cursor`` (no variable moves it):

* ``chats/<md5 of the cwd>/<id>/store.db`` (+ ``meta.json`` naming the ``cwd`` in newer
  versions): a session of the project its cwd names (`core.paths.encode_cwd`), or,
  when no ``meta.json`` says, of the project named by the hash dir (``cursor-<md5>``);
* ``projects/<cwd with dashes>/agent-transcripts/<id>.jsonl`` (or ``<id>/<id>.jsonl``):
  a session of the project named like that dir; an id that also has a ``store.db`` is
  listed once, from the store.

A listing reads only the small ``meta.json`` files and directory entries: no store is
opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.formats.cursor import read_sidecar
from core.paths import encode_cwd, home_dir
from core.safe_open import PathArg

__all__ = ["CursorFile", "cursor_dir", "list_sessions"]

STORE_FILE: Final = "store.db"
TRANSCRIPTS_DIR: Final = "agent-transcripts"


def cursor_dir(env: Mapping[str, str] | None = None) -> Path:
    """``~/.cursor`` (existing or not)."""
    return home_dir(env) / ".cursor"


@dataclass(frozen=True, slots=True)
class CursorFile:
    id: str
    path: Path
    project: str
    #: True: a ``store.db``; False: an ``agent-transcripts`` JSONL file
    is_store: bool


def _subdirs(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as found:
            return sorted(
                (
                    e
                    for e in found
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                ),
                key=lambda e: e.name,
            )
    except OSError:
        return []


def _chats(root: Path) -> list[CursorFile]:
    found = []
    for bucket in _subdirs(root / "chats"):
        for chat in _subdirs(Path(bucket.path)):
            store = Path(chat.path) / STORE_FILE
            if not store.is_file() or store.is_symlink():
                continue
            cwd = read_sidecar(Path(chat.path) / "meta.json").get("cwd")
            project = encode_cwd(cwd) if isinstance(cwd, str) and cwd else f"cursor-{bucket.name}"
            found.append(CursorFile(chat.name, store, project, True))
    return found


def _transcripts(root: Path) -> list[CursorFile]:
    found = []
    for project in _subdirs(root / "projects"):
        directory = Path(project.path) / TRANSCRIPTS_DIR
        try:
            with os.scandir(directory) as entries:
                names = sorted(entries, key=lambda e: e.name)
        except OSError:
            continue
        for entry in names:
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                path = path / f"{entry.name}.jsonl"
                if not path.is_file() or path.is_symlink():
                    continue
            elif not (entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False)):
                continue
            found.append(CursorFile(path.stem, path, project.name, False))
    return found


def list_sessions(root: PathArg) -> list[CursorFile]:
    """Every chat store and agent transcript under ``root`` (module docstring)."""
    chats = _chats(Path(root))
    ids = {c.id for c in chats}
    return chats + [t for t in _transcripts(Path(root)) if t.id not in ids]
