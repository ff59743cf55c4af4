"""``GrownBytes``: a file's bytes as read, plus what was appended to it since.

A session held as its file's bytes takes in the lines another process (or the mount)
appends. ``data[:base] + new`` copies the whole held file for each of them: 49 MB for
a 200,000-entry session, per append (issue 26 point 6). This keeps the bytes first
read as they are and the appended ones in a ``bytearray`` that grows in place
(amortised: the cost of an append is what it appends), and reads like ``bytes`` where
the readers need it: ``len`` and slices, which are ``bytes``.
"""

from __future__ import annotations

__all__ = ["GrownBytes", "grow"]


class GrownBytes:
    """``head`` (the bytes first read, never copied) followed by ``tail`` (appended)."""

    __slots__ = ("head", "tail")

    def __init__(self, head: bytes) -> None:
        self.head = head
        self.tail = bytearray()

    def __len__(self) -> int:
        return len(self.head) + len(self.tail)

    def __getitem__(self, span: slice) -> bytes:
        start, stop, step = span.indices(len(self))
        assert step == 1, "only plain slices"
        split = len(self.head)
        if stop <= split:
            return self.head[start:stop]
        if start >= split:
            return bytes(self.tail[start - split : stop - split])
        return self.head[start:] + self.tail[: stop - split]

    def truncate(self, size: int) -> None:
        """Keep the first ``size`` bytes (a torn line read earlier is read again whole
        with what completed it)."""
        split = len(self.head)
        if size >= split:
            del self.tail[size - split :]
        else:  # rare: the first read ended in a torn line
            self.head = self.head[:size]
            self.tail = bytearray()

    def append(self, more: bytes) -> None:
        self.tail += more


def grow(data: bytes | GrownBytes, base: int, more: bytes) -> bytes | GrownBytes:
    """``data[:base] + more`` without copying ``data[:base]`` (``data`` itself when it
    is a `GrownBytes` already: it is the one that grows; ``more`` itself when nothing
    comes before it)."""
    if base == 0:
        return more
    grown = data if isinstance(data, GrownBytes) else GrownBytes(data)
    if len(grown) != base:
        grown.truncate(base)
    grown.append(more)
    return grown
