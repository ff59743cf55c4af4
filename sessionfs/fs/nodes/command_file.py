"""The ``ctl`` files (root and per session): status on read, commands on write."""

from __future__ import annotations

from typing import Any

from sessionfs.fs.nodes.base import VOLATILE, FileNode, OpenFile, allow_truncate_to_zero
from sessionfs.fs.nodes.in_session import opened_for_writing
from sessionfs.fs.nodes.write_handles import LineBatchHandle

__all__ = ["CommandFile"]


class CommandFile(FileNode):
    """A ``ctl``: reading gives `content()`; every complete line written is handed to
    `_run` as it arrives (`LineBatchHandle`), a refusal going to `record_refusal`.
    ``echo cmd > ctl`` truncates first, so a truncate to zero is allowed (and ignored)."""

    __slots__ = ()

    tier = VOLATILE
    mode = 0o644

    async def open(self, flags: int) -> OpenFile:
        if not opened_for_writing(flags):
            return await super().open(flags)
        return LineBatchHandle(self._run, on_error=self.record_refusal)

    async def setattr(self, attr: Any, fields: Any) -> None:
        await allow_truncate_to_zero(self, attr, fields)

    async def _run(self, data: bytes) -> None:
        """Run the commands in ``data`` (complete lines)."""
        raise NotImplementedError
