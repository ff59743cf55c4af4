"""The turns of a Claude Code session the model sees: ``context.json`` and
``transcript.md`` of a `core.formats.claude.ClaudeSession`.

From the path (root -> leaf, across compactions), starting after its last
``compact_boundary`` (the model sees the summary, not what it replaced) with the
boundary's preserved segment (the lines the compaction kept, before the boundary in
the file) right after the summary it names as anchor -- what Claude Code sends:

* ``user`` and ``assistant`` lines only, ``isMeta`` user lines included (the caveat of
  a local command, an image's source path: Claude Code sends them); attachments
  (harness context Claude Code sends as ``<system-reminder>`` text or ``system``
  messages), system lines and metadata are left out;
* the block lines of one response (one ``message.id``) merged into one assistant
  message in path order -- and a block line of the same response that is not on the
  path (parallel tool calls can make a tool result and the next block siblings) after
  them, in file order;
* each ``tool_result`` placed right after the assistant message holding the
  ``tool_use`` it answers (the result on the path if there is one, else the first in
  the file), in one user message, in file order (the order the calls completed, as
  Claude Code sends them); a result whose call is not in the context stays where it
  is;
* in ``context.json``, consecutive user lines are one user message (their blocks in
  order, a text as a text block), as Claude Code sends them; ``transcript.md`` keeps
  one message per line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard

from core.formats.base import TranscriptMessage
from core.formats.claude_blocks import agent_blocks, content_blocks, tool_result_message

__all__ = ["ClaudeLines", "Turns"]


class ClaudeLines(Protocol):
    """What the turns read of a Claude session (`ClaudeSession` provides it)."""

    def __len__(self) -> int: ...
    def entry(self, index: int) -> dict[str, Any]: ...
    def entry_name(self, index: int) -> str: ...
    def entry_timestamp(self, index: int) -> str: ...
    def entry_type(self, index: int) -> str: ...
    def message_id(self, index: int) -> str | None: ...
    def is_compact_boundary(self, index: int) -> bool: ...
    def preserved_segment(self, boundary: int) -> tuple[int | None, list[int]]: ...
    def path_indexes(self) -> list[int]: ...


@dataclass(slots=True)
class _Turn:
    role: str  # "user" | "assistant"
    #: the lines behind it; the first one names it in the transcript
    lines: list[int]
    #: a user line: the positions of its blocks shown (``None``: its content as it is)
    kept: list[int] | None = None
    #: assistant: (line, block position) of the tool results placed after it
    results: list[tuple[int, int]] = field(default_factory=list)
    model: str | None = None
    #: a user line's messages in ``transcript.md`` (a result each, one for the rest);
    #: an assistant turn's are one and its results
    user_shown: int = 1
    #: what the turn shows, held (``Turns(hold=True)``): its content and its results'
    #: blocks; else read from the lines when the turn is shown
    held: tuple[Any, list[tuple[int, dict[str, Any]]]] | None = None


#: tool_use id -> (line, block position) of a tool result
_Results = dict[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class _UserLine:
    """What building reads of a user line (parsed once for it): whether it has a
    message, its content's length (``None``: not a list) and its results' positions."""

    has_message: bool
    length: int | None = None
    results: frozenset[int] = frozenset()


class Turns:
    """The turns of one version of a session (built once; the session drops it when
    the file changes).

    Building reads every line of the path once; what a turn keeps is where its
    content is (lines, block positions). ``hold``: its content is taken then too and
    kept (a session rendered in memory parses each line once); else each turn's lines
    are parsed again when it is shown and let go (a file too big to hold: one turn's
    content in memory at a time, `sessionfs.view.streamed_agents`). Both show the same
    objects."""

    def __init__(
        self, lines: ClaudeLines, path: list[int] | None = None, hold: bool = True
    ) -> None:
        """``path``: root -> leaf (default: the session's current path)."""
        self._lines = lines
        self._hold = hold
        self._parsed: dict[int, dict[str, Any]] = {}
        if path is None:
            path = lines.path_indexes()
        self._on_path = set(path)
        self._segment = _sent_segment(lines, path)
        self._elsewhere: _Results | None = None
        self.turns = self._build()
        if hold:
            for turn in self.turns:
                turn.held = (self._content(turn), self._result_blocks(turn))
        self._parsed = {}  # the parsed lines go; the turns keep what they use

    def _obj(self, index: int) -> dict[str, Any]:
        obj = self._parsed.get(index)
        if obj is None:
            if not self._hold:
                self._parsed.clear()  # the last line only (a turn's next read)
            obj = self._parsed[index] = self._lines.entry(index)
        return obj

    def _message(self, index: int) -> dict[str, Any] | None:
        message = self._obj(index).get("message")
        return message if isinstance(message, dict) else None

    def _list_content(self, index: int) -> list[Any] | None:
        message = self._message(index)
        content = message.get("content") if message is not None else None
        return content if isinstance(content, list) else None

    # -- building ------------------------------------------------------------------------

    def _user_lines(self, indexes: Iterable[int], found: _Results) -> dict[int, _UserLine]:
        """What building reads of the user lines among ``indexes``, each parsed once;
        into ``found``: tool_use id -> (line, block position) of the first result for
        it."""
        lines: dict[int, _UserLine] = {}
        for index in indexes:
            if self._lines.entry_type(index) != "user":
                continue
            message = self._message(index)
            content = message.get("content") if message is not None else None
            if not isinstance(content, list):
                lines[index] = _UserLine(message is not None)
                continue
            results = []
            for position, block in enumerate(content):
                if _is_result(block):
                    results.append(position)
                    key = block.get("tool_use_id")
                    if isinstance(key, str):
                        found.setdefault(key, (index, position))
            lines[index] = _UserLine(True, len(content), frozenset(results))
        return lines

    def _result_elsewhere(self, call_id: str) -> tuple[int, int] | None:
        if self._elsewhere is None:  # only when a call's result is not on the path
            others = (i for i in range(len(self._lines)) if i not in self._on_path)
            self._elsewhere = {}
            self._user_lines(others, self._elsewhere)
        return self._elsewhere.get(call_id)

    def _response_lines(self) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
        """message.id -> its lines on the context path (path order), and -> its lines
        off the path (file order)."""
        on: dict[str, list[int]] = {}
        for index in self._segment:
            key = self._lines.message_id(index)
            if key is not None and self._lines.entry_type(index) == "assistant":
                on.setdefault(key, []).append(index)
        off: dict[str, list[int]] = {}
        for index in range(len(self._lines)):
            key = self._lines.message_id(index)
            off_path = key in on and index not in self._on_path
            if off_path and self._lines.entry_type(index) == "assistant":
                off.setdefault(str(key), []).append(index)
        return on, off

    def _build(self) -> list[_Turn]:
        on_ids, off_ids = self._response_lines()
        on_path_results: _Results = {}
        user_lines = self._user_lines(self._segment, on_path_results)
        placed: set[tuple[int, int]] = set()
        done: set[str] = set()
        turns: list[_Turn] = []
        for index in self._segment:
            kind = self._lines.entry_type(index)
            if kind == "user":
                turn = self._user_turn(index, user_lines[index], placed)
                if turn is not None:
                    turns.append(turn)
                continue
            if kind != "assistant" or self._message(index) is None:
                continue
            key = self._lines.message_id(index)
            if key is not None and key in done:
                continue
            members = [index] if key is None else [*on_ids[key], *off_ids.get(key, [])]
            if key is not None:
                done.add(key)
            turns.append(self._assistant_turn(members, on_path_results, placed))
        return turns

    def _assistant_turn(
        self, members: list[int], on_path_results: _Results, placed: set[tuple[int, int]]
    ) -> _Turn:
        model = None
        found_results: list[tuple[int, int]] = []
        for member in members:
            message = self._message(member) or {}
            if isinstance(message.get("model"), str):
                model = message["model"]
            for block in content_blocks(message.get("content")):
                if not (isinstance(block, dict) and block.get("type") == "tool_use"):
                    continue
                call_id = block.get("id")
                if not isinstance(call_id, str):
                    continue
                found = on_path_results.get(call_id) or self._result_elsewhere(call_id)
                if found is not None and found not in placed:
                    placed.add(found)
                    found_results.append(found)
        found_results.sort()  # file order
        return _Turn("assistant", members, results=found_results, model=model)

    def _user_turn(self, index: int, line: _UserLine, placed: set[tuple[int, int]]) -> _Turn | None:
        if not line.has_message:
            return None
        if line.length is None:
            return _Turn("user", [index])
        kept = [position for position in range(line.length) if (index, position) not in placed]
        if not kept:
            return None  # only results, each placed after its call
        results = sum(1 for at in kept if at in line.results)
        return _Turn("user", [index], kept, user_shown=results + (results < len(kept)))

    # -- what a turn shows ---------------------------------------------------------------

    def _content(self, turn: _Turn) -> Any:
        """The turn's content: a user line's (its blocks still shown), or the blocks of
        every line of a response in order."""
        if turn.held is not None:
            return turn.held[0]
        if turn.role == "user":
            message = self._message(turn.lines[0]) or {}
            content = message.get("content")
            if turn.kept is None or not isinstance(content, list):
                return content
            return [content[position] for position in turn.kept]
        blocks: list[Any] = []
        for member in turn.lines:
            blocks.extend(content_blocks((self._message(member) or {}).get("content")))
        return blocks

    def _result_blocks(self, turn: _Turn) -> list[tuple[int, dict[str, Any]]]:
        """(line, block) of each tool result placed after the turn."""
        if turn.held is not None:
            return turn.held[1]
        return [(line, (self._list_content(line) or [])[at]) for line, at in turn.results]

    # -- what the session shows ---------------------------------------------------------

    def model(self) -> str | None:
        for turn in reversed(self.turns):
            if turn.model is not None:
                return turn.model
        return None

    def context_messages(self) -> Iterator[dict[str, Any]]:
        """The Anthropic Messages shape: ``{"role", "content"}``, results of one
        response's calls in one user message after it (consecutive user messages are
        one: a message is handed out when the next one is not a user's)."""
        pending: dict[str, Any] | None = None
        for turn in self.turns:
            said = [(turn.role, self._content(turn))]
            if turn.results:
                said.append(("user", [block for _, block in self._result_blocks(turn)]))
            for role, content in said:
                if role == "user" and pending is not None and pending["role"] == "user":
                    pending = {"role": "user", "content": _joined(pending, content)}
                    continue
                if pending is not None:
                    yield pending
                pending = {"role": role, "content": content}
        if pending is not None:
            yield pending

    def transcript_length(self) -> int:
        """How many messages `transcript_messages` yields (no line read)."""
        return sum(
            1 + len(turn.results) if turn.role == "assistant" else turn.user_shown
            for turn in self.turns
        )

    def _named(self, index: int, message: dict[str, Any]) -> TranscriptMessage:
        return TranscriptMessage(
            self._lines.entry_name(index), self._lines.entry_timestamp(index), message
        )

    def transcript_messages(self) -> Iterator[TranscriptMessage]:
        """The same turns as xcsh messages: one per assistant response, one
        ``toolResult`` per result (named by its own line)."""
        tool_names: dict[str, str] = {}
        for turn in self.turns:
            first = turn.lines[0]
            content = self._content(turn)
            if turn.role == "assistant":
                blocks = agent_blocks(content)
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        tool_names[str(block.get("id"))] = str(block.get("name"))
                yield self._named(first, {"role": "assistant", "content": blocks})
                for line, result in self._result_blocks(turn):
                    name = tool_names.get(str(result.get("tool_use_id")), "?")
                    yield self._named(line, tool_result_message(result, name))
                continue
            if not isinstance(content, list):
                yield self._named(first, {"role": "user", "content": content})
                continue
            results = [b for b in content if _is_result(b)]
            rest = [b for b in content if not any(b is r for r in results)]
            if rest:
                yield self._named(first, {"role": "user", "content": agent_blocks(rest)})
            for result in results:
                name = tool_names.get(str(result.get("tool_use_id")), "?")
                yield self._named(first, tool_result_message(result, name))


def _joined(message: dict[str, Any], content: Any) -> list[Any]:
    """A user message's blocks with the next user line's after them. Where a text
    meets a text, Claude Code ends the first with a newline (it does so when it sends
    consecutive user lines as one message)."""
    before, after = content_blocks(message["content"]), content_blocks(content)
    last = before[-1] if before else None
    if _is_text(last) and after and _is_text(after[0]):
        said = str(last.get("text", ""))
        if not said.endswith("\n"):
            before[-1] = {**last, "text": said + "\n"}
    return before + after


def _is_result(block: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _is_text(block: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(block, dict) and block.get("type") == "text"


def _sent_segment(lines: ClaudeLines, path: list[int]) -> list[int]:
    """The part of ``path`` Claude Code sends: after its last compact boundary, with
    that boundary's preserved segment after the anchor (else right after the
    boundary)."""
    boundary = None
    for position, index in enumerate(path):
        if lines.is_compact_boundary(index):
            boundary = position
    if boundary is None:
        return path
    after = path[boundary + 1 :]
    anchor, preserved = lines.preserved_segment(path[boundary])
    at = after.index(anchor) + 1 if anchor in after else 0
    return [*after[:at], *preserved, *after[at:]]
