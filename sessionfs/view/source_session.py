"""Another agent's session (Claude Code, Codex) as the mount shows it: ``SourceSession``.

The same `LoadedSession` the session cache, the nodes and the renderers already work
with, held as a `core.formats.SessionSource` instead of compact bytes or a parsed
manager: its entries, names, tree, leaf and renderings all come from the source, so
every node of a session dir (``entries/``, ``path/``, ``leaf``, ``tree.txt``, ...)
serves these sessions unchanged. Nothing here writes: a write never reaches a session
of another agent (``ops`` answers ``EROFS`` first), and `hydrated` refuses if one did.

Freshness is the source's `catch_up` (new complete lines are read, a replaced or
shrunk file is read again); renderings are cached per version as for every session.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import SessionManager
from core.formats.base import SessionSource
from sessionfs.view import render
from sessionfs.view.loaded_session import EntryTable, LoadedSession, build_entry_table
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_ref import SessionRef

__all__ = ["READ_ONLY_REASON", "SourceOpener", "SourceSession", "render_source"]

#: Why every write under ``agents/`` is refused (the root ``ctl`` shows it).
READ_ONLY_REASON = "other agents' sessions are read-only: sessionfs never writes them"

#: Opens the session file a ref names as the source of its agent's format.
SourceOpener = Callable[[SessionRef], SessionSource]


@dataclass(eq=False)
class SourceSession(LoadedSession):
    """A `LoadedSession` held as a `SessionSource` (module docstring)."""

    opener: SourceOpener | None = None
    source: SessionSource | None = None

    # -- holding it ------------------------------------------------------------------

    @property
    def hydrated(self) -> SessionManager:
        raise WriteRejected(errno.EROFS, READ_ONLY_REASON)

    @property
    def is_loaded(self) -> bool:
        return self.source is not None

    def load(self, warm: str | None = None) -> None:
        if self.opener is None:
            raise RuntimeError(f"{self.ref.path}: no reader for this session")
        st = os.stat(self.ref.path)
        self._drop_entry_views()
        self.source = self.opener(self.ref)
        self._seen_now(st)
        if warm is not None:
            self.rendered(warm)

    def ensure_readable(self) -> None:
        if self.source is None:
            self.load()

    def ensure_loaded(self, read: tuple[bytes, os.stat_result] | None = None) -> None:
        raise WriteRejected(errno.EROFS, READ_ONLY_REASON)

    def dehydrate(self) -> None:
        self.source = None
        super().dehydrate()

    def _held(self) -> SessionSource:
        self.ensure_readable()
        assert self.source is not None
        return self.source

    def _catch_up(self) -> int:
        before = self.file_state
        state = self._saw(os.stat(self.ref.path))
        self.checked_at = time.monotonic()
        if state == before:
            return 0
        if self.source is None:
            changed = -1  # only renderings: simply stale now
        elif self.source.catch_up():
            replaced = state[0] != before[0] or state[1] < before[1]
            changed = -1 if replaced else 1
        else:
            changed = 0
        self.file_state = state
        if changed != 0:
            self._forget_renders()
        return changed

    # -- what the nodes read -----------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        source = self._held()
        return [source.entry(i) for i in range(len(source))]

    def entry(self, index: int) -> dict[str, Any]:
        return self._held().entry(index)

    def entry_count(self) -> int:
        return len(self._held())

    def header(self) -> dict[str, Any]:
        return self._held().header()

    def leaf_id(self) -> str | None:
        return self._held().leaf_name()

    def cached_leaf_name(self) -> str | object | None:
        if self._table is None or self.source is None:
            return super().cached_leaf_name()
        return self.name_for_id(self.source.leaf_name())

    def index_of_id(self, entry_id: str) -> int | None:
        return self._held().index_of(entry_id)

    def path_indexes(self) -> list[int]:
        return self._held().path_indexes()

    def labels(self) -> dict[str, str]:
        return {}

    def table(self) -> EntryTable:
        if self._table is None:
            source = self._held()
            self._table = build_entry_table([source.entry_name(i) for i in range(len(source))])
        return self._table

    def entry_mtime_ns(self, index: int) -> int:
        ms = self._held().entry_time_ms(index)
        return ms * 1_000_000 if ms is not None else self.mtime_ns

    def blob_shas(self) -> list[str]:
        return []  # images of other agents are inline data, never blobs

    def rendered(self, what: str) -> bytes:
        data = self._renders.get(what)
        if data is None:
            data = render_source(self._held(), what)
            self._renders[what] = data
            self._cached_bytes += len(data)
        return data

    def memory_cost(self) -> int:
        held = self.source.memory_cost() if self.source is not None else 0
        return held + self._cached_bytes


def render_source(source: SessionSource, what: str) -> bytes:
    """One rendering of a session dir (``header.json``, ``title``, ``context.json``,
    ``transcript.md``, ``tree.txt``, ``stats.json``) from any agent's source, in the
    same form as an xcsh session's."""
    if what == "header.json":
        return render.pretty_json(source.header())
    if what == "title":
        title = source.title()
        return render.title_text({"title": title} if title else {})  # none: an empty file
    if what == "context.json":
        return render.context_json(source.context())
    if what == "transcript.md":
        turns = source.transcript_messages()
        return render.transcript_md(
            source.title() or None,
            [turn.message for turn in turns],
            [{"id": turn.entry_name, "timestamp": turn.time} for turn in turns],
        )
    if what == "tree.txt":
        return render.source_tree_text(source)
    if what == "stats.json":
        return render.pretty_json(source.stats())
    raise KeyError(what)
