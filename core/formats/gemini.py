"""Gemini CLI sessions (``~/.gemini/tmp/<project>/chats/session-*.jsonl``, older
``session-*.json``) as a `SessionSource`, read-only.

How the records read is `core.formats.gemini_messages`. What the mount shows:

* entries: one per record in file order, named ``NNNNNN-<kind>`` (``NNNNNN``: the
  record's line number; ``<kind>``: ``session``, ``user``, ``gemini``, ``info``, …,
  ``set``, ``rewind``, ``unknown``). An older whole-file ``.json`` document
  (`GeminiDocumentSession`) shows its metadata as ``000001-session`` and its messages as
  ``000002-<type>``, … each stored compactly (the document has no lines of its own);
* the tree: a record follows the one before it, except a ``$rewindTo`` record, which
  starts a branch beside the message it rewinds (from that message's parent): the
  rewound messages stay on the old branch; ``leaf`` is the last record;
* ``context.json``: ``{"messages": <contents>, "model"}`` -- the ``contents`` a resumed
  Gemini sends (`gemini_messages.client_history`), ``model`` the last ``gemini``
  message's;
* ``transcript.md``: the loader's messages (rewound ones left out), thoughts quoted,
  each tool call followed by its result;
* ``header.json``: ``{agent, id, projectHash, cwd, kind, startTime, lastUpdated,
  directories, file}``: the metadata records and ``$set`` patches folded in order, the
  cwd from the project dir's ``.project_root``; ``title``: the ``summary``;
* ``stats.json`` usage: every message id's last ``tokens`` summed (rewound ones were
  paid for too): ``{input, output, cacheRead}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

import orjson

from core.formats.base import SessionSource, TranscriptMessage
from core.formats.gemini_dirs import is_document_chat
from core.formats.gemini_messages import (
    DOCUMENT_LIMIT,
    KIND_HEADER,
    KIND_REWIND,
    KIND_SET,
    MODEL_TYPES,
    ROLES,
    client_history,
    message_text,
    record_kind,
    replay,
    tokens_of,
    transcript_turns,
)
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.lines import Line
from core.jsonl import exact_bytes, loads
from core.paths import iso_to_ms
from core.safe_open import PathArg, open_regular

__all__ = ["DOCUMENT_LIMIT", "GeminiDocumentSession", "GeminiSession", "open_gemini_session"]

PROJECT_ROOT_FILE: Final = ".project_root"
_USAGE_FIELDS: Final = (("input", "input"), ("output", "output"), ("cacheRead", "cached"))


@dataclass(slots=True)
class _GeminiLine(LineRecord):
    kind: str


class _RecordTree:
    """Each record's parent, as records arrive (module docstring): the record before,
    or beside the message a ``$rewindTo`` rewinds."""

    def __init__(self) -> None:
        self.parents: list[int | None] = []
        #: the messages the loader holds now: id -> the record that brought it first
        self._shown: dict[str, int] = {}
        #: records that brought a whole message list (a ``$set`` or a metadata record)
        self._lists: set[int] = set()

    def add(self, kind: str, obj: dict[str, Any]) -> None:
        index = len(self.parents)
        parent = index - 1 if index else None
        if kind == KIND_REWIND:
            parent = self._rewind(obj["$rewindTo"])
        elif kind in (KIND_SET, KIND_HEADER):
            listed = obj.get("$set", obj).get("messages")
            if isinstance(listed, list):
                if kind == KIND_SET:
                    self._shown.clear()
                self._lists.add(index)
                for message in listed:
                    if isinstance(message, dict) and isinstance(message.get("id"), str):
                        self._shown.setdefault(message["id"], index)
        elif isinstance(obj.get("id"), str):
            self._shown.setdefault(obj["id"], index)
        self.parents.append(parent)

    def _rewind(self, target: str) -> int | None:
        origin = self._shown.get(target)
        ids = list(self._shown)
        for dropped in ids[ids.index(target) :] if origin is not None else ids:
            del self._shown[dropped]
        if origin is None:
            return None  # the loader drops every message: a new start
        # a message that came in a list: the branch starts after that list
        return origin if origin in self._lists else self.parents[origin]


class _GeminiRecords(SessionSource):
    """What both readers show from their records (``_lines``: one `_GeminiLine` each)."""

    agent = "gemini"
    _lines: list[_GeminiLine]
    path: Path

    def _start(self) -> None:
        """Forget what was gathered from the records (the file is read anew)."""
        #: the project's ``.project_root`` (Gemini writes it once, with the project)
        self._project_root = project_root(self.path)
        self._tree = _RecordTree()
        self._meta: dict[str, Any] = {}
        self._model: str | None = None
        self._tokens: dict[str, dict[str, int]] = {}

    def _note(self, kind: str, obj: dict[str, Any]) -> None:
        """Keep what the tree, header, model and usage need of one record."""
        self._tree.add(kind, obj)
        if kind == KIND_HEADER:
            self._meta.update((k, v) for k, v in obj.items() if k != "messages")
        elif kind == KIND_SET:
            self._meta.update((k, v) for k, v in obj["$set"].items() if k != "messages")
        elif kind in MODEL_TYPES:
            model = obj.get("model")
            self._model = model if isinstance(model, str) and model else self._model
        if kind in (KIND_HEADER, KIND_SET):
            listed = obj.get("$set", obj).get("messages")
            for message in listed if isinstance(listed, list) else ():
                self._note_tokens(message)
        else:
            self._note_tokens(obj)

    def _note_tokens(self, message: Any) -> None:
        if isinstance(message, dict) and isinstance(message.get("id"), str):
            tokens = tokens_of(message)
            if tokens:
                self._tokens[message["id"]] = tokens

    def _new_line(
        self, number: int, kind: str, obj: dict[str, Any], span: tuple[int, int]
    ) -> _GeminiLine:
        timestamp, time_ms = line_times(obj)
        if kind == KIND_HEADER and not timestamp and isinstance(obj.get("startTime"), str):
            timestamp, time_ms = obj["startTime"], iso_to_ms(obj["startTime"])
        return _GeminiLine(f"{number:06d}-{kind}", span[0], span[1], timestamp, time_ms, kind)

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        meta = self._meta
        return {
            "agent": self.agent,
            "id": meta.get("sessionId") if isinstance(meta.get("sessionId"), str) else None,
            "projectHash": meta.get("projectHash"),
            "cwd": self._project_root,
            "kind": meta.get("kind"),
            "startTime": meta.get("startTime"),
            "lastUpdated": meta.get("lastUpdated"),
            "directories": meta.get("directories"),
            "file": os.fspath(self.path),
        }

    def title(self) -> str:
        summary = self._meta.get("summary")
        return summary if isinstance(summary, str) else ""

    def _replayed(self) -> list[tuple[int, dict[str, Any]]]:
        """(the record holding it, the message) of every message the loader ends with."""
        records = [(i, self.entry(i)) for i in range(len(self))]
        return replay(records)[0]

    def context(self) -> dict[str, Any]:
        messages = [message for _, message in self._replayed()]
        return {"messages": client_history(messages), "model": self._model}

    def transcript_messages(self) -> list[TranscriptMessage]:
        shown: set[str] = set()
        found = []
        for index, message in self._replayed():
            line = self._lines[index]
            stamp = message.get("timestamp")
            when = stamp if isinstance(stamp, str) else line.timestamp
            for turn in transcript_turns(message, shown):
                found.append(TranscriptMessage(line.name, when, turn))
        return found

    def usage(self) -> dict[str, Any] | None:
        if not self._tokens:
            return None
        return {
            key: sum(tokens.get(field, 0) for tokens in self._tokens.values())
            for key, field in _USAGE_FIELDS
        }

    def entry_type(self, index: int) -> str:
        return self._lines[index].kind

    def entry_role(self, index: int) -> str | None:
        return ROLES.get(self._lines[index].kind)

    def entry_text(self, index: int) -> str:
        kind = self._lines[index].kind
        obj = self.entry_view(index)
        if kind == KIND_REWIND:
            return f"rewind to {obj['$rewindTo']}"
        if kind == KIND_SET:
            return "set " + ", ".join(str(key) for key in obj["$set"])
        if kind == KIND_HEADER:
            return str(obj.get("sessionId", ""))
        text = message_text(obj.get("content"))
        if not text.strip():
            calls = obj.get("toolCalls")
            names = (
                [c.get("name") for c in calls if isinstance(c, dict)]
                if isinstance(calls, list)
                else []
            )
            text = " ".join(str(name) for name in names)
        return text

    # -- the tree ------------------------------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        return self._tree.parents[index]

    def leaf_index(self) -> int | None:
        return len(self._lines) - 1 if self._lines else None


class GeminiSession(_GeminiRecords, JsonlSession[_GeminiLine]):
    """One Gemini CLI ``.jsonl`` session file, read-only (module docstring)."""

    #: measured 785 bytes a line (`JsonlSession.LINE_INDEX_BYTES`), and some room
    LINE_INDEX_BYTES: ClassVar[int] = 870

    def _reset_state(self) -> None:
        self._start()

    def _record(self, line: Line, obj: dict[str, Any]) -> _GeminiLine:
        kind = record_kind(obj)
        self._note(kind, obj)
        return self._new_line(line.number, kind, obj, (line.start, line.end))


class GeminiDocumentSession(_GeminiRecords):
    """An older whole-file ``.json`` session (module docstring): its metadata and each
    message one entry, stored compactly. A document that does not parse (half
    written), is not an object or is over `DOCUMENT_LIMIT` shows no entries, counted as
    one malformed line, and its header says why (``unreadable``)."""

    #: what a record costs besides its bytes (its line record, the tree's and the
    #: stats' share, the bytes object): measured 710 bytes a record by
    #: `bench/line_index_bytes.py` (its own reader, not the ``.jsonl`` one's figure),
    #: and some room
    LINE_INDEX_BYTES: ClassVar[int] = 790

    def __init__(self, path: PathArg) -> None:
        super().__init__()
        self.path = Path(path)
        self._load()

    def _load(self) -> None:
        self._start()
        self._lines = []
        self._raw: list[bytes] = []
        self._identity = (0, 0, 0)
        self._unreadable: str | None = None
        with open_regular(self.path) as f:
            st = os.fstat(f.fileno())
            self._identity = (st.st_ino, st.st_size, st.st_mtime_ns)
            data = f.read(DOCUMENT_LIMIT + 1)
        if len(data) > DOCUMENT_LIMIT:
            self._unreadable = f"over {DOCUMENT_LIMIT // (1024 * 1024)} MB: not parsed"
            return
        try:
            document = loads(data)
        except (ValueError, RecursionError) as exc:
            self._unreadable = f"not JSON ({str(exc).splitlines()[0] if str(exc) else 'torn'})"
            return
        if not isinstance(document, dict):
            self._unreadable = "not a JSON object"
            return
        messages = document.get("messages")
        records = [{k: v for k, v in document.items() if k != "messages"}]
        records += (
            [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        )
        for number, obj in enumerate(records, start=1):
            kind = KIND_HEADER if number == 1 else record_kind(obj)
            raw = exact_bytes(orjson.dumps(obj))  # (not in orjson's 4 KiB at least)
            self._note(kind, obj)
            self._lines.append(self._new_line(number, kind, obj, (0, len(raw))))
            self._raw.append(raw)

    def header(self) -> dict[str, Any]:
        found = super().header()
        return found | ({"unreadable": self._unreadable} if self._unreadable else {})

    def catch_up(self) -> bool:
        st = os.stat(self.path)
        if (st.st_ino, st.st_size, st.st_mtime_ns) == self._identity:
            return False
        self._load()  # a document is rewritten whole: read again whole
        self._changed()
        self.reread = True
        return True

    def memory_cost(self) -> int:
        return sum(len(raw) for raw in self._raw) + len(self._lines) * self.LINE_INDEX_BYTES

    @property
    def malformed_lines(self) -> int:
        return 1 if self._unreadable else 0

    def __len__(self) -> int:
        return len(self._lines)

    def entry_name(self, index: int) -> str:
        return self._lines[index].name

    def raw_line(self, index: int) -> bytes:
        return self._raw[index]

    def entry(self, index: int) -> dict[str, Any]:
        obj = loads(self._raw[index])
        assert isinstance(obj, dict)
        return obj

    def entry_time_ms(self, index: int) -> int | None:
        return self._lines[index].time_ms

    def index_of(self, name: str) -> int | None:
        return next((i for i, line in enumerate(self._lines) if line.name == name), None)


def project_root(session_path: Path) -> str | None:
    """The cwd a session's project dir records in ``.project_root`` (a session in
    ``<project>/chats/``, a sub-agent's in ``<project>/chats/<parent id>/``)."""
    chats = (
        session_path.parent if session_path.parent.name == "chats" else session_path.parent.parent
    )
    try:
        with open_regular(chats.parent / PROJECT_ROOT_FILE) as f:
            text = f.read(4097).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return text if text and len(text) <= 4096 else None


def open_gemini_session(path: Path) -> SessionSource:
    """A ``.jsonl`` session as `GeminiSession`, an older ``.json`` as
    `GeminiDocumentSession`."""
    return GeminiDocumentSession(path) if is_document_chat(path.name) else GeminiSession(path)
