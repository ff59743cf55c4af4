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
  the compact one: the compact form (its length measured on the way: each message is
  encoded both ways as it is written).

The context's ``messages`` key comes first (`core.context.empty_context`), so the
document is: the part before the list, the list's items, the part after.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, NamedTuple

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


class _Written(NamedTuple):
    """What `_write_document` wrote: its length, the spaces and newlines among it (all
    that indentation may have added), and the length of the compact form when it was
    measured on the way (``None``: not measured)."""

    length: int
    added: int
    compact: int | None


def _write_document(
    context: dict[str, Any],
    messages: Iterable[Any],
    out: Sink,
    encode: Encode,
    pretty: bool,
    measure: Encode | None = None,
) -> _Written:
    """Write the context with ``messages`` as its ``messages`` list, each part encoded
    by ``encode`` (pretty: indented as inside the whole). ``measure``: the compact
    encoding, whose length is added up on the way (a message is parsed once, encoded
    twice: the growth check needs no second pass over the file)."""
    rest = encode({**context, "messages": []})
    opening = b'{\n  "messages": [' if pretty else b'{"messages":['
    if not rest.startswith(opening + b"]"):  # "messages" is the first key of a context
        raise AssertionError(f"not a context: {rest[:40]!r}")
    written = added = 0
    compact = len(measure({**context, "messages": []})) + 1 if measure is not None else 0

    def put(data: bytes) -> None:
        nonlocal written, added
        out.write(data)
        written += len(data)
        if pretty:
            added += data.count(b"\n") + data.count(b" ")

    put(opening)
    items = 0
    for message in messages:
        # One encoding held at a time, let go as soon as it is copied: orjson's bytes of
        # a long string take ~9 times its length until they go (66 MB for a tool
        # output of 7 MB), so measured first, and the indented copy kept, not both.
        if measure is not None:
            compact += len(measure(message)) + (1 if items else 0)
        item = encode(message)
        if pretty:
            item = item.replace(b"\n", _ITEM_INDENT)
            put(b"," + _ITEM_INDENT if items else _ITEM_INDENT)
            put(item)
        else:
            put(b"," + item if items else item)
        del item
        items += 1
    if pretty and items:
        put(b"\n  ")
    put(rest[len(opening) :] + b"\n")
    return _Written(written, added, compact if measure is not None else None)


def _write_form(
    context: dict[str, Any], messages: Callable[[], Iterable[Any]], out: Sink, pretty: bool
) -> _Written:
    """The document in one form: orjson's encoding, or Python's (ASCII) for the whole
    when orjson cannot encode a value (`core.jsonl._dumps`). The pretty one made by
    orjson measures its compact form too (orjson encodes it then: the same values)."""
    start = out.tell()
    if pretty:
        fast, slow, measure = _orjson_pretty, _python_pretty, _orjson_compact
    else:
        fast, slow, measure = _orjson_compact, _python_compact, None
    try:
        return _write_document(context, messages(), out, fast, pretty, measure)
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
        length, added, compact = _write_form(context, messages, out, pretty=True)
        compact_at_least = length - added  # all indentation adds is spaces and newlines
        if (
            length <= PRETTY_SLACK
            or length <= PRETTY_GROWTH_LIMIT * compact_at_least + PRETTY_SLACK
        ):
            return
        if compact is None:  # Python's encoding: its compact form is counted apart
            try:
                compact = _write_form(context, messages, _Counted(), pretty=False).length
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
