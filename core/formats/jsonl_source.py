"""`JsonlSession`: a `SessionSource` read line by line from a JSONL file it never
writes (Claude Code and Codex sessions), shared by both readers.

It holds the file's bytes (`core.formats.lines.LineFile`) and one small record per
shown line (`LineRecord` or a reader's subclass: the line's name, span and time);
lines that are not JSON objects are counted, never shown. A catch-up reads only the
appended lines; a replaced or shrunk file is read again whole.

The leaf is the agent's own (`own_leaf_index`: where the agent would resume) unless a
reader of the file chose another entry (`choose_leaf`: the mount's ``ln -sfn``): then
``leaf``, ``path/``, the context and the transcript end there. The choice is held in
memory only; nothing is ever written to the file.
"""

from __future__ import annotations

import errno
from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from core.formats.base import SessionSource
from core.formats.lines import Line, LineFile
from core.jsonl import parse_object_line
from core.paths import iso_to_ms
from core.safe_open import PathArg

__all__ = ["JsonlSession", "LineRecord", "line_times"]


@dataclass(slots=True)
class LineRecord:
    """What the index keeps of one shown line."""

    name: str
    start: int
    end: int
    #: its ``timestamp`` as stored ('' when none), and in ms since the epoch
    timestamp: str
    time_ms: int | None


def line_times(obj: dict[str, Any]) -> tuple[str, int | None]:
    """A line's ``timestamp`` as stored ('' when not a string) and in ms."""
    timestamp = obj.get("timestamp")
    return (timestamp if isinstance(timestamp, str) else "", iso_to_ms(timestamp))


Record = TypeVar("Record", bound=LineRecord)


class JsonlSession(SessionSource, Generic[Record]):
    """The file-reading half of a reader; a subclass says what a line is
    (`_record`) and keeps what its renderings need (`_reset_state`)."""

    #: what the index costs per line besides its bytes (a slotted record, its
    #: strings, a dict row), for the cache's budget. Each reader sets its own, as
    #: measured by `bench/line_index_bytes.py` (tracemalloc over 100,000 lines shaped
    #: as its agent writes them: what the open and a look at the leaf hold, less the
    #: file's bytes held; 336 to 846 bytes a line) with ~10% more for longer ids and
    #: values; this default is for a reader not measured yet.
    LINE_INDEX_BYTES: ClassVar[int] = 640

    def __init__(self, path: PathArg) -> None:
        super().__init__()
        #: the name of the entry chosen as leaf (`choose_leaf`); None: the agent's own
        self._chosen: str | None = None
        self.path = Path(path)
        self._file = LineFile(path)
        self._reset()
        self._take(self._file.load())

    def _reset(self) -> None:
        self._lines: list[Record] = []
        self._index_of: dict[str, int] = {}
        self._malformed = 0
        self._one_copy: dict[str, str] = {}
        self._reset_state()
        self._changed()

    def _shared(self, value: str) -> str:
        """One object for equal values of the few a record keeps (a line type, a role):
        a parsed line's strings are new objects each, and a big file's records are
        most of what reading it holds."""
        return self._one_copy.setdefault(value, value)

    @abstractmethod
    def _reset_state(self) -> None:
        """Forget what the subclass gathered from lines (the file is read anew)."""

    @abstractmethod
    def _record(self, line: Line, obj: dict[str, Any]) -> Record | None:
        """The record of a line that is a JSON object (``None``: not shown)."""

    def _take(self, lines: Iterable[Line]) -> int:
        """Index ``lines``; how many there were (malformed ones count: stats show them)."""
        taken = 0
        for line in lines:
            taken += 1
            if line.obj is None:
                self._malformed += 1
                continue
            record = self._record(line, line.obj)
            if record is not None:
                self._index_of[record.name] = len(self._lines)
                self._lines.append(record)
        return taken

    def catch_up(self) -> bool:
        new = self._file.read_new()
        if new is None:
            self._reset()
            self._take(self._file.load())
            self.reread = True
            return True
        if not self._take(new):
            return False  # nothing new, or only a torn part
        self._changed()
        self.reread = False
        return True

    def memory_cost(self) -> int:
        return self._file.memory_cost() + len(self._lines) * self.LINE_INDEX_BYTES

    @property
    def malformed_lines(self) -> int:
        return self._malformed

    def __len__(self) -> int:
        return len(self._lines)

    def entry_name(self, index: int) -> str:
        return self._lines[index].name

    def raw_line(self, index: int) -> bytes:
        record = self._lines[index]
        return self._file.raw(record.start, record.end)

    def entry(self, index: int) -> dict[str, Any]:
        obj = parse_object_line(self.raw_line(index))
        if obj is None:  # it parsed to an object when indexed: the file changed since
            raise OSError(errno.ESTALE, f"line {index + 1} changed since it was read")
        return obj

    def entry_time_ms(self, index: int) -> int | None:
        return self._lines[index].time_ms

    def entry_timestamp(self, index: int) -> str:
        """Entry ``index``'s ``timestamp`` as stored ('' when none)."""
        return self._lines[index].timestamp

    def index_of(self, name: str) -> int | None:
        return self._index_of.get(name)

    # -- the leaf: the agent's own, or one chosen ------------------------------------------

    def own_leaf_index(self) -> int | None:
        """The entry the agent itself would continue from (``None``: none); a reader
        whose agent does not continue from its last line says which."""
        return len(self._lines) - 1 if self._lines else None

    def leaf_index(self) -> int | None:
        if self._chosen is not None:
            chosen = self._index_of.get(self._chosen)
            if chosen is not None:
                return chosen
        return self.own_leaf_index()

    def own_leaf_name(self) -> str | None:
        own = self.own_leaf_index()
        return None if own is None else self.entry_name(own)

    def chosen_leaf(self) -> str | None:
        """The name of the entry chosen as leaf, while it is one of the file's."""
        return self._chosen if self._chosen in self._index_of else None

    def can_be_leaf(self, index: int) -> bool:
        """Whether entry ``index`` may be chosen as the leaf (a reader may restrict it
        to entries its agent can continue from)."""
        return True

    def choose_leaf(self, name: str | None) -> None:
        """Show entry ``name`` as the leaf (``None``: the agent's own again). ``KeyError``
        when no entry has that name, ``ValueError`` when it cannot be a leaf."""
        if name is not None:
            index = self._index_of[name]
            if not self.can_be_leaf(index):
                raise ValueError(name)
        self._chosen = name
