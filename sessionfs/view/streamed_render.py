"""``transcript.md``, ``context.json`` and ``transcript.html`` of a session file too big
to hold parsed, written piece by piece: ``write_streamed``.

A rendering in memory parses every line of the file and keeps the dicts while it
renders: 3-6 times the file's size (a 430 MB session took a render worker to 1.4 GB).
Here the file is read where it is (`core.formats.xcsh_file.FileLines`, ``pread``), and:

1. the compact index is built (per entry its line's span, id, parentId, time), and
   from the same parse each entry is kept as a *stand-in*: its id, parentId, type and
   time, and of a message only the fields core's context rules read (``role``,
   ``provider``, ``model``) plus where its line is. Entries of other types
   (compactions, model changes, summaries: a few) are kept whole: core's rules read
   all of them;
2. the path from the root to the leaf is walked on that index;
3. core's own ``messages_with_sources`` / ``build_session_context`` run on the
   stand-ins, so which messages the rendering shows, in which order, and the context's
   state fields are core's answer, compactions and branches included;
4. each message is parsed from its line as it is written, and let go.

``transcript.html`` reads the session through `core.formats.xcsh.XcshSession` over the
same index (names, tree, labels, a branch link's one entry parsed from its line) and
its turns from step 3 (`PathTurns`), and is written a message at a time
(`render_html.transcript_html_pieces`); its images are capped per page as always.

What is held: the index (~360 bytes an entry), the stand-ins (a few hundred bytes each)
and one message (for the page, also its tree: a few hundred bytes an entry). The
bytes are exactly those of the rendering in memory
(`sessionfs.view.renderings.render_source`; the tests compare them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, BinaryIO, cast, overload

from core.context import context_with_sources, messages_with_sources
from core.formats.base import TranscriptMessage
from core.formats.xcsh import XcshSession
from core.formats.xcsh_file import CompactSession, NotCompact, read_file
from sessionfs.view import render, render_html
from sessionfs.view.html_images import ImageSource
from sessionfs.view.streamed_json import write_context_json

__all__ = [
    "STREAMED",
    "NotStreamable",
    "PathTurns",
    "StreamIndex",
    "open_index",
    "write_streamed",
]

#: The renderings made so.
STREAMED = frozenset({"transcript.md", "context.json", "transcript.html"})
#: The key of a stand-in entry that says where its line is (not a string: no JSON key
#: can be it).
_AT = object()
#: What core's context rules read of a message (`core.context._latest_assistant`,
#: ``_is_user_request``).
_MESSAGE_FIELDS = ("role", "provider", "model")
#: What they read of an entry whose message is a stand-in: its type, id, parentId and
#: timestamp (`StreamIndex._stand_in`).

#: an entry, or a stand-in (whose `_AT` key is not a string)
Entry = dict[Any, Any]


class NotStreamable(Exception):
    """The file cannot be read so (not at the current format version: its entries get
    ids only a migration in memory gives them; or not a session)."""


def write_streamed(
    session: StreamIndex, what: str, out: BinaryIO, images: ImageSource | None = None
) -> None:
    """Write rendering ``what`` (one of `STREAMED`) of a session indexed by
    `open_index` to ``out``, holding one message at a time (see the module docstring).
    ``images``: where ``transcript.html`` reads the blobs it inlines."""
    path_entries, by_id = session.path_stand_ins()
    leaf = session.leaf_id
    pieces: Iterator[bytes]
    if what == "context.json":
        # The context and the entry behind each message, from one walk: a stand-in
        # names the line its message is parsed from.
        context, sources = context_with_sources(path_entries, leaf, by_id)
        del path_entries, by_id
        messages = context["messages"]
        lines = [cast(Entry, source).get(_AT) for source in sources]
        del sources
        write_context_json(
            {**context, "messages": []},
            lambda: map(partial(_real, session), messages, lines),
            out,
            chunk=_chunk_for(session, lines),
        )
        return
    turns = PathTurns(session, *messages_with_sources(path_entries, leaf, by_id))
    del path_entries, by_id
    if what == "transcript.md":
        title = session.header.get("title")
        pieces = render.transcript_md_sections(
            title if isinstance(title, str) else None,
            ((turn.message, turn.entry_name, turn.time) for turn in turns),
        )
    elif what == "transcript.html":
        source = XcshSession(session.path, index=session)  # names, tree, labels: the index's
        pieces = render_html.transcript_html_pieces(source, images=images, turns=turns)
    else:
        raise KeyError(what)
    for piece in pieces:
        out.write(piece)


class PathTurns(Sequence[TranscriptMessage]):
    """The turns of the session at its leaf (`SessionSource.transcript_messages`'),
    each message parsed from its line when the turn is read (a stand-in's), so only
    the one being rendered is held."""

    def __init__(self, session: CompactSession, messages: list[Any], sources: list[Any]) -> None:
        self._session = session
        # str(): what the transcript always printed for an id or a time of another type
        self._turns = [
            (
                message,
                cast(Entry, source).get(_AT),
                str(source.get("id", "?")),
                str(source.get("timestamp", "")),
            )
            for message, source in zip(messages, sources, strict=True)
        ]

    def __len__(self) -> int:
        return len(self._turns)

    @overload
    def __getitem__(self, at: int) -> TranscriptMessage: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[TranscriptMessage]: ...
    def __getitem__(self, at: int | slice) -> TranscriptMessage | Sequence[TranscriptMessage]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self)))]
        message, line, entry_name, time = self._turns[at]
        return TranscriptMessage(entry_name, time, _real(self._session, message, line))

    def messages(self) -> Iterator[Any]:
        """Each turn's message, parsed as it is reached."""
        return (_real(self._session, message, line) for message, line, _, _ in self._turns)


def open_index(path: str | os.PathLike[str]) -> StreamIndex:
    """The compact index of the xcsh session file ``path``, its bytes left on disk,
    with every entry's stand-in (`NotStreamable` for a file that cannot be indexed so)."""
    data, st = read_file(path, whole_up_to=0)  # never read whole
    try:
        index = StreamIndex.build(data, st, keep_entries=False)[0]
    except NotCompact as exc:
        raise NotStreamable(str(exc)) from None
    assert isinstance(index, StreamIndex)  # (the classmethod builds its own class)
    index.path = os.fspath(path)
    return index


@dataclass(eq=False)
class StreamIndex(CompactSession):
    """The compact index, and each entry's stand-in (module docstring) made as the
    build parses its line (a second pass over the file for them took as long as the
    build). As small as they can be: their ids, parents and times are the index's own
    strings, and the stand-ins of messages with the same role, provider and model are
    one dict."""

    stand_ins: list[Entry] = field(default_factory=list)
    #: the file it was built from (`open_index`)
    path: str = ""
    _shared_messages: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    #: False once `drop_stand_ins` let them go (entries added since get none)
    _keeps_stand_ins: bool = True

    def _add(self, start: int, end: int, entry: dict[str, Any]) -> dict[str, Any]:
        position = len(self.ids)
        super()._add(start, end, entry)
        if self._keeps_stand_ins:
            self.stand_ins.append(self._stand_in(entry, position))
        return entry

    @classmethod
    def over(cls, held: CompactSession) -> StreamIndex:
        """The index ``held`` (its arrays shared, not copied: neither changes them) with
        each entry's stand-in, made parsing its line again: a session held compact
        renders without a second index of the file beside its own."""
        shared = {f.name: getattr(held, f.name) for f in fields(CompactSession) if f.init}
        index = cls(**shared)
        index.stand_ins = [index._stand_in(e, at) for at, e in enumerate(held.iter_entries())]
        return index

    def drop_stand_ins(self) -> None:
        """Let the stand-ins go (what is left is a `CompactSession`, which a session
        held after its rendering keeps): `path_stand_ins` is not asked again."""
        self.stand_ins = []
        self._shared_messages = {}
        self._keeps_stand_ins = False

    def path_stand_ins(self) -> tuple[list[Entry], dict[str, Entry]]:
        """The stand-ins from the root to the leaf, and them by id: all core's walk
        from the leaf reaches."""
        path = [self.stand_ins[i] for i in self.path_indexes(self.leaf_id)]
        return path, {e["id"]: e for e in path if isinstance(e.get("id"), str)}

    def _stand_in(self, entry: Entry, position: int) -> Entry:
        if entry.get("type") != "message":
            return entry  # state, compactions, summaries: read whole by core's rules
        # (Each key tested apart, not in a loop: this runs once an entry of the file.)
        stand_in: Entry = {"type": "message", _AT: position}
        if "id" in entry:
            stand_in["id"] = self.ids[position]
        if "parentId" in entry:
            stand_in["parentId"] = self.parents[position]
        if "timestamp" in entry:
            stand_in["timestamp"] = self.timestamps[position]
        if "message" in entry:
            stand_in["message"] = self._message(entry["message"])
        return stand_in

    def _message(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict):
            return None  # not a dict: shows nothing either way
        get = message.get
        fields = (get("role", _AT), get("provider", _AT), get("model", _AT))
        try:
            shared = self._shared_messages.get(fields)
        except TypeError:  # an unhashable role or model: its own
            return {key: message[key] for key in _MESSAGE_FIELDS if key in message}
        if shared is None:
            shared = {key: message[key] for key in _MESSAGE_FIELDS if key in message}
            self._shared_messages[fields] = shared
        return shared


#: Messages written at a time (`write_context_json`'s ``chunk``), at most ...
CHUNK_MESSAGES = 256
#: ... and as many as their lines together are at most this long (the longest line of
#: the path counted for each): what is held at a time stays small.
CHUNK_BYTES = 64 * 1024


def _chunk_for(session: CompactSession, lines: list[int | None]) -> int:
    """How many of the messages on ``lines`` `write_context_json` holds at a time."""
    starts, ends = session.starts, session.ends
    longest = max((ends[at] - starts[at] for at in lines if at is not None), default=1)
    return max(1, min(CHUNK_MESSAGES, CHUNK_BYTES // max(longest, 1)))


def _real(session: CompactSession, message: Mapping[str, Any], at: int | None) -> Any:
    """The message itself: parsed now from the line at ``at`` when ``message`` stands
    in for it, else the one core's rules made (a compaction's summary...)."""
    if at is None:
        return message
    return session.entry(at)["message"]
