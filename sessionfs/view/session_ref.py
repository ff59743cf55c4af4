"""``SessionRef``: one session file as a listing sees it (re-exported by
`sessionfs.view.agent_index`, which makes them; its own module so that the id map,
`sessionfs.view.session_ids`, can name it without importing the index)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.zstd_files import ZSTD_SUFFIX, TextSize, file_text_info
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
    #: a ``.jsonl.zst``'s text size as the listing learnt it, in its thread (its header
    #: read there: the event loop asks `text_if_known`); None: not learnt
    text: TextSize | None = None

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
        return self.text_info().size

    def text_info(self) -> TextSize:
        """`text_size`, and whether it is said or guessed: `text` when the listing
        learnt it, else from the file's header (a thread's call, for a ``.zst``)."""
        known = self.text_if_known(self.size, self.mtime_ns)
        return known if known is not None else file_text_info(self.path, self.size, self.mtime_ns)

    def text_if_known(self, size: int, mtime_ns: int) -> TextSize | None:
        """The text size of the file when it is ``size`` bytes modified at
        ``mtime_ns``, without a look at it (the event loop asks): a plain file's own
        size; a ``.zst``'s as the listing learnt it for that state; else None."""
        if not self.path.name.endswith(ZSTD_SUFFIX):
            return TextSize(size, True)
        if self.text is not None and (size, mtime_ns) == (self.size, self.mtime_ns):
            return self.text
        return None
