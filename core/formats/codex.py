"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``,
``archived_sessions/``, ``*.jsonl.zst``) as a `SessionSource`, read-only.

Every line is ``{"timestamp", "type": <kind>, "payload": {...}}``; the 2025 format has
no envelope (a first line ``{id, timestamp, instructions}``, then bare response items
and ``{"record_type": "state"}`` lines) and is read the same way: its first line is
the ``session_meta``, a bare item a ``response_item``, a record a line of that kind.

A session is linear: entry ``i`` is the ``i``-th JSON object line, named
``NNNNNN-<kind>[-<payload type>]`` (``NNNNNN``: its line number); its parent is the
entry before; the leaf is the last entry (or one chosen through the mount: then the
path, context and transcript end there). What the mount shows besides:

* ``context.json``: ``{"messages", "model"}`` -- the response items as Codex sends them
  (in their own shape, without the ``internal_chat_message_metadata_passthrough`` it
  keeps for itself), a ``compacted`` line's ``replacement_history`` replacing what came
  before, a ``thread_rolled_back {num_turns}`` dropping the last N user turns (injected
  context is no turn), ``model`` the latest ``turn_context``'s;
* a fork (``session_meta.history_base {thread_id, end_byte_offset}``, Codex 0.17x)
  copies none of its parent's items: its context and transcript start with the
  parent's, read from the parent's rollout up to ``end_byte_offset`` (found through
  ``find_thread``), as the model is sent them;
* ``transcript.md``: the response items only (``event_msg`` repeats the same text),
  calls and their outputs paired by ``call_id`` (`core.formats.codex_items`), a
  ``compacted`` line as its summary (in place of the assistant reply that wrote it);
* ``header.json``: the first ``session_meta`` (an older fork copies its parent's after it);
* ``title``: the newest ``thread_name_updated``, else the title given at construction
  (the session index's name, or the state database's: `core.formats.codex_state`);
* ``stats.json`` usage: the last ``token_count``'s ``total_token_usage`` (cumulative:
  a fork's includes its parent's).

`reads_line` says which lines the reader takes words from, or knows repeat words it
takes from another line: a newer Codex writing text into a kind it does not know is
caught by the tests that run the real agent.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from core.formats.base import TranscriptMessage
from core.formats.codex_items import (
    agent_message,
    call_id_of,
    is_injected,
    item_text,
    output_message,
)
from core.formats.jsonl_source import JsonlSession, LineRecord, line_times
from core.formats.lines import Line
from core.safe_open import PathArg

__all__ = [
    "ARCHIVE_DIR",
    "CodexPositions",
    "CodexSession",
    "FindThread",
    "reads_line",
    "split_line",
]

ARCHIVE_DIR: Final = "archived_sessions"
#: ``stats.json`` usage key <- ``total_token_usage`` key
_USAGE_FIELDS: Final = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cacheRead", "cached_input_tokens"),
)
#: what the context and transcript read; other kinds are only shown
_HISTORY_KINDS: Final = frozenset({"response_item", "compacted", "event_msg"})
#: ``event_msg`` types read for the title, usage and context
_EVENTS_READ: Final = frozenset({"thread_name_updated", "token_count", "thread_rolled_back"})
#: ``event_msg`` types whose words repeat response items (the user's prompt, the
#: assistant's text, a finished item, the turn's last answer): never read
_EVENTS_REPEATING: Final = frozenset(
    {
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "item_completed",
        "task_complete",
    }
)
#: kinds read for the header and the model
_META_KINDS: Final = frozenset({"session_meta", "turn_context"})
#: a response item's keys Codex keeps for itself and never sends the model
_UNSENT_KEYS: Final = ("internal_chat_message_metadata_passthrough",)
#: forks of forks followed at most this deep (each level reads its parent's file)
MAX_FORK_DEPTH: Final = 8

#: finds the rollout of a thread id (``None``: not there)
FindThread = Callable[[str], "Path | None"]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def reads_line(kind: str, payload: Mapping[str, Any]) -> bool:
    """Whether the reader takes this line's words (context, transcript, title, header)
    or knows another line it reads carries the same words. A kind it does not know
    (``world_state``, ``token_usage_record``, a new ``event_msg``) is only shown in
    ``entries/``: fine for settings and counters, a loss for conversation text."""
    kind_of = payload.get("type")
    if kind == "response_item":
        return agent_message(payload) is not None or output_message(payload, "?") is not None
    if kind == "event_msg":
        return kind_of in _EVENTS_READ or kind_of in _EVENTS_REPEATING
    return kind == "compacted" or kind in _META_KINDS


def split_line(obj: Mapping[str, Any], envelope_less: bool) -> tuple[str, dict[str, Any]]:
    """A line's ``(kind, payload)``. ``envelope_less``: the file is in the 2025 format
    (the first line decides), where a bare item is a ``response_item``."""
    payload = obj.get("payload")
    kind = _str(obj.get("type"))
    if isinstance(payload, dict) and kind is not None:
        return kind, payload
    record = _str(obj.get("record_type"))
    if record is not None:
        return record, dict(obj)
    if envelope_less and kind is not None:
        return "response_item", dict(obj)
    return kind or "unknown", payload if isinstance(payload, dict) else {}


def _is_envelope_less_meta(obj: Mapping[str, Any]) -> bool:
    return "payload" not in obj and "type" not in obj and isinstance(obj.get("id"), str)


@dataclass(slots=True)
class _CodexLine(LineRecord):
    kind: str
    payload_type: str | None
    role: str | None


@dataclass(frozen=True)
class _ForkBase:
    """What a fork starts from: its parent's context and transcript up to the fork."""

    history: list[Any] = field(default_factory=list)
    transcript: list[TranscriptMessage] = field(default_factory=list)
    #: bytes of the parent read for it (what holding it costs, roughly)
    size: int = 0


_NO_BASE: Final = _ForkBase()


class CodexSession(JsonlSession[_CodexLine]):
    """One Codex rollout file read-only. ``index_title``: the name
    ``session_index.jsonl`` (or the state database) gives the session (the title when
    the file names none); ``archived``: shown in the header (default: the file is under
    ``archived_sessions/``); ``find_thread``: where a fork's parent rollout is (``None``:
    a fork shows only its own items); ``fork_depth``: how many forks down this file was
    opened as a parent (deeper than `MAX_FORK_DEPTH`: its own parent is not read);
    ``state_title``: looks the title up elsewhere (Codex's state database) when neither
    the file nor ``index_title`` names one -- called when the title is first wanted,
    again after the file changed (Codex may set it after its first lines), never
    while indexing lines."""

    agent = "codex"
    #: measured 418 bytes a line (`JsonlSession.LINE_INDEX_BYTES`), and some room
    LINE_INDEX_BYTES = 460

    def __init__(
        self,
        path: PathArg,
        index_title: str | None = None,
        archived: bool | None = None,
        find_thread: FindThread | None = None,
        fork_depth: int = 0,
        state_title: Callable[[], str | None] | None = None,
    ) -> None:
        self.index_title = index_title
        self.archived = ARCHIVE_DIR in Path(path).parts if archived is None else archived
        self.find_thread = find_thread
        self.fork_depth = fork_depth
        self.state_title = state_title
        super().__init__(path)

    def _changed(self) -> None:
        super()._changed()
        self._looked_up_title: str | None = None
        self._title_looked_up = False

    def _reset_state(self) -> None:
        self._envelope_less: bool | None = None
        self._meta: dict[str, Any] | None = None
        self._meta_timestamp: str | None = None
        self._thread_name: str | None = None
        self._model: str | None = None
        self._usage: dict[str, Any] | None = None
        self._base: _ForkBase | None = None

    def _record(self, line: Line, obj: dict[str, Any]) -> _CodexLine:
        if self._envelope_less is None:
            self._envelope_less = _is_envelope_less_meta(obj)
            kind, payload = (
                ("session_meta", dict(obj)) if self._envelope_less else split_line(obj, False)
            )
        else:
            kind, payload = split_line(obj, self._envelope_less)
        payload_type = _str(payload.get("type")) if kind != "session_meta" else None
        self._note(kind, payload_type, payload, obj)
        timestamp, time_ms = line_times(obj)
        role = _str(payload.get("role")) if kind == "response_item" else None
        role = role if payload_type == "message" else None
        return _CodexLine(
            name=f"{line.number:06d}-{kind}" + (f"-{payload_type}" if payload_type else ""),
            start=line.start,
            end=line.end,
            timestamp=timestamp,
            time_ms=time_ms,
            # One object each for the few values these take (`JsonlSession._shared`).
            kind=self._shared(kind),
            payload_type=None if payload_type is None else self._shared(payload_type),
            role=None if role is None else self._shared(role),
        )

    def _note(
        self, kind: str, payload_type: str | None, payload: dict[str, Any], obj: dict[str, Any]
    ) -> None:
        """Keep what the header, title, model and usage need."""
        if kind == "session_meta" and self._meta is None:
            self._meta = payload
            stamp = obj.get("timestamp")
            self._meta_timestamp = stamp if isinstance(stamp, str) else None
        elif kind == "turn_context":
            self._model = _str(payload.get("model")) or self._model
        elif kind == "event_msg" and payload_type == "thread_name_updated":
            self._thread_name = _str(payload.get("thread_name")) or self._thread_name
        elif kind == "event_msg" and payload_type == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(total, dict):
                self._usage = total

    # -- the session ---------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        meta = self._meta or {}
        timestamp = meta.get("timestamp")
        return {
            "agent": "codex",
            "id": meta.get("id") if isinstance(meta.get("id"), str) else self.path.stem,
            "cwd": meta.get("cwd"),
            "cli_version": meta.get("cli_version"),
            "model_provider": meta.get("model_provider"),
            "git": meta.get("git"),
            "forked_from_id": meta.get("forked_from_id"),
            "archived": self.archived,
            "timestamp": timestamp if isinstance(timestamp, str) else self._meta_timestamp,
            "file": os.fspath(self.path),
        }

    def session_meta(self) -> dict[str, Any]:
        """The first ``session_meta`` payload as stored (``{}``: none)."""
        return dict(self._meta or {})

    def title(self) -> str:
        named = self._thread_name or self.index_title
        if named:
            return named
        if self.state_title is not None and not self._title_looked_up:
            self._looked_up_title = self.state_title()
            self._title_looked_up = True
        return self._looked_up_title or ""

    def _payloads(self, until: int | None = None) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """(index, kind, payload) of every line the context or transcript reads (those
        ending by byte ``until`` of the file, when given)."""
        for index, line in enumerate(self._lines):
            if until is not None and line.end > until:
                return
            if line.kind in _HISTORY_KINDS:
                kind, payload = split_line(self.entry(index), bool(self._envelope_less))
                yield index, kind, payload

    def context(self) -> dict[str, Any]:
        return {"messages": self._history(self._leaf_end()), "model": self._model}

    def _leaf_end(self) -> int | None:
        """Where a leaf chosen before the last line ends in the file (the context and
        transcript stop there); ``None``: the whole file."""
        leaf = self.leaf_index()
        if leaf is None or leaf == self.own_leaf_index():
            return None
        return self._lines[leaf].end

    def _history(self, until: int | None = None) -> list[Any]:
        """The items Codex sends the model next (without its base instructions, which
        it builds anew for each request): a fork's parent's first."""
        history = _HistoryScan(self._fork_base().history, hold=True)
        for row in self._payloads(until):
            history.add(*row)
        return [_as_sent(item) for item in history.items]

    def read_again(self) -> CodexPositions:
        """Where each of `context`'s items and `transcript_messages`' messages is, found
        in one pass over the file (a file too big to hold: the renderings written from
        it read each again from its line; `sessionfs.view.streamed_agents`)."""
        base = self._fork_base()
        history = _HistoryScan(base.history, hold=False)
        shown = _TranscriptScan(self, hold=False)
        for row in self._payloads(self._leaf_end()):
            history.add(*row)
            shown.add(*row)
        return CodexPositions(self, history.items, base.transcript + shown.messages())

    def context_model(self) -> str | None:
        """`context`'s ``model``."""
        return self._model

    def _payload_of(self, line: int) -> Any:
        _, payload = split_line(self.entry(line), bool(self._envelope_less))
        return payload

    def transcript_messages(self) -> list[TranscriptMessage]:
        return self._fork_base().transcript + self._transcript(self._leaf_end())

    def _transcript(self, until: int | None = None) -> list[TranscriptMessage]:
        """The transcript's own messages (a fork's parent's not among them)."""
        scan = _TranscriptScan(self, hold=True)
        for row in self._payloads(until):
            scan.add(*row)
        return scan.messages()

    def _shown(self, message: TranscriptMessage | _ShownAt) -> TranscriptMessage:
        """A transcript message, read again from its line when `_ShownAt` says where."""
        if isinstance(message, TranscriptMessage):
            return message
        _, payload = split_line(self.entry(message.line), bool(self._envelope_less))
        built = (
            agent_message(payload)
            if message.tool is None
            else output_message(payload, message.tool)
        )
        assert built is not None  # (what it was when the line was first read)
        return _named(self._lines[message.line], built)

    def memory_cost(self) -> int:
        base = self._base.size if self._base is not None else 0
        return super().memory_cost() + base

    # -- a fork's parent ------------------------------------------------------------------

    def _fork_base(self) -> _ForkBase:
        if self._base is None:
            self._base = self._read_fork_base()
        return self._base

    def _read_fork_base(self) -> _ForkBase:
        """The parent's history up to ``history_base.end_byte_offset`` (nothing when
        this is no such fork, or its parent's rollout is not there)."""
        base = (self._meta or {}).get("history_base")
        if not isinstance(base, dict) or self.find_thread is None:
            return _NO_BASE
        thread_id, offset = base.get("thread_id"), base.get("end_byte_offset")
        if not isinstance(thread_id, str) or not isinstance(offset, int) or offset <= 0:
            return _NO_BASE
        if self.fork_depth >= MAX_FORK_DEPTH:
            return _NO_BASE
        path = self.find_thread(thread_id)
        if path is None or path == self.path:
            return _NO_BASE
        try:
            parent = CodexSession(
                path, find_thread=self.find_thread, fork_depth=self.fork_depth + 1
            )
        except (OSError, ValueError):
            return _NO_BASE
        stem = path.name.split(".", 1)[0]
        transcript = [
            TranscriptMessage(f"{stem}/{turn.entry_name}", turn.time, turn.message)
            for turn in parent._fork_base().transcript + parent._transcript(offset)
        ]
        size = offset + parent._fork_base().size
        return _ForkBase(parent._history(offset), transcript, size)

    def usage(self) -> dict[str, Any]:
        total = self._usage or {}
        usage = {}
        for key, name in _USAGE_FIELDS:
            value = total.get(name)
            number = isinstance(value, int) and not isinstance(value, bool)
            usage[key] = value if number else 0
        return usage

    def entry_type(self, index: int) -> str:
        line = self._lines[index]
        return f"{line.kind}-{line.payload_type}" if line.payload_type else line.kind

    def entry_role(self, index: int) -> str | None:
        return self._lines[index].role

    def entry_text(self, index: int) -> str:
        line = self._lines[index]
        _, payload = split_line(self.entry(index), bool(self._envelope_less))
        if index == 0 and self._envelope_less:
            return str(payload.get("id", ""))
        if line.payload_type == "message":
            return item_text(payload)
        finished = payload.get("item")  # an ``item_completed`` event: the item's words
        if isinstance(finished, dict) and item_text(finished):
            return item_text(finished)
        keys = ("message", "thread_name", "name", "text", "last_agent_message", "model", "cwd")
        for key in (*keys, "output"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                return value
        summary = payload.get("summary")
        if isinstance(summary, list) and summary and isinstance(summary[0], dict):
            return str(summary[0].get("text", ""))
        return ""

    # -- the tree: a line -----------------------------------------------------------------

    def parent_index(self, index: int) -> int | None:
        return index - 1 if index > 0 else None

    def path_indexes(self) -> list[int]:
        leaf = self.leaf_index()
        return [] if leaf is None else list(range(leaf + 1))


class CodexPositions:
    """`CodexSession.read_again`: where the context's items and the transcript's
    messages are, each read again from its line when reached (any number of passes)."""

    def __init__(self, session: CodexSession, history: list[Any], shown: list[Any]) -> None:
        self._session = session
        self._history = history  # `_ItemAt`s, and items held (a fork base's, a summary)
        self._shown = shown  # `_ShownAt`s, and messages held

    def context_messages(self) -> Iterator[Any]:
        """`CodexSession.context`'s messages, one at a time."""
        # The line read last is kept: a compaction's items all sit in its one line,
        # which holds the whole compacted history (parsed once, not once per item).
        parsed: tuple[int, Any] | None = None
        for item in self._history:
            if not isinstance(item, _ItemAt):
                yield _as_sent(item)
                continue
            if parsed is None or parsed[0] != item.line:
                parsed = (item.line, self._session._payload_of(item.line))
            payload = parsed[1]
            yield _as_sent(payload if item.at is None else payload["replacement_history"][item.at])

    def transcript(self) -> tuple[int, Iterator[TranscriptMessage]]:
        """`CodexSession.transcript_messages`' count, and them one at a time."""
        return len(self._shown), map(self._session._shown, self._shown)


class _HistoryScan:
    """The context's items, a line at a time (`CodexSession._payloads`' rows): the
    items themselves (``hold``), or where each is (`_ItemAt`; a fork base's and an
    older compaction's summary are held)."""

    def __init__(self, base: list[Any], hold: bool) -> None:
        self.items: list[Any] = list(base)
        self.hold = hold

    def add(self, index: int, kind: str, payload: dict[str, Any]) -> None:
        if kind == "response_item":
            self.items.append(payload if self.hold else _ItemAt.of(index, None, payload))
        elif kind == "compacted":
            replacement = payload.get("replacement_history")
            if isinstance(replacement, list):
                self.items = [
                    item if self.hold else _ItemAt.of(index, at, item)
                    for at, item in enumerate(replacement)
                ]
            else:  # an older compaction: only its summary is left (if any)
                summary = payload.get("message")
                said = [_user_text(summary)] if isinstance(summary, str) and summary else []
                self.items = said  # (small: held either way)
        elif payload.get("type") == "thread_rolled_back":
            _drop_user_turns(self.items, payload.get("num_turns"))


class _TranscriptScan:
    """The transcript's own messages, a line at a time (`CodexSession._payloads`'
    rows): the messages (``hold``), or where each is (`_ShownAt`; a compaction's
    summary is held). Each call's output is placed right after it."""

    def __init__(self, session: CodexSession, hold: bool) -> None:
        self.session = session
        self.hold = hold
        self.groups: list[list[Any]] = []
        self.calls: dict[str, tuple[list[Any], str]] = {}

    def add(self, index: int, kind: str, payload: dict[str, Any]) -> None:
        line = self.session._lines[index]
        if kind == "compacted":
            _add_compaction(self.groups, line, payload, self.session._shown)
        if kind != "response_item":
            return
        call_id = call_id_of(payload)
        owner = self.calls.get(call_id) if call_id is not None else None
        tool = owner[1] if owner is not None else "?"
        result = output_message(payload, tool)
        if result is not None:
            named = _named(line, result) if self.hold else _ShownAt(index, tool)
            if owner is not None:
                owner[0].append(named)  # right after its call
            else:
                self.groups.append([named])
            return
        message = agent_message(payload)
        if message is None:
            return
        group = [_named(line, message) if self.hold else _ShownAt(index, None)]
        self.groups.append(group)
        block = message["content"][0] if message.get("content") else None
        if call_id is not None and isinstance(block, dict) and block.get("type") == "toolCall":
            self.calls[call_id] = (group, str(block.get("name")))

    def messages(self) -> list[Any]:
        return [message for group in self.groups for message in group]


def _as_sent(item: Any) -> Any:
    """A history item as Codex sends it: without the keys it keeps for itself."""
    if isinstance(item, dict) and any(key in item for key in _UNSENT_KEYS):
        return {key: value for key, value in item.items() if key not in _UNSENT_KEYS}
    return item


@dataclass(frozen=True, slots=True)
class _ItemAt:
    """Where a history item is: line ``line``'s own item (``at`` ``None``) or item
    ``at`` of its ``replacement_history``; whether it starts a user turn (what a
    rollback asks, read when it was)."""

    line: int
    at: int | None
    user_turn: bool

    @classmethod
    def of(cls, line: int, at: int | None, item: Any) -> _ItemAt:
        return cls(line, at, _starts_user_turn(item))


@dataclass(frozen=True, slots=True)
class _ShownAt:
    """Where a transcript message is: line ``line``'s item, as a message (``tool``
    ``None``) or as the output of a call to ``tool``."""

    line: int
    tool: str | None


def _named(line: _CodexLine, message: dict[str, Any]) -> TranscriptMessage:
    return TranscriptMessage(line.name, line.timestamp, message)


def _add_compaction(
    groups: list[list[Any]],
    line: _CodexLine,
    payload: dict[str, Any],
    shown: Callable[[Any], TranscriptMessage],
) -> None:
    """A ``compacted`` line as a ``compactionSummary`` message. Codex writes the reply
    that made the summary as an ordinary assistant message just before: that one
    goes (the summary shows its words, as the model is sent them). ``shown``: a
    message of ``groups`` as it is shown."""
    summary = payload.get("message")
    if not isinstance(summary, str) or not summary:
        return
    if groups and len(groups[-1]) == 1:
        last = shown(groups[-1][0]).message
        text = _only_text(last) if last.get("role") == "assistant" else None
        if text and summary.endswith(text):
            groups.pop()
    message = {"role": "compactionSummary", "summary": summary}
    groups.append([_named(line, message)])


def _only_text(message: Mapping[str, Any]) -> str | None:
    """The text of a message that is only text blocks (``None`` otherwise)."""
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks:
        return None
    if not all(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
        return None
    return "".join(str(b.get("text", "")) for b in blocks)


def _user_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _starts_user_turn(item: Any) -> bool:
    """A user's message (not context the harness injected): where a user turn starts."""
    return (
        isinstance(item, dict)
        and item.get("type") == "message"
        and item.get("role") == "user"
        and not is_injected(item)
    )


def _drop_user_turns(history: list[Any], turns: Any) -> None:
    """Drop the last ``turns`` user turns (each from its user message on) in place."""
    if not isinstance(turns, int) or isinstance(turns, bool):
        return
    for _ in range(max(turns, 0)):
        start = next(
            (
                position
                for position in range(len(history) - 1, -1, -1)
                if (
                    history[position].user_turn
                    if isinstance(history[position], _ItemAt)
                    else _starts_user_turn(history[position])
                )
            ),
            None,
        )
        if start is None:
            return
        del history[start:]
