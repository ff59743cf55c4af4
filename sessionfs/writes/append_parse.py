"""What a file dropped into a session's ``append/`` means: a validated list of operations.

Three shapes are accepted (filesystem spec, "Appending"):

- ``*.txt`` / ``*.md``: the whole file is the text of one user message;
- one JSON object (pretty-printed or not), or JSON Lines (one object per line);
- each object is either an entry body with ``type`` (appended with that type's
  ``append_*`` method, see `ENTRY_TYPES`) or a bare AgentMessage (``role``, no
  ``type``) appended with ``append_message``.

Everything is checked here, before anything touches a session: the whole file is
refused (``EINVAL``, ``EFBIG``) if any object is wrong, so an append is all-or-nothing.
Only the existence of the entries an object names (``targetId``, ``fromId``,
``firstKeptEntryId``) needs the session; `AppendOp.referenced_ids` lists them for the
writer, which checks them before appending (``ENOENT``).

Fields the mount assigns (``id``, ``parentId``, ``timestamp``) are refused rather than
ignored. A known type with a field it does not have (``sumary``) is refused too: the
``append_*`` method could not store it, and silently dropping data someone asked to
write is worse than saying no. An entry type this code does not know is appended
verbatim through core's generic ``append_entry`` (only its base fields are assigned),
just as unknown entries survive a load: the agents add types over time.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from core.jsonl import loads, loads_refused_by_orjson
from sessionfs.view.refusal import WriteRejected

__all__ = [
    "ASSIGNED_FIELDS",
    "ENTRY_TYPES",
    "MAX_APPEND_BYTES",
    "STREAM_SUFFIX",
    "AppendOp",
    "entry_op",
    "is_line_stream_name",
    "is_text_name",
    "parse_append",
    "reject_oversize",
]

#: Largest file `append/` accepts; more is refused with EFBIG (already at write()).
MAX_APPEND_BYTES = 64 * 1024 * 1024

#: Base fields of every entry that only the mount may set.
ASSIGNED_FIELDS = ("id", "parentId", "timestamp")

_TEXT_SUFFIXES = (".txt", ".md")
_UTF8_BOM = b"\xef\xbb\xbf"


def _invalid(reason: str) -> WriteRejected:
    return WriteRejected(errno.EINVAL, reason)


def is_text_name(file_name: str) -> bool:
    """True when a file of this name in ``append/`` holds plain text, not JSON."""
    return file_name.lower().endswith(_TEXT_SUFFIXES)


#: The suffix that makes a file in ``append/`` a stream of JSON Lines committed as they
#: are written. A name of its own: every other file keeps the all-or-nothing rule, even
#: when a shell opens it with ``>>``.
STREAM_SUFFIX = ".stream"


def is_line_stream_name(file_name: str) -> bool:
    """True when a file of this name in ``append/`` is a stream (``*.stream``): each
    ``write()`` commits the complete lines it ends."""
    return file_name.lower().endswith(STREAM_SUFFIX)


def reject_oversize(size: int) -> None:
    """Raise ``EFBIG`` when an append file would grow beyond `MAX_APPEND_BYTES`.

    Called by the node layer on every ``write()`` (so ``cp`` of a huge file fails early)
    and by `parse_append` for the final content.
    """
    if size > MAX_APPEND_BYTES:
        raise WriteRejected(
            errno.EFBIG,
            f"append file is larger than {MAX_APPEND_BYTES // (1024 * 1024)} MiB",
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------
# Field checks: each returns the (possibly normalised) value or raises EINVAL.
# ---------------------------------------------------------------------------

FieldCheck = Callable[[Any, str], Any]


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{where} must be a string")
    return value


def _nonempty_string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _invalid(f"{where} must be a non-empty string")
    return value


def _string_or_null(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _invalid(f"{where} must be a string or null")
    return value


def _number(value: Any, where: str) -> int | float:
    # bool is an int subclass in Python but never a count in JSON.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{where} must be a number")
    return value


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{where} must be true or false")
    return value


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid(f"{where} must be a list of strings")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid(f"{where} must be a list")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{where} must be a JSON object")
    return value


def _content(value: Any, where: str) -> str | list[Any]:
    """Message content: a string or a list of content blocks (objects)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for block in value:  # (no generator: every append checks its message)
            if not isinstance(block, dict):
                break
        else:
            return value
    raise _invalid(f"{where} must be a string or a list of content blocks")


def _anything(value: Any, where: str) -> Any:
    return value


def _agent_message(value: Any, where: str, now_ms: Callable[[], int] = _now_ms) -> dict[str, Any]:
    """An AgentMessage: an object with a non-empty string ``role``; a missing
    ``timestamp`` becomes now in milliseconds, as the agents stamp messages."""
    message = _object(value, where)
    # (Each check's place in the message is formatted only for its refusal: every
    # append through the mount checks one message.)
    role = message.get("role")
    if not isinstance(role, str) or not role:
        _nonempty_string(role, f"{where}.role")
    if "content" in message:
        content = message["content"]
        if not isinstance(content, str):
            _content(content, f"{where}.content")
    if "timestamp" in message:
        _number(message["timestamp"], f"{where}.timestamp")
    else:
        message = {**message, "timestamp": now_ms()}
    return message


# ---------------------------------------------------------------------------
# Entry types: fields (session-model.md section 3) and the core call that appends one.
# ---------------------------------------------------------------------------

AppendCall = Callable[[Any, Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class EntryType:
    """One typed entry body: which fields it must/may have and how it is appended."""

    required: Mapping[str, FieldCheck]
    optional: Mapping[str, FieldCheck]
    #: Fields whose value must be the id of an entry already in the session.
    refs: tuple[str, ...]
    append: AppendCall


def _branch_summary_from(body: Mapping[str, Any]) -> str | None:
    # "root" means "branched from before the first entry": no parent.
    from_id = body["fromId"]
    return None if from_id == "root" else from_id


ENTRY_TYPES: Mapping[str, EntryType] = {
    "message": EntryType(
        required={"message": _agent_message},
        optional={},
        refs=(),
        append=lambda m, b: m.append_message(b["message"]),
    ),
    "thinking_level_change": EntryType(
        required={"thinkingLevel": _string_or_null},
        optional={},
        refs=(),
        append=lambda m, b: m.append_thinking_level_change(b["thinkingLevel"]),
    ),
    "model_change": EntryType(
        required={"model": _nonempty_string},
        optional={"role": _string},
        refs=(),
        append=lambda m, b: m.append_model_change(b["model"], role=b.get("role")),
    ),
    "compaction": EntryType(
        required={"summary": _string, "firstKeptEntryId": _string, "tokensBefore": _number},
        optional={
            "shortSummary": _string_or_null,
            "details": _anything,
            "preserveData": _anything,
            "fromExtension": _boolean,
        },
        refs=("firstKeptEntryId",),
        append=lambda m, b: m.append_compaction(
            b["summary"],
            b.get("shortSummary"),
            b["firstKeptEntryId"],
            b["tokensBefore"],
            details=b.get("details"),
            from_extension=b.get("fromExtension"),
            preserve_data=b.get("preserveData"),
        ),
    ),
    "branch_summary": EntryType(
        required={"fromId": _nonempty_string, "summary": _string},
        optional={"details": _anything, "fromExtension": _boolean},
        refs=("fromId",),
        append=lambda m, b: m.branch_with_summary(
            _branch_summary_from(b),
            b["summary"],
            details=b.get("details"),
            from_extension=b.get("fromExtension"),
        ),
    ),
    "custom": EntryType(
        required={"customType": _nonempty_string},
        optional={"data": _anything},
        refs=(),
        append=lambda m, b: m.append_custom_entry(b["customType"], b.get("data")),
    ),
    "custom_message": EntryType(
        required={"customType": _nonempty_string, "content": _content, "display": _boolean},
        optional={"details": _anything, "attribution": _nonempty_string},
        refs=(),
        append=lambda m, b: m.append_custom_message_entry(
            b["customType"],
            b["content"],
            b["display"],
            details=b.get("details"),
            attribution=b.get("attribution", "agent"),
        ),
    ),
    "label": EntryType(
        required={"targetId": _nonempty_string},
        optional={"label": _string_or_null},
        refs=("targetId",),
        append=lambda m, b: m.append_label_change(b["targetId"], b.get("label")),
    ),
    "ttsr_injection": EntryType(
        required={"injectedRules": _string_list},
        optional={},
        refs=(),
        append=lambda m, b: m.append_ttsr_injection(b["injectedRules"]),
    ),
    "session_init": EntryType(
        required={"systemPrompt": _string, "task": _string, "tools": _list},
        optional={"outputSchema": _anything},
        refs=(),
        append=lambda m, b: m.append_session_init(
            b["systemPrompt"], b["task"], b["tools"], b.get("outputSchema")
        ),
    ),
    "mode_change": EntryType(
        required={"mode": _nonempty_string},
        optional={"data": _object},
        refs=(),
        append=lambda m, b: m.append_mode_change(b["mode"], b.get("data")),
    ),
}


#: Entry types not in `ENTRY_TYPES`: the whole body (with ``type``) goes to
#: ``append_entry``, which assigns the base fields and keeps everything else.
_UNKNOWN_TYPE = EntryType(required={}, optional={}, refs=(), append=lambda m, b: m.append_entry(b))


# ---------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendOp:
    """One entry to append: a checked body of `entry_type` from `line` of the file."""

    entry_type: str
    body: Mapping[str, Any]
    line: int
    _kind: EntryType = field(repr=False, compare=False)

    def referenced_ids(self) -> list[tuple[str, str]]:
        """``(field, id)`` pairs that must name entries already in the session."""
        out = []
        for name in self._kind.refs:
            value = self.body.get(name)
            if not isinstance(value, str):
                continue
            if self.entry_type == "branch_summary" and value == "root":
                continue
            out.append((name, value))
        return out

    def apply(self, manager: Any) -> str:
        """Append this entry through ``manager``'s core method; returns the new id."""
        return self._kind.append(manager, self.body)


def _message_op(message: dict[str, Any], line: int) -> AppendOp:
    return AppendOp("message", {"message": message}, line, ENTRY_TYPES["message"])


def _typed_op(obj: dict[str, Any], where: str, line: int, now_ms: Callable[[], int]) -> AppendOp:
    entry_type = obj["type"]
    if not isinstance(entry_type, str):
        raise _invalid(f"{where}: 'type' must be a string")
    if not entry_type or entry_type == "session":
        raise _invalid(f"{where}: entry type {entry_type!r} cannot be appended")
    for name in ASSIGNED_FIELDS:
        if name in obj:
            raise _invalid(f"{where}: {name!r} is assigned by the mount; remove it")
    kind = ENTRY_TYPES.get(entry_type)
    if kind is None:
        # A type this version does not know (the agents add types over time): kept
        # verbatim by core's generic append, as unknown entries are kept on load.
        return AppendOp(entry_type, dict(obj), line, _UNKNOWN_TYPE)
    body: dict[str, Any] = {}
    for name, check in kind.required.items():
        if name not in obj:
            raise _invalid(f"{where}: a {entry_type} entry needs {name!r}")
        if check is _agent_message:
            body[name] = _agent_message(obj[name], f"{where}: {name}", now_ms)
        else:
            body[name] = check(obj[name], f"{where}: {name!r}")
    for name, value in obj.items():
        if name == "type" or name in kind.required:
            continue
        optional = kind.optional.get(name)
        if optional is None:
            raise _invalid(f"{where}: {name!r} is not a field of a {entry_type} entry")
        body[name] = optional(value, f"{where}: {name!r}")
    return AppendOp(entry_type, body, line, kind)


def _object_op(obj: Any, where: str, line: int, now_ms: Callable[[], int]) -> AppendOp:
    if not isinstance(obj, dict):
        raise _invalid(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "type" in obj:
        return _typed_op(obj, where, line, now_ms)
    if "role" in obj:
        return _message_op(_agent_message(obj, f"{where}: message", now_ms), line)
    raise _invalid(f"{where}: an object needs 'type' (an entry) or 'role' (a message)")


def entry_op(obj: dict[str, Any], *, now_ms: Callable[[], int] = _now_ms) -> AppendOp:
    """One object (entry body or AgentMessage) checked exactly as if it had been
    dropped into ``append/``; for commands that append (``ctl``'s ``summary``)."""
    return _object_op(obj, "the entry", 1, now_ms)


def _text_op(data: bytes, now_ms: Callable[[], int]) -> AppendOp:
    text = _decode(data)
    # A shell `echo`/`printf '...\n'` ends with a newline that is not part of the prompt.
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text.strip():
        raise _invalid("a text message is empty")
    message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_ms()}
    return _message_op(message, 1)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(f"not UTF-8 text (byte {exc.start})") from None


def parse_append(
    file_name: str, data: bytes, *, now_ms: Callable[[], int] = _now_ms
) -> list[AppendOp]:
    """The operations a file named ``file_name`` holding ``data`` asks for, in order.

    Raises `WriteRejected` (``EFBIG``, ``EINVAL``) naming the first problem; never
    returns an empty list.
    """
    reject_oversize(len(data))
    if is_text_name(file_name):
        return [_text_op(data, now_ms)]
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    try:
        # The usual file, one JSON document, parsed without a copy of it decoded
        # first: orjson itself refuses what is not UTF-8, and whitespace alone.
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass  # said below, as the slow way finds it
    else:
        return [_object_op(whole, "the JSON", 1, now_ms)]
    text = _decode(data)
    if not text.strip():
        raise _invalid("the file is empty: write one JSON object or JSON Lines")
    try:
        whole = loads_refused_by_orjson(data)  # (orjson refused it just above)
    except ValueError:
        pass  # not one JSON document: read it as JSON Lines below
    else:
        # One JSON document (any formatting): it must be one object.
        return [_object_op(whole, "the JSON", 1, now_ms)]
    ops: list[AppendOp] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        line = raw.rstrip(b"\r")
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except ValueError:
            raise _invalid(f"line {number}: invalid JSON") from None
        ops.append(_object_op(obj, f"line {number}", number, now_ms))
    return ops
