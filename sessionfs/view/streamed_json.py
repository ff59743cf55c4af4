"""``context.json`` written a message at a time: ``write_context_json``.

`sessionfs.view.render.context_json` encodes the whole context at once: for a session
file of 500 MB that is the file's messages as dicts, then their JSON, in one process.
Here the context comes without its messages, and the messages one by one (parsed from
their lines as they are written), so what is held is one message and its JSON.

The bytes are exactly `render.pretty_json`'s of the whole context (the tests compare
them), fallbacks included: each is a property of the whole document, so meeting one
starts the writing again in that form --

* a value orjson cannot encode (a lone surrogate): Python's encoder, ASCII output, for
  the whole document (`core.jsonl.dumps_pretty`);
* nesting too deep even for that: the compact form (`render.compact_json`), and past
  that the `render.TOO_DEEP` note;
* indentation that makes the pretty form more than `render.PRETTY_GROWTH_LIMIT` times
  the compact one: the compact form (its length counted in a second pass first).

The context's ``messages`` key comes first (`core.context.empty_context`), so the
document is: the part before the list, the list's items, the part after.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

import orjson

from sessionfs.view.render import PRETTY_GROWTH_LIMIT, PRETTY_SLACK, TOO_DEEP

__all__ = ["write_context_json"]

#: The indentation of a list item inside the context's top level object (pretty form).
_ITEM_INDENT = b"\n    "
Encode = Callable[[Any], bytes]


def _orjson_pretty(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2)


def _python_pretty(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=True, indent=2, separators=(",", ": ")).encode()


def _orjson_compact(obj: Any) -> bytes:
    return orjson.dumps(obj)


def _python_compact(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()


class _Counted:
    """A sink that only counts what a write would put out (the growth check's second
    pass), rewound as a file is."""

    def __init__(self) -> None:
        self.length = 0

    def write(self, data: bytes) -> int:
        self.length += len(data)
        return len(data)

    def tell(self) -> int:
        return self.length

    def seek(self, offset: int) -> int:
        self.length = offset
        return offset

    def truncate(self) -> int:
        return self.length


Sink = BinaryIO | _Counted


def _write_document(
    context: dict[str, Any], messages: Iterable[Any], out: Sink, encode: Encode, pretty: bool
) -> tuple[int, int]:
    """Write the context with ``messages`` as its ``messages`` list, each part encoded
    by ``encode`` (pretty: indented as inside the whole). Returns (bytes written,
    spaces and newlines among them: what indentation may have added)."""
    rest = encode({**context, "messages": []})
    opening = b'{\n  "messages": [' if pretty else b'{"messages":['
    if not rest.startswith(opening + b"]"):  # "messages" is the first key of a context
        raise AssertionError(f"not a context: {rest[:40]!r}")
    written = added = 0

    def put(data: bytes) -> None:
        nonlocal written, added
        out.write(data)
        written += len(data)
        if pretty:
            added += data.count(b"\n") + data.count(b" ")

    put(opening)
    items = 0
    for message in messages:
        item = encode(message)
        if pretty:
            put((b"," if items else b"") + _ITEM_INDENT + item.replace(b"\n", _ITEM_INDENT))
        else:
            put(b"," + item if items else item)
        items += 1
    if pretty and items:
        put(b"\n  ")
    put(rest[len(opening) :] + b"\n")
    return written, added


def _write_form(
    context: dict[str, Any], messages: Callable[[], Iterable[Any]], out: Sink, pretty: bool
) -> tuple[int, int]:
    """The document in one form: orjson's encoding, or Python's (ASCII) for the whole
    when orjson cannot encode a value (`core.jsonl._dumps`)."""
    start = out.tell()
    fast, slow = (_orjson_pretty, _python_pretty) if pretty else (_orjson_compact, _python_compact)
    try:
        return _write_document(context, messages(), out, fast, pretty)
    except TypeError:
        _rewind(out, start)
        return _write_document(context, messages(), out, slow, pretty)


def _rewind(out: Sink, start: int) -> None:
    out.seek(start)
    out.truncate()


def write_context_json(
    context: dict[str, Any], messages: Callable[[], Iterable[Any]], out: BinaryIO
) -> None:
    """Write ``render.context_json`` of ``context`` (its ``messages`` replaced by what
    ``messages()`` yields; called again for each pass) to ``out`` from where it is."""
    start = out.tell()
    try:
        length, added = _write_form(context, messages, out, pretty=True)
        compact_at_least = length - added  # all indentation adds is spaces and newlines
        if (
            length <= PRETTY_SLACK
            or length <= PRETTY_GROWTH_LIMIT * compact_at_least + PRETTY_SLACK
        ):
            return
        counted = _Counted()
        try:
            compact = _write_form(context, messages, counted, pretty=False)[0]
        except (RecursionError, ValueError):
            compact = len(TOO_DEEP)
        if length <= PRETTY_GROWTH_LIMIT * compact + PRETTY_SLACK:
            return
    except (RecursionError, ValueError):
        pass
    _rewind(out, start)
    try:
        _write_form(context, messages, out, pretty=False)
    except (RecursionError, ValueError):
        _rewind(out, start)
        out.write(TOO_DEEP)
