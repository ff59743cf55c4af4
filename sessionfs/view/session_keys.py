"""How a session is named, on disk and in the mount: the one place that knows.

A session is ``(project, stem)``. For a project's own session file the stem is the
file name without ``.jsonl``; for a sub-agent run of the task tool (spec 13: the
agents write it as ``<task-id>.jsonl`` into the parent's artifacts dir, the dir
named like the parent's file without ``.jsonl``) the stem is the relative path
``<stem>/<task-id>``, and a sub-agent's own sub-agents are ``<stem>/<task>/<sub>``.
So the file is always ``<sessions>/<project>/<stem>.jsonl`` and the artifacts dir
always ``<sessions>/<project>/<stem>/``.

In the mount each step down is a ``subagents/<name>`` pair:
``sessions/<project>/<stem>/subagents/<task>/subagents/<sub>/``.
"""

from __future__ import annotations

from pathlib import Path

from core import paths
from core.paths import child_stem

__all__ = [
    "AGENTS_DIR",
    "ARTIFACTS",
    "SUBAGENTS",
    "artifacts_dir",
    "child_stem",
    "is_valid_name",
    "is_valid_stem",
    "mount_parts",
    "session_file",
    "session_of_node_key",
    "stem_of_file",
]

#: The mount root's dir of the other agents' trees (``agents/<agent>/``).
AGENTS_DIR = "agents"
#: The session dir's child listing its sub-agent sessions.
SUBAGENTS = "subagents"
#: The session dir's child mirroring its artifacts dir.
ARTIFACTS = "artifacts"
#: Sub-agent levels the mount follows (the agents stop at 2 by default: core's bound).
MAX_STEM_PARTS = paths.MAX_SESSION_DEPTH


def is_valid_name(name: str) -> bool:
    """One path component the mount may map to disk (never ``.``/``..`` or a slash)."""
    return bool(name) and "/" not in name and "\x00" not in name and name not in (".", "..")


def is_valid_stem(stem: str) -> bool:
    parts = stem.split("/")
    return len(parts) <= MAX_STEM_PARTS and all(is_valid_name(p) for p in parts)


def session_file(sessions_root: Path, project: str, stem: str) -> Path:
    return sessions_root / project / f"{stem}.jsonl"


def artifacts_dir(sessions_root: Path, project: str, stem: str) -> Path:
    return sessions_root / project / stem


def stem_of_file(sessions_root: Path, file: str | Path) -> tuple[str, str] | None:
    """``(project, stem)`` of a session file under ``sessions_root``, else ``None``."""
    try:
        relative = Path(file).relative_to(sessions_root)
    except ValueError:
        return None
    parts = relative.parts
    if len(parts) < 2 or not parts[-1].endswith(".jsonl"):
        return None
    stem = "/".join((*parts[1:-1], parts[-1].removesuffix(".jsonl")))
    return (parts[0], stem) if is_valid_name(parts[0]) and is_valid_stem(stem) else None


def mount_parts(project: str, stem: str) -> tuple[str, ...]:
    """The session dir's path in the mount, from its root: ``sessions/<project>/<stem>``
    with a ``subagents/<name>`` pair per sub-agent level."""
    first, *rest = stem.split("/")
    parts = ["sessions", project, first]
    for name in rest:
        parts += [SUBAGENTS, name]
    return tuple(parts)


def session_of_node_key(key: tuple[str, ...]) -> tuple[str, str, int] | None:
    """For a node's path in the mount (``Node.key``): ``(project, stem, n)`` of the
    innermost session dir it is in, where ``key[:n]`` is that dir; ``None`` outside
    every session. ``subagents/<name>`` pairs go down a level; a key ending in
    ``subagents`` is that listing of the session above it."""
    if len(key) < 3 or key[0] != "sessions":
        return None
    stem = key[2]
    end = 3
    while end + 1 < len(key) and key[end] == SUBAGENTS:
        stem = child_stem(stem, key[end + 1])
        end += 2
    return key[1], stem, end
