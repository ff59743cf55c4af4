"""Where the daemon keeps what it may rebuild at any time (``--cache-dir``): the search
index, render metadata. Deleting the cache dir loses nothing of the sessions; only what
the mount remembers of other agents' sessions (`sessionfs.view.agent_notes`: leaves
chosen, forks started) goes with it.

Each agent dir gets its own subdir, named by a hash of the agent dir's real path, so two
mounts of different agent dirs never share (or clobber) each other's caches, and the
same agent dir reached through a symlink finds the same one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import platformdirs

__all__ = ["agent_cache_dir", "default_cache_dir"]


def default_cache_dir() -> Path:
    """platformdirs' user cache dir + ``sessionfs`` (``~/.cache/sessionfs`` on Linux)."""
    return Path(platformdirs.user_cache_dir("sessionfs"))


def agent_cache_dir(cache_dir: Path, agent_dir: Path) -> Path:
    """The subdir of ``cache_dir`` that belongs to ``agent_dir`` (not created here)."""
    real = os.path.realpath(agent_dir)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:20]
    return cache_dir / f"agent-{digest}"
