"""``SessionRef``: one session file as a listing sees it (re-exported by
`sessionfs.view.agent_index`, which makes them; its own module so that the id map,
`sessionfs.view.session_ids`, can name it without importing the index)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.zstd_files import file_text_size
from sessionfs.view.access import FileAccess

__all__ = ["SessionRef"]


@dataclass(frozen=True)
class SessionRef:
    """A valid session file as a listing sees it (no full load). ``stem`` is a
    relative path for a sub-agent session (`sessionfs.view.session_keys`)."""

    project: str
    stem: str
    path: Path
    header: dict[str, Any]
    mtime_ns: int
    size: int
    #: the file's permission bits: the session dir shows no more than these allow
    mode: int = 0o644
    #: the file's owner and group: the session dir shows them as its own
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)

    @property
    def access(self) -> FileAccess:
        return FileAccess(self.mode, self.uid, self.gid)

    @property
    def session_id(self) -> str:
        return str(self.header.get("id", ""))

    @property
    def name(self) -> str:
        """Its dir's name in the mount: the file name without ``.jsonl``."""
        return self.stem.rsplit("/", 1)[-1]

    def text_size(self) -> int:
        """How big the file's text was when listed: its size, or a compressed one's
        text's (`core.zstd_files.file_text_size`): what reading or rendering it in
        memory would hold."""
        return file_text_size(self.path, self.size, self.mtime_ns)
