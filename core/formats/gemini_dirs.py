"""Where Gemini CLI keeps its sessions and how a listing finds them.

``$GEMINI_CLI_HOME/.gemini`` (Gemini's home override) or ``~/.gemini``. Sessions are in
``tmp/<project>/chats/``: ``session-<time>-<id8>.jsonl`` (0.61), or an older
``session-<time>-<id8>.json`` document (Gemini converts one to ``.jsonl`` beside it when
it resumes it: then only the ``.jsonl`` is listed). ``<project>`` is the short name
``projects.json`` maps a cwd to (``{"projects": {cwd: name}}``), or an older version's
SHA-256 of the cwd; the project dir's ``.project_root`` holds the cwd. A sub-agent's
chat is ``chats/<parent session id>/<id>.jsonl``.

A listing reads at most the first KiB of each session file (its first record's
``sessionId``, `core.formats.prefix`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.formats.dir_scan import named_stem, sorted_entries
from core.formats.prefix import read_prefix, string_field
from core.paths import child_stem, home_dir
from core.safe_open import PathArg

__all__ = [
    "GEMINI_HOME_ENV",
    "GeminiChat",
    "gemini_dir",
    "is_document_chat",
    "list_chats",
    "list_gemini_sessions",
    "session_stem",
]

#: Gemini CLI's home override: its dir is ``$GEMINI_CLI_HOME/.gemini``
GEMINI_HOME_ENV: Final = "GEMINI_CLI_HOME"
GEMINI_DIR_NAME: Final = ".gemini"
TMP_DIR: Final = "tmp"
CHATS_DIR: Final = "chats"
SESSION_PREFIX: Final = "session-"
_SUFFIXES: Final = (".jsonl", ".json")
#: an older chat: one JSON document (pretty-printed by Gemini), not a record a line
DOCUMENT_SUFFIX: Final = ".json"


def is_document_chat(name: str | bytes) -> bool:
    """Whether the chat file ``name`` (or a path ending in it) is an older whole-file
    document rather than records: by its suffix alone, whatever its first line holds.
    The mount's readers and the search index both ask this, so a hit names an entry
    ``entries/`` shows."""
    return os.fsdecode(name).endswith(DOCUMENT_SUFFIX)


def gemini_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$GEMINI_CLI_HOME/.gemini`` when that is set, else ``~/.gemini`` (existing or
    not)."""
    environ = os.environ if env is None else env
    configured = environ.get(GEMINI_HOME_ENV)
    base = Path(os.path.abspath(os.path.expanduser(configured))) if configured else home_dir(env)
    return base / GEMINI_DIR_NAME


def session_stem(name: str) -> str | None:
    """``session-….jsonl`` / ``session-….json`` -> ``session-…`` (``None``: not a
    session file name)."""
    return named_stem(name, SESSION_PREFIX, _SUFFIXES)


@dataclass(frozen=True, slots=True)
class GeminiChat:
    """A session file as a listing sees it."""

    stem: str
    path: Path
    #: the ``sessionId`` of its first KiB (``None``: none there)
    session_id: str | None


def list_chats(chats_dir: PathArg) -> list[GeminiChat]:
    """The sessions of one ``chats/`` dir (a ``.json`` beside its ``.jsonl`` left out),
    in name order."""
    files = [e for e in sorted_entries(chats_dir) if e.is_file(follow_symlinks=False)]
    stems: dict[str, os.DirEntry[str]] = {}
    for entry in files:
        stem = session_stem(entry.name)
        if stem is not None and (stem not in stems or entry.name.endswith(".jsonl")):
            stems[stem] = entry
    found = []
    for stem, entry in sorted(stems.items()):
        try:
            session_id = string_field(read_prefix(entry.path), "sessionId")
        except OSError:
            continue
        found.append(GeminiChat(stem, Path(entry.path), session_id))
    return found


def sub_agent_chats(chats_dir: Path, session_id: str) -> list[Path]:
    """``chats/<session id>/*.jsonl``: the sub-agents' chats of one session (none for an
    id, read from the file, that is no plain file name)."""
    if not session_id or session_id in (".", "..") or "/" in session_id or "\x00" in session_id:
        return []
    return [
        Path(e.path)
        for e in sorted_entries(chats_dir / session_id)
        if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False)
    ]


def list_gemini_sessions(root: Path) -> Iterator[tuple[str, str, Path, str | None]]:
    """``(project, stem, path, session id)`` of every session under ``tmp/``, each
    followed by its sub-agents' chats (stem ``<session stem>/<chat stem>``)."""
    for project in sorted_entries(root / TMP_DIR):
        if not project.is_dir(follow_symlinks=False):
            continue
        chats_dir = Path(project.path) / CHATS_DIR
        for chat in list_chats(chats_dir):
            yield project.name, chat.stem, chat.path, chat.session_id
            for sub in sub_agent_chats(chats_dir, chat.session_id or ""):
                yield project.name, child_stem(chat.stem, sub.stem), sub, sub.stem
