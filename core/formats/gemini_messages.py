"""Gemini CLI's conversation records, as its own loader reads them, and their messages
in the shapes the mount shows. Pure functions over record dicts: no session, no I/O.

A session file is a list of records (JSONL lines; an older whole-file ``.json`` is a
document whose ``messages`` are the records). Gemini CLI 0.61's loader
(``loadConversationRecord``) tells them apart in this order (`record_kind`):

* ``{"$rewindTo": id}``: drop that message and every later one (none found: drop all);
* ``{"id", "type", "timestamp", "content", ...}``: a message (``type`` ``user``,
  ``gemini``, ``info``, ``error``, ``warning``); a later record with the same ``id``
  replaces the earlier one *where it stood*;
* ``{"$set": {...}}``: metadata patched (``lastUpdated``, ``summary``, ...); with
  ``messages`` the whole list is replaced;
* ``{"sessionId", "projectHash", ...}``: the session's metadata (written again at each
  resume).

`replay` gives the messages the loader ends with; `client_history` turns them into
the ``contents`` Gemini sends the model when it resumes (``convertSessionToClientHistory``
then ``coalesceConsecutiveRoles``): what ``context.json`` shows. `transcript_turns`
gives the same conversation in the xcsh message shape ``transcript.md`` renders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from core.formats.base import image_marker

__all__ = [
    "DOCUMENT_LIMIT",
    "KIND_HEADER",
    "KIND_REWIND",
    "KIND_SET",
    "KIND_UNKNOWN",
    "MODEL_TYPES",
    "ROLES",
    "client_history",
    "message_text",
    "part_blocks",
    "record_kind",
    "replay",
    "response_message",
    "tokens_of",
    "transcript_turns",
]

#: An older ``.json`` session is one document parsed whole: bigger than this it is
#: neither parsed by the reader (its header says why) nor indexed for search -- the
#: mount's memory bound holds whatever is on disk.
DOCUMENT_LIMIT: Final = 64 * 1024 * 1024
KIND_HEADER: Final = "session"
KIND_SET: Final = "set"
KIND_REWIND: Final = "rewind"
KIND_UNKNOWN: Final = "unknown"
#: the model's messages: ``gemini``; an older Qwen Code (a fork of Gemini CLI that
#: kept this format) names them ``qwen``
MODEL_TYPES: Final = frozenset({"gemini", "qwen"})
#: the role ``stats.json``'s ``byRole`` counts for each message type
ROLES: Final = {"user": "user", "gemini": "assistant", "qwen": "assistant"}
#: message types that are not sent to the model (shown to the user only)
_DISPLAY_ONLY: Final = frozenset({"info", "error", "warning"})
#: user content Gemini leaves out of a resumed history: its own injected context and
#: commands (``isIgnoredUserContent``)
_IGNORED_USER_PREFIXES: Final = ("/", "?", "<session_context>", "<hook_context>")

Record = dict[str, Any]


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def record_kind(obj: Mapping[str, Any]) -> str:
    """What a record is, in the loader's order: ``rewind``, the message's ``type``
    (``message`` when it has none that names it), ``set``, ``session`` or ``unknown``."""
    if _is_str(obj.get("$rewindTo")):
        return KIND_REWIND
    if _is_str(obj.get("id")):
        kind = obj.get("type")
        return kind if isinstance(kind, str) and kind.isalnum() and kind.isascii() else "message"
    set_value = obj.get("$set")
    if isinstance(set_value, dict):
        return KIND_SET
    if _is_str(obj.get("sessionId")) and _is_str(obj.get("projectHash")):
        return KIND_HEADER
    return KIND_UNKNOWN


def _messages_of(value: Any) -> list[Record]:
    return (
        [m for m in value if isinstance(m, dict) and _is_str(m.get("id"))]
        if isinstance(value, list)
        else []
    )


def replay(
    records: Iterable[tuple[int, Mapping[str, Any]]],
) -> tuple[list[tuple[int, Record]], dict[str, Any]]:
    """The messages Gemini's loader ends with after ``records`` (``(index, record)``
    pairs), each with the index of the record that holds it now, and the metadata."""
    messages: dict[str, tuple[int, Record]] = {}  # insertion order: the conversation's
    metadata: dict[str, Any] = {}
    for index, obj in records:
        kind = record_kind(obj)
        if kind == KIND_REWIND:
            ids = list(messages)
            target = obj["$rewindTo"]
            for dropped in ids[ids.index(target) :] if target in messages else ids:
                del messages[dropped]
        elif kind == KIND_SET:
            patch = obj["$set"]
            if isinstance(patch.get("messages"), list):
                messages = {m["id"]: (index, m) for m in _messages_of(patch["messages"])}
            metadata.update(patch)
        elif kind == KIND_HEADER:
            metadata.update(obj)
            for message in _messages_of(obj.get("messages")):
                messages[message["id"]] = (index, message)
        elif kind != KIND_UNKNOWN:
            messages[obj["id"]] = (index, dict(obj))
    metadata.pop("messages", None)
    return list(messages.values()), metadata


def _parts(content: Any) -> list[Any]:
    """``content`` as a list of parts (``ensurePartArray``)."""
    if isinstance(content, list):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    if isinstance(content, str):
        return [{"text": content}]
    return [] if content is None else [content]


def message_text(content: Any) -> str:
    """The text parts of ``content`` joined ('' when none)."""
    return "".join(
        p["text"] for p in _parts(content) if isinstance(p, dict) and _is_str(p.get("text"))
    )


#: parts the loader's ``partListUnionToString`` shows as ``[<what>]``, not as text
_MARKED_PARTS: Final = (
    "videoMetadata",
    "thought",
    "codeExecutionResult",
    "executableCode",
    "fileData",
    "functionCall",
    "functionResponse",
    "inlineData",
)


def _loader_text(content: Any) -> str:
    """``content`` as the loader's verbose ``partListUnionToString`` starts it: text
    as itself, a call, response, media or thought part as ``[…]``."""
    pieces = []
    for part in _parts(content):
        if not isinstance(part, dict):
            continue
        if any(part.get(key) is not None for key in _MARKED_PARTS):
            pieces.append("[part]")
        elif _is_str(part.get("text")):
            pieces.append(part["text"])
    return "".join(pieces)


def _is_ignored_user(message: Mapping[str, Any]) -> bool:
    """User content a resumed history leaves out (``isIgnoredUserContent``): empty,
    a command, or Gemini's own injected context. A function response is kept."""
    text = _loader_text(message.get("content")).strip()
    return not text or text.startswith(_IGNORED_USER_PREFIXES)


def _tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("toolCalls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _thought_text(thought: Mapping[str, Any]) -> str:
    subject, description = thought.get("subject"), thought.get("description")
    text = description if isinstance(description, str) else ""
    return f"**{subject}** {text}" if subject else text


def _model_parts(message: Mapping[str, Any]) -> list[Any]:
    """The ``model`` content of a ``gemini`` message: its thoughts, content and calls
    (a resumed file's content may hold the calls and thoughts itself)."""
    content = _parts(message.get("content")) if message.get("content") else []
    if any(isinstance(p, dict) and (p.get("functionCall") or p.get("thought")) for p in content):
        return content
    parts: list[Any] = []
    thoughts = message.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else ():
        if isinstance(thought, dict):
            parts.append({"text": _thought_text(thought), "thought": True})
    parts += content
    for call in _tool_calls(message):
        call_part = {"id": call.get("id"), "name": call.get("name"), "args": call.get("args")}
        parts.append({"functionCall": call_part})
    return parts


def _responses(message: Mapping[str, Any]) -> list[Any]:
    """The ``functionResponse`` parts of a ``gemini`` message's answered calls."""
    parts: list[Any] = []
    for call in _tool_calls(message):
        result = call.get("result")
        if not result:
            continue
        if isinstance(result, str):
            answer = {
                "id": call.get("id"),
                "name": call.get("name"),
                "response": {"output": result},
            }
            parts.append({"functionResponse": answer})
        elif isinstance(result, list):
            parts += _parts(result)
        else:
            parts.append(result)
    return parts


def client_history(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``contents`` a resumed Gemini sends (module docstring): user and model
    turns, display-only and ignored user messages left out, consecutive turns of one
    role joined."""
    history: list[dict[str, Any]] = []

    def add(role: str, parts: list[Any]) -> None:
        if history and history[-1]["role"] == role:
            history[-1]["parts"] = history[-1]["parts"] + parts
        else:
            history.append({"role": role, "parts": parts})

    for message in messages:
        kind = message.get("type")
        if kind == "user" and not _is_ignored_user(message):
            add("user", _parts(message.get("content")))
        elif kind in MODEL_TYPES:
            parts = _model_parts(message)
            if parts:
                add("model", parts)
                responses = _responses(message)
                if responses:
                    add("user", responses)
    return history


def tokens_of(message: Mapping[str, Any]) -> dict[str, int] | None:
    """A model message's ``tokens`` (``None``: none recorded)."""
    tokens = message.get("tokens")
    if not isinstance(tokens, dict):
        return None
    return {k: v for k, v in tokens.items() if isinstance(v, int) and not isinstance(v, bool)}


# --- transcript.md ----------------------------------------------------------------------


def _folded(text: str) -> str:
    """Injected context as one line: ``[<first line> … N characters]``."""
    text = text.strip()
    first = text.split("\n", 1)[0].strip()
    return f"[{first} … {len(text)} characters]" if first != text else f"[{text}]"


def _response_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error", "result"):
            if _is_str(response.get(key)):
                return str(response[key])
    return orjson.dumps(response, default=str).decode() if response is not None else ""


def response_message(part: Mapping[str, Any]) -> dict[str, Any]:
    """A ``functionResponse`` part as an xcsh ``toolResult`` message."""
    answer = part["functionResponse"]
    response = answer.get("response")
    return {
        "role": "toolResult",
        "toolCallId": answer.get("id") if _is_str(answer.get("id")) else "",
        "toolName": answer.get("name") if _is_str(answer.get("name")) else "?",
        "isError": isinstance(response, dict) and "error" in response,
        "content": [{"type": "text", "text": _response_text(response)}],
    }


def part_blocks(parts: Iterable[Any]) -> list[dict[str, Any]]:
    """Text, thought, call and media parts as xcsh blocks (responses are messages of
    their own)."""
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if _is_str(part.get("text")):
            kind = "thinking" if part.get("thought") else "text"
            blocks.append({"type": kind, kind: part["text"]})
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            blocks.append(
                {
                    "type": "toolCall",
                    "id": call.get("id") or "",
                    "name": call.get("name") or "?",
                    "arguments": call.get("args") or {},
                }
            )
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            blocks.append(image_marker(data.get("mimeType"), data.get("data")))
        elif isinstance(part.get("fileData"), dict):
            blocks.append({"type": "text", "text": f"[file {part['fileData'].get('fileUri')}]"})
    return blocks


def transcript_turns(message: Mapping[str, Any], shown_results: set[str]) -> list[dict[str, Any]]:
    """One message's turns in the xcsh shape: a user text (injected context folded), an
    assistant message with its thoughts and calls followed by one ``toolResult`` per
    answered call, a display-only message as ``system``. A result already shown (its id
    in ``shown_results``, which this updates) is not shown twice."""
    kind = message.get("type")
    content = message.get("content")
    if kind in _DISPLAY_ONLY:
        return [{"role": "system", "content": f"[{kind}] {message_text(content)}"}]
    if kind in MODEL_TYPES:
        turns: list[dict[str, Any]] = [
            {"role": "assistant", "content": part_blocks(_model_parts(message))}
        ]
        for part in _responses(message):
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                shown_results.add(str(part["functionResponse"].get("id")))
                turns.append(response_message(part))
        return turns
    if kind != "user":
        return []
    parts = _parts(content)
    turns = []
    for part in parts:
        answer = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(answer, dict) and str(answer.get("id")) not in shown_results:
            shown_results.add(str(answer.get("id")))
            turns.append(response_message(part))
    text = message_text(content)
    if text.lstrip().startswith(_IGNORED_USER_PREFIXES[2:]):
        return [{"role": "user", "content": _folded(text)}, *turns]
    said = [p for p in parts if not (isinstance(p, dict) and p.get("functionResponse"))]
    blocks = part_blocks(said)
    return ([{"role": "user", "content": blocks}] if blocks else []) + turns
