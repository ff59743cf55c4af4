"""``transcript.md`` and ``context.json`` of a session file too big to hold parsed,
written piece by piece: ``write_streamed``.

A rendering in memory parses every line of the file and keeps the dicts while it
renders: 3-6 times the file's size (a 430 MB session took a render worker to 1.4 GB).
Here the file is read where it is (`core.formats.xcsh_file.FileLines`, ``pread``), and:

1. the compact index is built (per entry its line's span, id, parentId, time);
2. the path from the root to the leaf is walked on that index, and each entry on it is
   held as a *stand-in*: its id, parentId, type and time, and of a message only the
   fields core's context rules read (``role``, ``provider``, ``model``) plus where its
   line is. Entries of other types (compactions, model changes, summaries: a few) are
   held whole: core's rules read all of them;
3. core's own ``messages_with_sources`` / ``build_session_context`` run on the
   stand-ins, so which messages the rendering shows, in which order, and the context's
   state fields are core's answer, compactions and branches included;
4. each message is parsed from its line as it is written, and let go.

What is held: the index (~360 bytes an entry), the stand-ins of the path (a few hundred
bytes each) and one message. The bytes are exactly those of the rendering in memory
(`sessionfs.view.renderings.render_source`; the tests compare them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, BinaryIO

from core.context import build_session_context, messages_with_sources
from core.formats.xcsh_file import CompactSession, NotCompact, read_file
from sessionfs.view import render
from sessionfs.view.streamed_json import write_context_json

__all__ = ["STREAMED", "NotStreamable", "open_index", "write_streamed"]

#: The renderings made so.
STREAMED = frozenset({"transcript.md", "context.json"})
#: The key of a stand-in message that says where its entry's line is (not a string:
#: no JSON key can be it).
_AT = object()
#: What core's context rules read of a message (`core.context._latest_assistant`,
#: ``_is_user_request``).
_MESSAGE_FIELDS = ("role", "provider", "model")
#: What they read of an entry whose message is a stand-in.
_ENTRY_FIELDS = ("type", "id", "parentId", "timestamp")

Entry = dict[str, Any]


class NotStreamable(Exception):
    """The file cannot be read so (not at the current format version: its entries get
    ids only a migration in memory gives them; or not a session)."""


def write_streamed(session: CompactSession, what: str, out: BinaryIO) -> None:
    """Write rendering ``what`` (one of `STREAMED`) of a session indexed by
    `open_index` to ``out``, holding one message at a time (see the module docstring)."""
    path_entries, by_id = _stand_ins(session)
    leaf = session.leaf_id
    if what == "context.json":
        context = build_session_context(path_entries, leaf, by_id)
        messages = context["messages"]
        write_context_json(context, lambda: (_real(session, m) for m in messages), out)
        return
    if what != "transcript.md":
        raise KeyError(what)
    messages, sources = messages_with_sources(path_entries, leaf, by_id)
    title = session.header.get("title")
    turns = (
        (_real(session, message), str(source.get("id", "?")), str(source.get("timestamp", "")))
        for message, source in zip(messages, sources, strict=True)
    )
    for section in render.transcript_md_sections(title if isinstance(title, str) else None, turns):
        out.write(section)


def open_index(path: str | os.PathLike[str]) -> CompactSession:
    """The compact index of the xcsh session file ``path``, its bytes left on disk
    (`NotStreamable` for a file that cannot be indexed so)."""
    data, st = read_file(path, whole_up_to=0)  # never read whole
    try:
        return CompactSession.build(data, st, keep_entries=False)[0]
    except NotCompact as exc:
        raise NotStreamable(str(exc)) from None


def _stand_ins(session: CompactSession) -> tuple[list[Entry], dict[str, Entry]]:
    """The entries from the root to the leaf as stand-ins (module docstring), and them
    by id: all core's walk from the leaf reaches."""
    path: list[Entry] = []
    for position in session.path_indexes(session.leaf_id):
        path.append(_stand_in(session.entry(position), position))
    return path, {e["id"]: e for e in path if isinstance(e.get("id"), str)}


def _stand_in(entry: Entry, position: int) -> Entry:
    if entry.get("type") != "message":
        return entry  # state, compactions, summaries: read whole by core's rules
    stand_in = {key: entry[key] for key in _ENTRY_FIELDS if key in entry}
    if "message" in entry:
        message = entry["message"]
        if isinstance(message, dict):
            kept = {key: message[key] for key in _MESSAGE_FIELDS if key in message}
            stand_in["message"] = {_AT: position, **kept}
        else:
            stand_in["message"] = None  # not a dict: shows nothing either way
    return stand_in


def _real(session: CompactSession, message: Mapping[Any, Any]) -> Mapping[str, Any]:
    """The message itself, parsed now from its line when ``message`` stands in for it."""
    position = message.get(_AT)
    if position is None:
        return message  # made by core's rules (a compaction's summary, a custom message)
    real: Mapping[str, Any] = session.entry(position)["message"]
    return real
