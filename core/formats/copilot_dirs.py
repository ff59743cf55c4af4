"""Where GitHub Copilot CLI keeps its sessions and how a listing finds them.

``$COPILOT_HOME`` or ``~/.copilot``: ``session-state/<uuid>/events.jsonl`` (with
``workspace.yaml`` beside it: ``id``, ``cwd``, ``name``), or an older version's bare
``session-state/<uuid>.jsonl``. A listing reads ``workspace.yaml`` (a few hundred bytes)
or, without one, the first KiB of the events file (``session.start`` names the cwd).

* project: the cwd encoded as the pi agent names project dirs (`core.paths.encode_cwd`);
  a session that names no cwd is in `NO_CWD_PROJECT`;
* session: the session's uuid (its directory's name, or the bare file's stem).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from core.formats.copilot import WORKSPACE_FILE, read_workspace
from core.formats.prefix import read_prefix, string_field
from core.paths import encode_cwd, env_dir_or_home
from core.safe_open import PathArg

__all__ = [
    "COPILOT_DIR_ENV",
    "EVENTS_FILE",
    "NO_CWD_PROJECT",
    "SESSION_STATE_DIR",
    "CopilotFile",
    "copilot_dir",
    "list_sessions",
]

COPILOT_DIR_ENV: Final = "COPILOT_HOME"
SESSION_STATE_DIR: Final = "session-state"
EVENTS_FILE: Final = "events.jsonl"
NO_CWD_PROJECT: Final = encode_cwd("/unknown-cwd")


def copilot_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$COPILOT_HOME`` when set, else ``~/.copilot`` (existing or not)."""
    return env_dir_or_home(COPILOT_DIR_ENV, ".copilot", env)


@dataclass(frozen=True, slots=True)
class CopilotFile:
    """One session's events file as a listing sees it."""

    id: str
    path: Path
    cwd: str | None
    project: str


def _session_file(path: Path, session_id: str, workspace: dict[str, str]) -> CopilotFile | None:
    cwd = workspace.get("cwd")
    if cwd is None:
        try:
            cwd = string_field(read_prefix(path), "cwd")
        except OSError:
            return None
    return CopilotFile(
        id=workspace.get("id") or session_id,
        path=path,
        cwd=cwd,
        project=encode_cwd(cwd) if cwd else NO_CWD_PROJECT,
    )


def list_sessions(root: PathArg) -> list[CopilotFile]:
    """Every session under ``<root>/session-state``, by id (directories first when an
    id has both)."""
    state = Path(root) / SESSION_STATE_DIR
    try:
        with os.scandir(state) as found:
            entries = sorted(found, key=lambda e: e.name)
    except OSError:
        return []
    sessions: dict[str, CopilotFile] = {}
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            events = Path(entry.path) / EVENTS_FILE
            if events.is_file() and not events.is_symlink():
                workspace = read_workspace(Path(entry.path) / WORKSPACE_FILE)
                listed = _session_file(events, entry.name, workspace)
                if listed is not None:
                    sessions[entry.name] = listed
        elif entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
            stem = entry.name[: -len(".jsonl")]
            if stem not in sessions:
                listed = _session_file(Path(entry.path), stem, {})
                if listed is not None:
                    sessions[stem] = listed
    return sorted(sessions.values(), key=lambda s: s.id)
