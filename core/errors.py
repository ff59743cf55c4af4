"""The errors of the session engine, below every module that raises them."""

from __future__ import annotations

__all__ = ["EntryNotFoundError", "GuestWriteWouldWait", "NotASessionError", "PersistenceError"]


class NotASessionError(Exception):
    """The file is missing or has no session header (browse loads, `fork_from`)."""


class PersistenceError(Exception):
    """Writing the session file failed; the cause is chained (`__cause__`)."""


class GuestWriteWouldWait(Exception):
    """A guest write told not to wait (`SessionManager.refusing_waits`) would have had
    to: another process holds the file open for writing, or omp's lock is taken, or
    the file changed since the last look (catching up reads what others wrote).
    Nothing was written; the caller may do the write again where waiting is fine."""


class EntryNotFoundError(KeyError):
    """An entry id that is not in the session ("Entry <id> not found")."""

    def __init__(self, entry_id: object) -> None:
        super().__init__(entry_id)
        self.entry_id = entry_id

    def __str__(self) -> str:
        return f"Entry {self.entry_id} not found"
