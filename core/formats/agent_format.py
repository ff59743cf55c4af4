"""`AgentFormat`: everything the mount needs to know about one other agent, as one
record -- the connector an agent's module exports and `core.formats.registry` lists.

An agent's connector answers five questions:

* its name (``agents/<name>/``, ``--agents <name>``, ``--<name>-dir``);
* where the agent keeps its directory (`AgentFormat.default_dir`: its env var, else a
  dir in the home) -- the directory the mount shows when it exists;
* which session files that directory holds (`AgentFormat.list_sessions`: a
  `ListedSession` per file, a sub-agent's stem below its parent's);
* how one file reads as a `SessionSource` (`AgentFormat.open_session`), the same in
  the daemon and in the render workers (other processes);
* how the search index reads its files (`AgentFormat.search`, a
  `core.search_index.formats.FileFormat`);
* which files the archive keeps (`AgentFormat.archive_files`: an `ArchivedFile` per
  file, at the one path it keeps it under whatever the agent later does with it;
  ``None``: the agent is not archived yet).

Nothing here reads a file; the agents' modules do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from core.formats.base import SessionSource
from core.search_index.formats import FileFormat

__all__ = ["AgentFormat", "ArchivedFile", "ListedSession"]


@dataclass(frozen=True, slots=True)
class ListedSession:
    """One session file as a listing finds it. ``project`` names the dir it is shown
    in (``sessions/<project>/``); ``stem`` its dir there, ``<parent stem>/<name>`` for
    a sub-agent's (`core.paths.child_stem`); ``header`` what the listing read (its ``id``)."""

    project: str
    stem: str
    path: Path
    header: dict[str, object]


@dataclass(frozen=True, slots=True)
class ArchivedFile:
    """One file of an agent's directory the archive keeps (``sessionfs sync``)."""

    #: its path in the archive, below the agent's: where it is now, or where the agent
    #: first had it (a Codex rollout moved to ``archived_sessions/`` keeps its place)
    rel: str
    path: Path
    #: (inode, size, mtime_ns) when listed: the same again means unchanged
    identity: tuple[int, int, int]
    #: zstd-compressed on disk: archived decompressed
    compressed: bool = False
    #: the agent moves or compresses it: told by its bytes, not its inode
    moves: bool = False
    #: the bytes archived are made from ``path``, not read as they are: a Claude
    #: sub-agent's ``.meta.json`` as one line, Codex's state database's titles as
    #: JSON lines (`OSError` when they cannot be made now)
    made: Callable[[], bytes] | None = None


@dataclass(frozen=True)
class AgentFormat:
    """One other agent's connector (module docstring)."""

    #: ``agents/<name>/``, ``--agents <name>``, ``--<name>-dir``
    name: str
    #: the agent as people call it ("Claude Code"), for help texts
    title: str
    #: the variable that overrides where the agent keeps its directory
    env_var: str
    #: how ``--help`` says where the directory is by default
    default_dir_text: str
    #: the agent's directory by its own rule (existing or not), from an environment
    #: (``None``: the process's)
    default_dir: Callable[[Mapping[str, str] | None], Path]
    #: every session file below the agent's directory (sub-agents after their parent)
    list_sessions: Callable[[Path], Iterable[ListedSession]]
    #: one session file as its `SessionSource`
    open_session: Callable[[Path], SessionSource]
    #: what the search index reads of the agent's directory
    search: FileFormat
    #: the files of the agent's directory the archive keeps (None: not archived)
    archive_files: Callable[[Path], Iterable[ArchivedFile]] | None = None

    @property
    def dir_option(self) -> str:
        """The command-line option naming the agent's directory: ``--<name>-dir``."""
        return f"--{self.name}-dir"
