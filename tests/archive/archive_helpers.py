"""Helpers of the archive tests: the sync command against a directory store, run as a
user would (a subprocess, the default archive under ``$XDG_DATA_HOME``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sessionfs.store.dir_client import DirStoreClient
from sessionfs.store.mirror import StoreMirror
from sessionfs.store.url import DirStoreURL

SYNC_TIMEOUT = 120


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment whose user dirs (data, state, Claude's, Codex's) are under ``home``."""
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        CODEX_HOME=str(home / ".codex"),
        PI_CODING_AGENT_DIR=str(home / "agent"),
    )
    env.update(extra)
    return env


def default_archive(home: Path) -> Path:
    return home / "data" / "sessionfs" / "archive"


def sync(home: Path, *args: str, timeout: float = SYNC_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``sessionfs sync --once --machine box ARGS`` for the user whose home is ``home``."""
    command = [sys.executable, "-m", "sessionfs", "sync", "--once", "--machine", "box", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=user_env(home)
    )


def mirror_of(archive: Path, cache: Path) -> StoreMirror:
    """The archive as the mount reads it, fetched once."""
    mirror = StoreMirror(DirStoreClient(DirStoreURL(archive)), cache)
    mirror.refresh()
    return mirror


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }
