"""Where Qwen Code keeps its sessions, how a listing finds them, and which reader
opens each file.

* directory: ``$QWEN_RUNTIME_DIR`` when set (Qwen's runtime output dir), else
  ``$QWEN_HOME``, else ``~/.qwen``;
* 0.24: ``projects/<enc>/chats/<sessionId>.jsonl`` (``<enc>``: the cwd with every
  character but ASCII letters and digits made ``-``), archived ones in
  ``chats/archive/``; a session's sub-agents in
  ``projects/<enc>/subagents/<sessionId>/agent-<id>.jsonl`` with ``agent-<id>.meta.json``
  (``agentType``, ``description``, ``toolUseId``): all read by
  `core.formats.qwen.QwenSession`;
* an older Qwen Code (a fork of Gemini CLI that kept its format) wrote
  ``tmp/<project hash>/chats/session-*`` ``.json`` documents or ``.jsonl`` records,
  read by the Gemini readers (`QwenLegacySession`, `QwenLegacyDocument`: model messages
  ``type: "qwen"``).

A listing reads at most the first KiB of each session file (its ``sessionId``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from core.formats.agent_format import ListedSession
from core.formats.base import SessionSource
from core.formats.dir_scan import read_meta, sorted_entries
from core.formats.gemini import GeminiDocumentSession, GeminiSession
from core.formats.gemini_dirs import is_document_chat, list_chats
from core.formats.prefix import read_prefix, string_field
from core.formats.qwen import QwenSession
from core.paths import child_stem, home_dir
from core.search_index.formats import dir_entries

__all__ = [
    "ARCHIVE_DIR",
    "CHATS_DIR",
    "LEGACY_DIR",
    "PROJECTS_DIR",
    "QWEN_HOME_ENV",
    "QWEN_RUNTIME_ENV",
    "SESSION_FILE",
    "SUBAGENTS_DIR",
    "SUB_AGENT_PREFIX",
    "QwenLegacyDocument",
    "QwenLegacySession",
    "is_older_chat",
    "list_sessions",
    "open_qwen_session",
    "qwen_dir",
    "sub_agent_files",
]

QWEN_HOME_ENV: Final = "QWEN_HOME"
QWEN_RUNTIME_ENV: Final = "QWEN_RUNTIME_DIR"
PROJECTS_DIR: Final = "projects"
LEGACY_DIR: Final = "tmp"
CHATS_DIR: Final = "chats"
ARCHIVE_DIR: Final = "archive"
#: Qwen's own pattern for a session file's name
SESSION_FILE: Final = re.compile(r"[0-9a-fA-F-]{32,36}\.jsonl")
SUBAGENTS_DIR: Final = "subagents"
SUB_AGENT_PREFIX: Final = "agent-"


def qwen_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where Qwen Code keeps its sessions (module docstring), existing or not."""
    environ = os.environ if env is None else env
    for variable in (QWEN_RUNTIME_ENV, QWEN_HOME_ENV):
        configured = environ.get(variable)
        if configured:
            return Path(os.path.abspath(os.path.expanduser(configured)))
    return home_dir(env) / ".qwen"


class QwenLegacySession(GeminiSession):
    """An older Qwen Code's ``tmp/<hash>/chats/session-*.jsonl`` (Gemini's records)."""

    agent = "qwen"


class QwenLegacyDocument(GeminiDocumentSession):
    """An older Qwen Code's ``tmp/<hash>/chats/session-*.json`` (Gemini's document)."""

    agent = "qwen"


def is_older_chat(path: str | bytes | os.PathLike[str]) -> bool:
    """Whether the session file ``path`` (or a search key, the path below Qwen's dir)
    is an older version's chat (``tmp/<hash>/chats/<file>``): by where it is alone,
    whatever its first line holds. The mount's readers and the search index both ask
    this, so a hit names an entry ``entries/`` shows."""
    return os.fsdecode(path).split("/")[-4:-3] == [LEGACY_DIR]


def open_qwen_session(path: Path) -> SessionSource:
    """A 0.24 session as `QwenSession` (a sub-agent's with its meta file); an older
    version's (``tmp/<hash>/chats/``) with the Gemini readers."""
    if is_older_chat(path):
        if is_document_chat(path.name):
            return QwenLegacyDocument(path)
        return QwenLegacySession(path)
    if path.parts[-3:-2] == (SUBAGENTS_DIR,):
        return QwenSession(path, meta=read_meta(path.with_name(path.stem + ".meta.json")))
    return QwenSession(path)


def _session_files(chats: Path) -> list[Path]:
    """The files of ``chats`` named as Qwen names sessions, in name order."""
    try:
        with os.scandir(chats) as found:
            names = [
                e.name
                for e in found
                if SESSION_FILE.fullmatch(e.name) and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return []
    return [chats / name for name in sorted(names)]


def sub_agent_files(project_dir: Path, session_id: str) -> list[Path]:
    """``subagents/<session id>/agent-*.jsonl``: the sub-agents' transcripts of one
    session (nested ones too: each names its parent agent in its meta file only)."""
    found = sorted_entries(project_dir / SUBAGENTS_DIR / session_id)
    return [
        Path(e.path)
        for e in found
        if e.name.startswith(SUB_AGENT_PREFIX)
        and e.name.endswith(".jsonl")
        and e.is_file(follow_symlinks=False)
    ]


def list_sessions(root: Path) -> Iterator[ListedSession]:
    """0.24's sessions (active, then archived) of every project, each followed by its
    sub-agents, then an older version's."""
    for project in dir_entries(str(root / PROJECTS_DIR)):
        chats = Path(project.path) / CHATS_DIR
        for path in _session_files(chats) + _session_files(chats / ARCHIVE_DIR):
            try:
                session_id = string_field(read_prefix(path), "sessionId")
            except OSError:
                continue
            stem = path.name.removesuffix(".jsonl")
            yield ListedSession(project.name, stem, path, {"id": session_id or stem})
            for sub in sub_agent_files(Path(project.path), stem):
                name = sub.name.removesuffix(".jsonl")
                yield ListedSession(project.name, child_stem(stem, name), sub, {"id": name})
    for project in dir_entries(str(root / LEGACY_DIR)):
        for chat in list_chats(Path(project.path) / CHATS_DIR):
            yield ListedSession(
                project.name, chat.stem, chat.path, {"id": chat.session_id or chat.stem}
            )
