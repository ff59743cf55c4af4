"""``SessionSource``: one read-side interface for "a session as the mount shows it".

Three agents write sessions in three formats: xcsh/pi (``core.formats.xcsh``), Claude
Code (``core.formats.claude``) and the OpenAI Codex CLI (``core.formats.codex``). The
mount renders every session dir (``entries/``, ``context.json``, ``transcript.md``,
``leaf``, ``path/``, ``tree.txt``, ``stats.json``, ``header.json``, ``title``) from
this interface alone, so a view never asks which agent wrote a file. Everything here
is read-only and pure core: no FUSE, no trio, no writes.

Entries are addressed by *index*: their position in file order (0-based), exactly the
order ``entries/`` lists them. Each has a *name* (`SessionSource.entry_name`), the raw
name of its ``entries/<name>.json`` before the view encodes it for the filesystem:

* xcsh: the entry's ``id``;
* Claude Code: the line's ``uuid``; a metadata line (no ``uuid``) is
  ``meta-<line number>-<type>`` (1-based line number in the file);
* Codex: ``NNNNNN-<kind>[-<payload type>]`` (``NNNNNN`` the 1-based line number,
  zero-padded to six digits).

Names of one session are unique (a Claude ``uuid`` seen twice is shown once, the first).

Transcript messages (`TranscriptMessage`) are in the xcsh ``AgentMessage`` shape, so
``sessionfs.view.render.transcript_md`` renders every agent alike:

* ``{"role": "user" | "assistant" | "developer" | "system", "content": str | [block]}``
  with blocks ``{"type": "text", "text"}``, ``{"type": "thinking", "thinking"}``
  (rendered quoted), ``{"type": "toolCall", "id", "name", "arguments"}``;
* ``{"role": "toolResult", "toolCallId", "toolName", "isError", "content": [block]}``;
* an image of a Claude/Codex session is never inlined: it arrives as the text block
  ``{"type": "text", "text": "[image <media_type>, N bytes]"}`` (`image_marker`; N =
  the decoded size of base64 data, or the length of a URL that is not base64), which
  the renderer prints as it is -- nothing new for it to understand.

Stats (`SessionSource.stats`) carry the keys of an xcsh ``stats.json``: ``entries``,
``byType``, ``byRole``, ``leafCount``, ``roots``, ``depth``, ``leafId`` (an entry
*name*), ``pathLength``, ``usage``; Claude and Codex add ``malformedLines`` (lines
skipped as not JSON objects).
"""

from __future__ import annotations

import base64
import binascii
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate, pairwise
from typing import Any, Final, TypeVar, overload

__all__ = [
    "AGENTS",
    "AgentName",
    "Forest",
    "SessionSource",
    "TranscriptMessage",
    "image_marker",
]

#: "xcsh", or the name of another agent's connector (`core.formats.registry`)
AgentName = str
#: the agents whose readers live in this package from the start (the registry lists
#: every other agent the mount shows)
AGENTS: Final[tuple[AgentName, ...]] = ("xcsh", "claude", "codex")

Entry = dict[str, Any]
_T = TypeVar("_T")


@dataclass(slots=True)
class TranscriptMessage:
    """One ``## <role> · <name> · <time>`` section of ``transcript.md``. Not frozen: a
    frozen dataclass sets each field through ``object.__setattr__`` (three times the
    cost of its making), and a transcript makes one per message (~4 % of rendering one)."""

    #: the raw entry name (see the module docstring) of the first line behind it
    entry_name: str
    #: that line's ISO timestamp as stored ('' when it has none)
    time: str
    #: the message in the xcsh ``AgentMessage`` shape (module docstring)
    message: dict[str, Any]


def image_marker(media_type: object, data: object) -> dict[str, Any]:
    """The text block an image renders as in a transcript of another agent's session:
    ``[image <media_type>, N bytes]`` (N: decoded bytes of base64 ``data``; a ``data:``
    URL counts its payload; anything else counts its characters)."""
    mime = media_type if isinstance(media_type, str) and media_type else "image"
    size = 0
    if isinstance(data, str):
        payload = data
        if data.startswith("data:"):
            head, _, payload = data.partition(",")
            if mime == "image":
                mime = head[5:].split(";", 1)[0] or "image"
            if ";base64" not in head:
                return {"type": "text", "text": f"[image {mime}, {len(payload)} bytes]"}
        size = _base64_size(payload)
    return {"type": "text", "text": f"[image {mime}, {size} bytes]"}


def _base64_size(text: str) -> int:
    """Decoded size of base64 ``text`` without decoding it (its length when it is not
    base64)."""
    stripped = text.strip()
    if not stripped or len(stripped) % 4:
        return len(text)
    try:
        base64.b64decode(stripped[-8:], validate=True)
    except (binascii.Error, ValueError):
        return len(text)
    return len(stripped) // 4 * 3 - len(stripped) + len(stripped.rstrip("="))


#: `Forest.parent_of` of a root
_ROOT: Final = -1


class _ByIndex(Sequence[_T]):
    """A sequence of ``count`` values computed when read (``value(index)``): what
    `Forest` reads of each entry, without a list of them all."""

    def __init__(self, count: int, value: Callable[[int], _T]) -> None:
        self._count = count
        self._value = value

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> _T: ...
    @overload
    def __getitem__(self, index: slice) -> list[_T]: ...
    def __getitem__(self, index: int | slice) -> _T | list[_T]:
        if isinstance(index, slice):
            return [self._value(at) for at in range(self._count)[index]]
        if index < 0:  # from the end, as any sequence
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        return self._value(index)

    def __iter__(self) -> Iterator[_T]:
        return map(self._value, range(self._count))


class Forest:
    """The tree of a session's entries from their tree parents (index or ``None``):
    children oldest first (stable by file order on equal or missing times), roots in
    file order, a parent cycle cut at its first entry in file order (which becomes a
    root), so every entry appears exactly once -- the rules of ``core.tree.build_tree``
    over indexes.

    Held as three arrays of ints (`Children`, `parent_of`): 24 bytes an entry, where a
    list of children and int objects per entry cost ~130 (a Codex rollout of 350,000
    lines, issue 26 point 6); its making holds no object per entry either."""

    def __init__(self, parents: Sequence[int | None], times: Sequence[int | None]) -> None:
        """``parents``: each entry's tree parent (read once, in order); ``times``: each
        entry's time in ms, read only for entries that have siblings (both may be
        computed on access: `SessionSource.forest` passes `_ByIndex`)."""
        count = len(parents)
        parent_of = array("q", [_ROOT]) * count
        roots: list[int] = []
        for index, parent in enumerate(parents):
            if parent is None or parent == index or not 0 <= parent < count:
                roots.append(index)
            else:
                parent_of[index] = parent
        children = Children.of(parent_of)
        reached = bytearray(count)
        if self._reach(roots, children, parent_of, reached, cut=False) < count:
            for index in range(count):
                if reached[index]:
                    continue
                parent_of[index] = _ROOT  # a cycle: cut here, a root
                roots.append(index)
                self._reach([index], children, parent_of, reached, cut=True)
            children = Children.of(parent_of)  # without the links cut
        children.sort_families(times)
        self.children = children
        self.roots = roots
        #: each entry's parent, -1 (`_ROOT`) for a root (`parent` reads it as ``None``)
        self.parent_of = parent_of

    @staticmethod
    def _reach(
        tops: list[int], children: Children, parent_of: array[int], reached: bytearray, cut: bool
    ) -> int:
        """Mark what ``tops`` reach down links not ``cut`` (any was: each is checked);
        how many were marked."""
        marked = 0
        stack = list(tops)
        starts, kids = children.starts, children.kids
        while stack:
            index = stack.pop()
            if reached[index]:
                continue
            reached[index] = 1
            marked += 1
            family = kids[starts[index] : starts[index + 1]]
            if cut:
                stack.extend(kid for kid in family if parent_of[kid] == index)
            else:
                stack.extend(family)
        return marked

    def depth(self) -> int:
        """Entries on the longest root -> tip path (0 when empty)."""
        deepest = 0
        stack = [(root, 1) for root in self.roots]
        starts, kids = self.children.starts, self.children.kids
        while stack:
            index, depth = stack.pop()
            deepest = max(deepest, depth)
            begin, end = starts[index], starts[index + 1]
            if end - begin == 1:  # a chain: most entries
                stack.append((kids[begin], depth + 1))
            elif end > begin:
                stack.extend((kid, depth + 1) for kid in kids[begin:end])
        return deepest

    def parent(self, index: int) -> int | None:
        """Entry ``index``'s parent (``None``: a root)."""
        parent = self.parent_of[index]
        return None if parent == _ROOT else parent

    def tip_count(self) -> int:
        """Entries without children (an empty family: it starts where the next does)."""
        starts = self.children.starts
        return sum(1 for begin, end in pairwise(starts) if begin == end)

    def path_to(self, index: int | None) -> list[int]:
        """Indexes from the root down to ``index`` (``[]`` for ``None``)."""
        path: list[int] = []
        if index is None:
            return path
        parent_of = self.parent_of
        current = index
        while current != _ROOT:
            path.append(current)
            current = parent_of[current]
        path.reverse()
        return path


class Children(Sequence[list[int]]):
    """Each entry's children (`Forest.children`): one array of them all, each
    family's in a row, and where each family starts (`of`)."""

    def __init__(self, starts: array[int], kids: array[int]) -> None:
        #: entry i's children: ``kids[starts[i]:starts[i + 1]]``
        self.starts = starts
        self.kids = kids

    @classmethod
    def of(cls, parent_of: array[int]) -> Children:
        """The children of ``parent_of``'s entries (-1: a root), in file order."""
        count = len(parent_of)
        sizes = array("q", [0]) * (count + 1)
        for parent in parent_of:
            sizes[parent + 1] += 1  # (a root's _ROOT counts at 0, set to 0 next)
        sizes[0] = 0
        starts = array("q", accumulate(sizes))
        # Each entry put at its family's next free place, in file order (a counting
        # sort: no list of every index, as a sort by parent would make).
        free = starts[:-1]
        kids = array("q", [0]) * starts[count]
        for index, parent in enumerate(parent_of):
            if parent != _ROOT:
                kids[free[parent]] = index
                free[parent] += 1
        return cls(starts, kids)

    def sort_families(self, times: Sequence[int | None]) -> None:
        """Each family oldest first (stable: file order on equal or missing times)."""
        starts, kids = self.starts, self.kids
        for start, end in pairwise(starts):
            if end - start > 1:
                family = kids[start:end].tolist()
                family.sort(key=lambda kid: _order(times[kid]))
                kids[start:end] = array("q", family)

    def __len__(self) -> int:
        return len(self.starts) - 1

    @overload
    def __getitem__(self, index: int) -> list[int]: ...
    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...
    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[at] for at in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.kids[self.starts[index] : self.starts[index + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        for index in range(len(self)):
            yield self[index]


def _order(time_ms: int | None) -> float:
    return float("-inf") if time_ms is None else float(time_ms)


class SessionSource(ABC):
    """A session as the mount shows it: read-only, whatever agent wrote it.

    Not thread-safe: one caller at a time (the view holds a lock around it). Every
    method answers from what was read at construction or at the last `catch_up`.
    Derived views (the forest, stats) are built on first use and dropped by
    `catch_up` when it finds a change.
    """

    #: "xcsh", or the registered name of another agent ("claude", "codex", …)
    agent: AgentName
    #: whether ``stats.json`` carries ``malformedLines`` (an xcsh session's stats keep
    #: exactly the keys they always had)
    reports_malformed_lines: bool = True

    def __init__(self) -> None:
        self._forest: Forest | None = None
        #: set by `catch_up` when it found a change: True when the file was read again
        #: whole (replaced, shrunk, rewritten in place) rather than lines appended -- a
        #: view then drops everything it derived, entries included
        self.reread = False

    @contextmanager
    def parsed_once(self) -> Iterator[None]:
        """Work done inside shares one parse of the entries (several renderings of
        one version). A source that holds its entries parsed anyway does nothing."""
        yield

    # -- the session as a whole -------------------------------------------------------

    @abstractmethod
    def header(self) -> dict[str, Any]:
        """``header.json``: xcsh -- the file's header line; Claude --
        ``{agent, id, cwd, version, gitBranch, timestamp, file}`` (plus a sub-agent's
        ``agentType``, ``description``, ``toolUseId`` from its ``meta.json``); Codex --
        ``{agent, id, cwd, cli_version, model_provider, git, forked_from_id, archived,
        timestamp, file}``. A new dict each call."""

    def shown_title(self) -> str | None:
        """The ``title`` file's text (``None``: the file is empty). xcsh shows a
        header's ``title`` of '' as an empty line, as it always has."""
        return self.title() or None

    @abstractmethod
    def title(self) -> str:
        """The session's title ('' when none): xcsh -- the header's ``title``; Claude --
        the last ``custom-title``, else the last ``ai-title``, else the newest
        ``summary``; Codex -- the newest ``thread_name_updated``, else the title the
        session index gave at construction."""

    @abstractmethod
    def context(self) -> dict[str, Any]:
        """``context.json``: xcsh -- core's ``build_session_context``; Claude/Codex --
        ``{"messages": [...], "model": str | None}`` (see each reader)."""

    @abstractmethod
    def transcript_messages(self) -> list[TranscriptMessage]:
        """The turns ``transcript.md`` shows, in order (module docstring)."""

    def transcript_messages_at(self, leaf: int | None) -> list[TranscriptMessage]:
        """The turns `transcript_messages` would show were the leaf at entry ``leaf``
        (``transcript.html``'s pages of other branches). By default those of the
        current turns whose first line is on the path to ``leaf``: right for a
        session whose tree is one chain (Codex); an agent with branches overrides it."""
        if leaf == self.leaf_index():
            return self.transcript_messages()
        on_path = {self.entry_name(index) for index in self.forest().path_to(leaf)}
        return [turn for turn in self.transcript_messages() if turn.entry_name in on_path]

    @abstractmethod
    def usage(self) -> dict[str, Any] | None:
        """``stats.json``'s ``usage``: xcsh -- core's ``usage_totals``; Claude --
        ``{input, output, cacheRead, cacheWrite}`` once per ``message.id``; Codex --
        ``{input, output, cacheRead}`` of the last ``token_count`` (``None``: none)."""

    @abstractmethod
    def catch_up(self) -> bool:
        """Read what the file gained since the last look. True when anything this
        shows may have changed: complete lines appended (a torn last line waits for its
        newline), or the file replaced or shrunk (then it is read again whole).
        ``OSError`` when the file is gone."""

    @abstractmethod
    def memory_cost(self) -> int:
        """Bytes this holds, for the session cache's budget."""

    @property
    @abstractmethod
    def malformed_lines(self) -> int:
        """Non-blank lines that were skipped because they are not JSON objects."""

    # -- entries ----------------------------------------------------------------------

    @abstractmethod
    def __len__(self) -> int:
        """Entries shown in ``entries/``."""

    @abstractmethod
    def entry_name(self, index: int) -> str:
        """The raw ``entries/`` name of entry ``index`` (module docstring)."""

    @abstractmethod
    def raw_line(self, index: int) -> bytes:
        """Entry ``index``'s line exactly as stored (no newline)."""

    @abstractmethod
    def entry(self, index: int) -> Entry:
        """Entry ``index`` parsed (a new dict each call: the caller may keep it)."""

    def entry_view(self, index: int) -> Entry:
        """Entry ``index`` parsed, possibly the very object the source holds (read it,
        never change or keep it): what a rendering reads, without a copy."""
        return self.entry(index)

    def entry_views(self) -> Iterator[Entry]:
        """`entry_view` of every entry in order, one at a time (a pass that reads each
        once and lets it go: an ``entries/`` listing)."""
        return (self.entry_view(index) for index in range(len(self)))

    def entry_times_ms(self) -> list[int | None]:
        """`entry_time_ms` of every entry, in order."""
        return [self.entry_time_ms(index) for index in range(len(self))]

    def leaf_known(self) -> bool:
        """Whether `leaf_name` answers without work that grows with the session (a
        view asks it on its event loop only then)."""
        return True

    @abstractmethod
    def entry_time_ms(self, index: int) -> int | None:
        """Entry ``index``'s ``timestamp`` in ms since the epoch (``None``: none)."""

    @abstractmethod
    def index_of(self, name: str) -> int | None:
        """The index of the entry named ``name`` (raw name), ``None`` when none is."""

    @abstractmethod
    def entry_type(self, index: int) -> str:
        """What ``stats.json``'s ``byType`` counts for this entry: xcsh -- ``type``;
        Claude -- ``type``; Codex -- ``<kind>-<payload type>`` (``<kind>`` when the
        payload has no type)."""

    @abstractmethod
    def entry_role(self, index: int) -> str | None:
        """The message role ``byRole`` counts (``None``: not a message)."""

    @abstractmethod
    def entry_text(self, index: int) -> str:
        """A short one-line description for ``tree.txt`` (its text, summary, setting);
        may be ''. The view trims it."""

    def entry_tree_name(self, index: int) -> str:
        """How ``tree.txt`` names entry ``index``: its raw name (xcsh: the ``id`` as
        stored, ``None`` for an entry without one, as that file always showed it)."""
        return self.entry_name(index)

    def entry_kind(self, index: int) -> str:
        """What ``tree.txt`` shows as the entry's kind: the role of a message, else
        its type."""
        return self.entry_role(index) or self.entry_type(index)

    def labels(self) -> dict[str, str]:
        """Entry name -> label (only xcsh sessions have labels)."""
        return {}

    def blob_shas(self) -> list[str]:
        """The blobs the entries refer to, first reference first (only xcsh sessions
        store images as blobs; the other agents' are inline data)."""
        return []

    # -- the tree ---------------------------------------------------------------------

    @abstractmethod
    def parent_index(self, index: int) -> int | None:
        """Entry ``index``'s parent in the tree ``path/`` and ``tree.txt`` show
        (``None``: a root). Claude follows ``parentUuid``, and ``logicalParentUuid``
        across a ``compact_boundary``; Codex: the previous line."""

    @abstractmethod
    def leaf_index(self) -> int | None:
        """The entry ``leaf`` points at (``None``: no leaf)."""

    def forest(self) -> Forest:
        """The whole tree (built once per version)."""
        if self._forest is None:
            count = len(self)
            # (read as the forest is made: no list of every entry's parent and time)
            self._forest = Forest(
                _ByIndex(count, self.parent_index), _ByIndex(count, self.entry_time_ms)
            )
        return self._forest

    def path_indexes(self) -> list[int]:
        """Root -> leaf, the entries ``path/`` shows (cycle-safe)."""
        return self.forest().path_to(self.leaf_index())

    def leaf_name(self) -> str | None:
        leaf = self.leaf_index()
        return None if leaf is None else self.entry_name(leaf)

    def stats(self) -> dict[str, Any]:
        """``stats.json`` (module docstring)."""
        by_type: dict[str, int] = {}
        by_role: dict[str, int] = {}
        for index in range(len(self)):
            kind = self.entry_type(index)
            by_type[kind] = by_type.get(kind, 0) + 1
            role = self.entry_role(index)
            if role is not None:
                by_role[role] = by_role.get(role, 0) + 1
        return self._stats_with(by_type, by_role, self.leaf_name(), self.usage())

    def _stats_with(
        self,
        by_type: Mapping[str, int],
        by_role: Mapping[str, int],
        leaf_name: str | None,
        usage: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """``stats.json`` of what the entries counted, the tree's figures from the
        `forest` (its arrays: nothing made per entry)."""
        forest = self.forest()
        return {
            "entries": len(self),
            "byType": dict(sorted(by_type.items())),
            "byRole": dict(sorted(by_role.items())),
            "leafCount": forest.tip_count(),
            "roots": len(forest.roots),
            "depth": forest.depth(),
            "leafId": leaf_name,
            "pathLength": len(self.path_indexes()),
            "usage": usage,
        } | ({"malformedLines": self.malformed_lines} if self.reports_malformed_lines else {})

    def _changed(self) -> None:
        """Drop what is derived from the entries (a subclass calls it on a change)."""
        self._forest = None
