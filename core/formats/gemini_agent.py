"""Gemini CLI's connector (`GEMINI_CLI`, registered in `core.formats.registry`).

* directory: ``$GEMINI_CLI_HOME/.gemini`` or ``~/.gemini`` (`core.formats.gemini_dirs`);
* sessions: ``tmp/<project>/chats/session-*.jsonl`` (or an older ``.json``) is a
  session of project ``<project>`` (the dir's name: the short name ``projects.json``
  gives the cwd, or an older version's hash); its sub-agents' chats
  ``chats/<session id>/<id>.jsonl`` are ``subagents/<id>/``;
* reader: `core.formats.gemini` (`open_gemini_session`);
* search: `core.formats.gemini_search.GEMINI_SEARCH` (records and older documents).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

from core.formats.agent_format import AgentFormat, ListedSession
from core.formats.gemini import open_gemini_session
from core.formats.gemini_dirs import GEMINI_HOME_ENV, gemini_dir, list_gemini_sessions
from core.formats.gemini_search import GEMINI_SEARCH

__all__ = ["GEMINI_CLI", "list_sessions"]


def list_sessions(root: Path) -> Iterator[ListedSession]:
    for project, stem, path, session_id in list_gemini_sessions(root):
        yield ListedSession(project, stem, path, {"id": session_id or stem.rpartition("/")[2]})


GEMINI_CLI: Final = AgentFormat(
    name="gemini",
    title="Gemini CLI",
    env_var=GEMINI_HOME_ENV,
    default_dir_text=f"${GEMINI_HOME_ENV}/.gemini, else ~/.gemini",
    default_dir=gemini_dir,
    list_sessions=list_sessions,
    open_session=open_gemini_session,
    search=GEMINI_SEARCH,
)
