"""``transcript.md`` and ``context.json`` of a session file too big to hold parsed,
written piece by piece: ``write_streamed``.

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

What is held: the index (~360 bytes an entry), the stand-ins (a few hundred bytes each)
and one message. The bytes are exactly those of the rendering in memory
(`sessionfs.view.renderings.render_source`; the tests compare them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

from core.context import build_session_context, messages_with_sources
from core.formats.xcsh_file import CompactSession, NotCompact, read_file
from sessionfs.view import render
from sessionfs.view.streamed_json import write_context_json

__all__ = ["STREAMED", "NotStreamable", "StreamIndex", "open_index", "write_streamed"]

#: The renderings made so.
STREAMED = frozenset({"transcript.md", "context.json"})
#: The key of a stand-in entry that says where its line is (not a string: no JSON key
#: can be it).
_AT = object()
#: What core's context rules read of a message (`core.context._latest_assistant`,
#: ``_is_user_request``).
_MESSAGE_FIELDS = ("role", "provider", "model")
#: What they read of an entry whose message is a stand-in.
_ENTRY_FIELDS = ("type", "id", "parentId", "timestamp")

#: an entry, or a stand-in (whose `_AT` key is not a string)
Entry = dict[Any, Any]


class NotStreamable(Exception):
    """The file cannot be read so (not at the current format version: its entries get
    ids only a migration in memory gives them; or not a session)."""


def write_streamed(session: StreamIndex, what: str, out: BinaryIO) -> None:
    """Write rendering ``what`` (one of `STREAMED`) of a session indexed by
    `open_index` to ``out``, holding one message at a time (see the module docstring)."""
    path_entries, by_id = session.path_stand_ins()
    leaf = session.leaf_id
    # The messages and the entry behind each: a stand-in names the line to parse.
    messages, sources = messages_with_sources(path_entries, leaf, by_id)
    real = [(m, cast(Entry, source).get(_AT)) for m, source in zip(messages, sources, strict=True)]
    del messages
    if what == "context.json":
        context = build_session_context(path_entries, leaf, by_id)
        write_context_json(context, lambda: (_real(session, *m) for m in real), out)
        return
    if what != "transcript.md":
        raise KeyError(what)
    title = session.header.get("title")
    turns = (
        (_real(session, *m), str(source.get("id", "?")), str(source.get("timestamp", "")))
        for m, source in zip(real, sources, strict=True)
    )
    for section in render.transcript_md_sections(title if isinstance(title, str) else None, turns):
        out.write(section)


def open_index(path: str | os.PathLike[str]) -> StreamIndex:
    """The compact index of the xcsh session file ``path``, its bytes left on disk,
    with every entry's stand-in (`NotStreamable` for a file that cannot be indexed so)."""
    data, st = read_file(path, whole_up_to=0)  # never read whole
    try:
        index = StreamIndex.build(data, st, keep_entries=False)[0]
    except NotCompact as exc:
        raise NotStreamable(str(exc)) from None
    assert isinstance(index, StreamIndex)  # (the classmethod builds its own class)
    return index


@dataclass(eq=False)
class StreamIndex(CompactSession):
    """The compact index, and each entry's stand-in (module docstring) made as the
    build parses its line (a second pass over the file for them took as long as the
    build). As small as they can be: their ids, parents and times are the index's own
    strings, and the stand-ins of messages with the same role, provider and model are
    one dict."""

    stand_ins: list[Entry] = field(default_factory=list)
    _shared_messages: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)

    def _add(self, start: int, end: int, entry: dict[str, Any]) -> dict[str, Any]:
        position = len(self.ids)
        super()._add(start, end, entry)
        self.stand_ins.append(self._stand_in(entry, position))
        return entry

    def path_stand_ins(self) -> tuple[list[Entry], dict[str, Entry]]:
        """The stand-ins from the root to the leaf, and them by id: all core's walk
        from the leaf reaches."""
        path = [self.stand_ins[i] for i in self.path_indexes(self.leaf_id)]
        return path, {e["id"]: e for e in path if isinstance(e.get("id"), str)}

    def _stand_in(self, entry: Entry, position: int) -> Entry:
        if entry.get("type") != "message":
            return entry  # state, compactions, summaries: read whole by core's rules
        held = (self.ids[position], self.parents[position], self.timestamps[position])
        stand_in: Entry = {"type": "message", _AT: position}
        for key, value in zip(_ENTRY_FIELDS[1:], held, strict=True):
            if key in entry:
                stand_in[key] = value
        if "message" in entry:
            stand_in["message"] = self._message(entry["message"])
        return stand_in

    def _message(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict):
            return None  # not a dict: shows nothing either way
        kept = {key: message[key] for key in _MESSAGE_FIELDS if key in message}
        try:
            return self._shared_messages.setdefault(tuple(kept.items()), kept)
        except TypeError:  # an unhashable role or model: its own
            return kept


def _real(session: CompactSession, message: Mapping[str, Any], at: int | None) -> Any:
    """The message itself: parsed now from the line at ``at`` when ``message`` stands
    in for it, else the one core's rules made (a compaction's summary...)."""
    if at is None:
        return message
    return session.entry(at)["message"]
