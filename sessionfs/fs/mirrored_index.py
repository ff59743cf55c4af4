"""A store machine's `AgentIndex`: session files and blobs the mirror evicted
(``--mirror-max-gb``) are fetched again when the mount asks for one by name, and every
lookup tells the mirror the file was read, so eviction takes the least recently read
first."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from sessionfs.store.layout import is_blob_name
from sessionfs.view import session_keys
from sessionfs.view.agent_index import NEEDS_IO, AgentIndex
from sessionfs.view.session_ref import SessionRef

__all__ = ["MirroredAgentIndex", "MirroredFiles"]


class MirroredFiles(Protocol):
    """What the index needs of the mirror (`sessionfs.store.refresher.StoreRefresher`)."""

    def is_evicted(self, machine: str, rel: str) -> bool: ...

    def note_read(self, machine: str, rel: str) -> None: ...

    def restore(self, machine: str, rel: str) -> bool: ...

    def want_blob(self, machine: str, sha: str) -> None: ...


class MirroredAgentIndex(AgentIndex):
    """The index of ``machines/<machine>/`` in the store mirror."""

    #: `session_path` is the mirror's file, from the names (as for `AgentIndex`)
    session_paths_fixed = True

    def __init__(self, agent_dir: Path, machine: str, files: MirroredFiles) -> None:
        super().__init__(agent_dir)
        self.machine, self.files = machine, files

    def session_if_known(
        self, project: str, stem: str, cached_only: bool = True
    ) -> SessionRef | object | None:
        if session_keys.is_valid_name(project) and session_keys.is_valid_stem(stem):
            path = session_keys.session_file(self.sessions_root, project, stem)
            rel = path.relative_to(self.sessions_root).as_posix()
            if self.files.is_evicted(self.machine, rel):
                if cached_only:
                    return NEEDS_IO  # the fetch runs in a worker thread (`session`)
                self.files.restore(self.machine, rel)
            self.files.note_read(self.machine, rel)
        return super().session_if_known(project, stem, cached_only)

    def blob_path(self, sha: str) -> Path | None:
        """Runs in a worker thread (``blobs/``'s lookup): an evicted blob is fetched here."""
        if is_blob_name(sha):
            self.files.want_blob(self.machine, sha)
        return super().blob_path(sha)
