"""``sessionfs restore SESSION``: put a session file the archive holds back where its
agent reads it.

The archive's files of one machine are matched against ``SESSION`` (a session id, a file
stem, a unique prefix of one, or a path ending in one: a mount's session dir, the file's
old path); the matching session's newest generation is read by the reader rules
(`StoreMirror.fetch_file`: whole segments only, checked) and written to its old place
(the agent dir's ``sessions/<rel>``, ``<claude dir>/<rel>``, ``<codex dir>/<rel>``) with
the sub-agent files of the same session. A file is created private (``0600``, dirs
``0700``) through a temp file linked to its name, so an existing file is never
overwritten: it is left as it is and named.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from core.agent_homes import AgentHome

from .archive_sources import agent_dir_files, agent_files
from .client import StoreClient
from .layout import SESSIONS_TREE, StoreLayout, agent_tree, split_tree_key
from .mirror import StoreMirror, list_store
from .private import make_private_dirs

__all__ = ["RestoreError", "Restored", "present_files", "restore_session", "tree_roots"]

_JSONL = ".jsonl"


class RestoreError(Exception):
    """No session, or more than one, matches; or the archive holds none of its bytes."""


@dataclass
class Restored:
    #: files written back
    written: list[Path]
    #: files of the session that exist already (left as they are)
    existing: list[Path]


def _stem_of(name: str) -> str:
    return Path(split_tree_key(name)[1]).name.removesuffix(_JSONL)


def _matches(stem: str, wanted: str) -> bool:
    """``wanted`` names the file ``stem``: its stem, the id it ends with (an xcsh
    ``<time>_<id>``, a Codex ``rollout-<time>-<id>``), or a prefix of either."""
    return stem.startswith(wanted) or any(
        tail.startswith(wanted) for tail in (stem.rpartition("_")[2], stem[-36:])
    )


def _inside_any(name: str, folders: set[str]) -> bool:
    """``name`` is in another file's dir (a sub-agent's file: ``<stem>/…``)."""
    parts = name.split("/")
    return any("/".join(parts[:n]) in folders for n in range(1, len(parts)))


def _session_files(names: list[str], wanted: str) -> list[str]:
    """The files of the one session ``wanted`` names: its file and the sub-agent files
    under its stem's dir (`RestoreError` when none or several sessions match)."""
    folders = {name.removesuffix(_JSONL) for name in names}
    tops = [
        name
        for name in names
        if not _inside_any(name, folders) and _matches(_stem_of(name), wanted)
    ]
    exact = [name for name in tops if _stem_of(name) == wanted]
    chosen = exact or tops
    if not chosen:
        raise RestoreError(f"no session in the archive matches {wanted!r}")
    if len(chosen) > 1:
        shown = ", ".join(sorted(_stem_of(name) for name in chosen)[:5])
        raise RestoreError(f"{wanted!r} matches {len(chosen)} sessions ({shown}): say more")
    (top,) = chosen
    folder = top.removesuffix(_JSONL) + "/"
    return [top, *sorted(name for name in names if name.startswith(folder))]


def restore_session(
    client: StoreClient,
    machine: str,
    wanted: str,
    roots: Mapping[str, Path],
    scratch: Path,
    present: Mapping[tuple[str, str], Path] | None = None,
) -> Restored:
    """Write the session ``wanted`` names back (module docstring). ``roots``: tree ->
    the directory its files go back to (``sessions`` -> the agent dir's ``sessions/``,
    ``agents/claude`` -> Claude Code's dir, …); ``scratch``: where the archived bytes
    are gathered first; ``present``: (tree, rel) -> where the agent has that file now
    (a Codex rollout moved to ``archived_sessions/`` is there, not deleted)."""
    wanted = Path(wanted.rstrip("/")).name.removesuffix(_JSONL)
    view = list_store(client, StoreLayout(client.url))
    files = view.machines.get(machine)
    if files is None:
        raise RestoreError(f"the archive holds no session of machine {machine!r}")
    known = [name for name in files.sessions if split_tree_key(name)[0] in roots]
    mirror = StoreMirror(client, scratch)
    done = Restored([], [])
    for name in _session_files(known, wanted):
        tree, rel = split_tree_key(name)
        target = roots[tree] / rel
        elsewhere = (present or {}).get((tree, rel))
        if elsewhere is not None or os.path.lexists(target):
            done.existing.append(elsewhere or target)
            continue
        fetched = mirror.fetch_file(machine, name, files.sessions[name])
        if fetched is not None:
            _create_from(fetched, target)
            done.written.append(target)
    if not done.written and not done.existing:
        raise RestoreError(f"the archive holds no whole line of {wanted!r}")
    return done


def _create_from(source: Path, target: Path) -> None:
    """A new private file at ``target`` with ``source``'s bytes; never over an existing
    one (a temp file linked to the name: ``FileExistsError`` if something is there)."""
    make_private_dirs(target.parent)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".restore", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as data:
            shutil.copyfileobj(data, out)
            out.flush()
            os.fsync(out.fileno())
        os.utime(temp, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns))
        os.link(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def tree_roots(agent_dir: Path, homes: Mapping[str, Path]) -> dict[str, Path]:
    """Where each tree's files go back: the agent dir's sessions and each agent's dir."""
    return {SESSIONS_TREE: agent_dir / "sessions"} | {
        agent_tree(agent): root for agent, root in homes.items()
    }


def present_files(agent_dir: Path, homes: Mapping[str, Path]) -> dict[tuple[str, str], Path]:
    """(tree, rel) -> path of every file the agents have now, as the archive names them
    (`sessionfs.store.archive_sources`)."""
    found = {(file.tree, file.rel): file.path for file in agent_dir_files(agent_dir)}
    for agent, root in homes.items():
        for file in agent_files(AgentHome(agent, root)) or ():
            found.setdefault((file.tree, file.rel), file.path)
    return found
