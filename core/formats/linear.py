"""`Linear`: the tree of a session shown as one line of entries (each entry's parent the
one before, the leaf the last): Cursor chats and transcripts, opencode sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["Linear"]


class Linear:
    """Mix into a `SessionSource` (before it) whose entries form one line."""

    if TYPE_CHECKING:  # the session's own entry count (defining it here would shadow it)

        def __len__(self) -> int: ...

    def parent_index(self, index: int) -> int | None:
        return index - 1 if index > 0 else None

    def leaf_index(self) -> int | None:
        return len(self) - 1 if len(self) else None

    def path_indexes(self) -> list[int]:
        return list(range(len(self)))
