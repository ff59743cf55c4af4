"""xcsh/pi session files as a `SessionSource`, read-only.

The session is held as its file's bytes plus a per-entry index --
`core.formats.xcsh_file.CompactSession` (about the file's size in memory; an entry is
parsed from its line when asked). This module reads that index through `XcshIndex`
and answers everything a session dir shows with core's own rules:
``build_session_context`` / ``context_sources`` for ``context.json`` and
``transcript.md``, ``core.tree`` for usage (and, through the index, labels),
``core.entry_text`` for ``tree.txt``'s words. The tree and ``stats.json``'s figures of
it come from `Forest` (`SessionSource.forest`, core.tree's rules over indexes), held
to core's tree of entries by tests/view/test_xcsh_stats.py. The renderings are
byte-for-byte those the mount made before (tests/core/formats/test_xcsh_session.py).

Names: an entry's name is its ``id`` ('' for an entry without one; an id may repeat --
the view's file names add ``~2``, ``~3``, as ``entries/`` always has); `index_of`
finds the last entry of an id, as ``by_id`` does everywhere.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, Protocol

from core.context import build_session_context, messages_with_sources
from core.entry_text import describe_entry, kind_of
from core.formats.base import SessionSource, TranscriptMessage
from core.formats.grown_bytes import GrownBytes
from core.formats.xcsh_file import CompactSession, FileLines, read_file
from core.persist import blob_refs_in
from core.safe_open import PathArg
from core.tree import add_usage, empty_usage, usage_totals

__all__ = ["XcshIndex", "XcshReads", "XcshSession", "by_id_of"]

Entry = dict[str, Any]


class XcshIndex(Protocol):
    """A session file's bytes and per-entry index (``CompactSession`` provides it)."""

    @property
    def data(self) -> bytes | GrownBytes | FileLines: ...
    @property
    def header(self) -> dict[str, Any]: ...
    #: per entry: its line's span in ``data``, its raw ``id`` and ``parentId``
    @property
    def starts(self) -> Sequence[int]: ...
    @property
    def ends(self) -> Sequence[int]: ...
    @property
    def ids(self) -> Sequence[Any]: ...
    @property
    def parents(self) -> Sequence[Any]: ...
    @property
    def timestamps(self) -> Sequence[Any]: ...
    @property
    def index_of_id(self) -> Mapping[str, int]: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def leaf_id(self) -> str | None: ...
    #: a catch-up skipped lines core's loader would read differently (a parse of the
    #: file is then the truth)
    @property
    def diverged(self) -> bool: ...

    def __len__(self) -> int: ...
    def entry(self, index: int) -> Entry: ...
    def time_ms(self, index: int) -> int | None: ...
    def times_ms(self) -> list[int | None]: ...
    def parse_entries(self) -> list[Entry]: ...
    def iter_entries(self) -> Iterator[Entry]: ...
    def path_indexes(self, leaf_id: str | None) -> list[int]: ...
    def catch_up(self, path: PathArg) -> int | None: ...
    def memory_cost(self) -> int: ...


def _type_and_role(entry: Mapping[str, Any]) -> tuple[str, str | None]:
    """What ``byType`` and ``byRole`` count for an xcsh entry (`XcshReads.entry_type`,
    `XcshReads.entry_role`; ``None``: no message); one call for both, as `stats`
    reads them of every entry."""
    kind = entry.get("type", "?")
    message = entry.get("message")
    if kind == "message" and isinstance(message, dict):
        return "message", str(message.get("role", "?"))
    return str(kind), None


def _compact_index(path: PathArg, whole_up_to: int | None = None) -> XcshIndex:
    return CompactSession.build(*read_file(path, whole_up_to), keep_entries=False)[0]


def by_id_of(entries: Sequence[Entry]) -> dict[str, Entry]:
    return {e["id"]: e for e in entries if isinstance(e.get("id"), str)}  # last one wins


class XcshReads(SessionSource):
    """What every xcsh source answers alike from its entries: the compact file
    (`XcshSession`) and the parsed manager (`core.formats.xcsh_parsed.ManagerSource`).
    A subclass says where entries, ids, parents, the leaf and the header come from."""

    agent = "xcsh"
    reports_malformed_lines = False

    @abstractmethod
    def _parsed(self) -> tuple[list[Entry], dict[str, Entry]]:
        """Every entry (parsed now, or as held) and the entries by id (last wins)."""

    @abstractmethod
    def _header(self) -> Mapping[str, Any]: ...

    @abstractmethod
    def _leaf_id(self) -> str | None: ...

    @abstractmethod
    def _id(self, index: int) -> object:
        """Entry ``index``'s raw ``id``."""

    @abstractmethod
    def _parent_id(self, index: int) -> object:
        """Entry ``index``'s raw ``parentId``."""

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        return dict(self._header())

    def title(self) -> str:
        title = self._header().get("title")
        return title if isinstance(title, str) else ""

    def shown_title(self) -> str | None:
        title = self._header().get("title")
        return title if isinstance(title, str) else None

    def context(self) -> dict[str, Any]:
        entries, by_id = self._parsed()
        return build_session_context(entries, self._leaf_id(), by_id)

    def transcript_messages(self) -> list[TranscriptMessage]:
        return self._transcript_at(self._leaf_id())

    def transcript_messages_at(self, leaf: int | None) -> list[TranscriptMessage]:
        leaf_id = None if leaf is None else self._id(leaf)
        return self._transcript_at(leaf_id if isinstance(leaf_id, str) else None)

    def _transcript_at(self, leaf_id: str | None) -> list[TranscriptMessage]:
        entries, by_id = self._parsed()
        messages, sources = messages_with_sources(entries, leaf_id, by_id)
        # str(): what the transcript always printed for an id or a time of another type
        return [
            TranscriptMessage(str(source.get("id", "?")), str(source.get("timestamp", "")), message)
            for message, source in zip(messages, sources, strict=True)
        ]

    def usage(self) -> dict[str, Any]:
        return usage_totals(self._parsed()[0])

    def stats(self) -> dict[str, Any]:
        """``stats.json``'s object (defined over the entries parsed by core's tree of
        entries and ``path_to_root``: tests/support/stats_reference.py, held equal in
        tests/view/test_xcsh_stats.py), the tree's figures from the `forest` (three
        arrays: `SessionSource._stats_with`) and the rest from one pass over the
        entries (`entry_views`: each parsed in turn and let go, unless `parsed_once`
        holds them), with no object per entry kept to the end: a 200,000-entry
        session's tree of entries, or of stand-ins for them, took ~130 MB more
        (issue 26 point 6)."""
        by_type: Counter[str] = Counter()
        by_role: Counter[str] = Counter()
        usage = self._usage_known()
        adding = empty_usage() if usage is None else None
        for entry in self.entry_views():
            kind, role = _type_and_role(entry)
            by_type[kind] += 1
            if role is not None:
                by_role[role] += 1
            if adding is not None:
                add_usage(adding, entry)
        total = usage if usage is not None else adding
        return self._stats_with(by_type, by_role, self._leaf_id(), total)

    def _usage_known(self) -> dict[str, Any] | None:
        """``usage`` when it is known without adding up the entries, a dict of the
        caller's own (``stats.json`` keeps it); ``None``: `stats` adds it up in its
        pass."""
        return None

    @property
    def malformed_lines(self) -> int:
        return 0  # not counted for xcsh sessions (``check`` reports them)

    # -- entries -------------------------------------------------------------------------

    def entry_name(self, index: int) -> str:
        entry_id = self._id(index)
        return entry_id if isinstance(entry_id, str) else ""

    def blob_shas(self) -> list[str]:
        found: dict[str, None] = {}
        with self.parsed_once():
            for index in range(len(self)):
                for sha in blob_refs_in(self.entry_view(index)):
                    found.setdefault(sha, None)
        return list(found)

    def entry_tree_name(self, index: int) -> str:
        return str(self._id(index))

    def entry_type(self, index: int) -> str:
        return _type_and_role(self.entry_view(index))[0]

    def entry_role(self, index: int) -> str | None:
        return _type_and_role(self.entry_view(index))[1]

    def entry_kind(self, index: int) -> str:
        return kind_of(self.entry_view(index))

    def entry_text(self, index: int) -> str:
        return describe_entry(self.entry_view(index))

    # -- the tree ------------------------------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        parent = self._parent_id(index)
        if not isinstance(parent, str) or parent == self._id(index):
            return None
        return self.index_of(parent)

    def leaf_index(self) -> int | None:
        leaf = self._leaf_id()
        return self.index_of(leaf) if isinstance(leaf, str) else None


class XcshSession(XcshReads):
    """One xcsh session file read-only. ``load`` builds its index from the file (again
    when a catch-up finds the file replaced or shrunk); by default the compact index
    of a file at the current format version (`NotCompact` for any other file: an
    older version is migrated by the manager, in memory, ids and all). ``index``: one
    just built from the file (the first load is then skipped). ``whole_up_to``: a
    bigger file is read where it is, a line at a time (`read_file`).

    Entries are parsed from their lines when asked; inside `parsed_once` every entry
    is parsed once and shared by the work there (the renderings of one access), then
    let go, so what stays held is about the file's size."""

    def __init__(
        self,
        path: PathArg,
        load: Callable[[], XcshIndex] | None = None,
        index: XcshIndex | None = None,
        whole_up_to: int | None = None,
    ) -> None:
        super().__init__()
        self.path = path
        self._load = load if load is not None else partial(_compact_index, path, whole_up_to)
        self.index = index if index is not None else self._load()
        #: inside `parsed_once`: every entry, and by id once asked
        self._scratch: list[Entry] | None = None
        self._scratch_by_id: dict[str, Entry] | None = None
        #: outside it, the entry `entry_view` parsed last, and its position: a
        #: rendering made entry by entry (``tree.txt`` asks an entry's kind, then its
        #: text) parses each once and holds one
        self._viewed: tuple[int, Entry] | None = None

    @contextmanager
    def parsed_once(self, entries: list[Entry] | None = None) -> Iterator[None]:
        """(`SessionSource.parsed_once`) ``entries``: the index's entries parsed
        already (by the build of a just-read file)."""
        if self._scratch is not None:
            yield
            return
        self._scratch = entries if entries is not None else self.index.parse_entries()
        try:
            yield
        finally:
            self._scratch = self._scratch_by_id = None

    def _parsed(self) -> tuple[list[Entry], dict[str, Entry]]:
        if self._scratch is not None:
            if self._scratch_by_id is None:
                self._scratch_by_id = by_id_of(self._scratch)
            return self._scratch, self._scratch_by_id
        entries = self.index.parse_entries()
        return entries, by_id_of(entries)

    def _header(self) -> Mapping[str, Any]:
        return self.index.header

    def _leaf_id(self) -> str | None:
        return self.index.leaf_id

    def _id(self, index: int) -> object:
        return self.index.ids[index]

    def _parent_id(self, index: int) -> object:
        return self.index.parents[index]

    def catch_up(self) -> bool:
        """(`SessionSource.catch_up`) `NotCompact` when the file was replaced by one
        that cannot be held so (an older format version, not a session)."""
        added = self.index.catch_up(self.path)
        if added is None:
            self.index = self._load()
        elif added == 0:
            return False
        self.reread = added is None
        self._viewed = None  # (a reread index may have another entry there)
        self._changed()
        return True

    def memory_cost(self) -> int:
        return self.index.memory_cost()

    def __len__(self) -> int:
        return len(self.index)

    def raw_line(self, index: int) -> bytes:
        return self.index.data[self.index.starts[index] : self.index.ends[index]]

    def entry(self, index: int) -> Entry:
        return self.index.entry(index)

    def entry_view(self, index: int) -> Entry:
        if self._scratch is not None:
            return self._scratch[index]
        viewed = self._viewed
        if viewed is not None and viewed[0] == index:
            return viewed[1]
        entry = self.index.entry(index)
        self._viewed = (index, entry)
        return entry

    def entry_views(self) -> Iterator[Entry]:
        return iter(self._scratch) if self._scratch is not None else self.index.iter_entries()

    def entry_time_ms(self, index: int) -> int | None:
        return self.index.time_ms(index)

    def entry_times_ms(self) -> list[int | None]:
        return self.index.times_ms()

    def index_of(self, name: str) -> int | None:
        return self.index.index_of_id.get(name)

    def labels(self) -> dict[str, str]:
        return dict(self.index.labels)

    def path_indexes(self) -> list[int]:
        return self.index.path_indexes(self.index.leaf_id)
