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
from functools import partial
from itertools import islice
from typing import Any, BinaryIO, NamedTuple

import orjson

from sessionfs.view.render import PRETTY_GROWTH_LIMIT, PRETTY_SLACK, TOO_DEEP

__all__ = ["write_context_json"]

#: What a list's item lines get added to sit inside the context's top level object
#: (pretty form): a list encoded alone indents them by two, the context by four.
_CHUNK_INDENT = b"\n  "
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
    chunk: int = 1,
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
    it = iter(messages)
    while taken := list(islice(it, chunk)):
        # One encoding held at a time, let go as soon as it is copied: orjson's bytes of
        # a long string take ~9 times its length until they go (66 MB for a tool
        # output of 7 MB), so measured first, and the indented copy kept, not both;
        # the comma goes out on its own (no third copy to join them).
        if measure is not None:
            compact += _compact_length(taken, measure) + (1 if items else 0)
        encoded = _items(taken, encode, pretty)
        if pretty:
            encoded = encoded.replace(b"\n", _CHUNK_INDENT)
        if items:
            put(b",")
        put(encoded)
        del encoded
        items += len(taken)
    if pretty and items:
        put(b"\n  ")
    put(rest[len(opening) :] + b"\n")
    return _Written(written, added, compact if measure is not None else None)


def _items(chunk: list[Any], encode: Encode, pretty: bool) -> bytes:
    """The items of ``chunk`` encoded as a list's, without its brackets: pretty, each
    on its own line indented by two (the list's own level). One encoding call for the
    chunk; when that fails (a list adds a level of nesting: orjson's depth limit may
    be met in the chunk only), one a message, which fails as the document's would."""
    try:
        return encode(chunk)[1 : -2 if pretty else -1]
    except (TypeError, RecursionError, ValueError):
        if pretty:
            return b",".join(b"\n  " + encode(m).replace(b"\n", b"\n  ") for m in chunk)
        return b",".join(encode(m) for m in chunk)


def _compact_length(chunk: list[Any], measure: Encode) -> int:
    """The length of ``chunk``'s items in the compact form, with the commas between."""
    try:
        return len(measure(chunk)) - 2
    except (TypeError, RecursionError, ValueError):
        return sum(len(measure(m)) for m in chunk) + len(chunk) - 1


def _write_form(
    context: dict[str, Any],
    messages: Callable[[], Iterable[Any]],
    out: Sink,
    pretty: bool,
    chunk: int = 1,
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
        return _write_document(context, messages(), out, fast, pretty, measure, chunk)
    except TypeError:
        _rewind(out, start)
        return _write_document(context, messages(), out, slow, pretty, chunk=chunk)


def _rewind(out: Sink, start: int) -> None:
    out.seek(start)
    out.truncate()


def write_context_json(
    context: dict[str, Any],
    messages: Callable[[], Iterable[Any]],
    out: BinaryIO,
    chunk: int = 1,
) -> None:
    """Write ``render.context_json`` of ``context`` (its ``messages`` replaced by what
    ``messages()`` yields; called again for each pass) to ``out`` from where it is.
    ``chunk``: how many messages are held and encoded at a time (one encoding call for
    them: the Python around a call a message was a third of the time to write a
    context of 200,000 short messages); the caller knows how big they can be."""
    start = out.tell()
    form = partial(_write_form, chunk=chunk)
    try:
        length, added, compact = form(context, messages, out, pretty=True)
        compact_at_least = length - added  # all indentation adds is spaces and newlines
        if (
            length <= PRETTY_SLACK
            or length <= PRETTY_GROWTH_LIMIT * compact_at_least + PRETTY_SLACK
        ):
            return
        if compact is None:  # Python's encoding: its compact form is counted apart
            try:
                compact = form(context, messages, _Counted(), pretty=False).length
            except (RecursionError, ValueError):
                compact = len(TOO_DEEP)
        if length <= PRETTY_GROWTH_LIMIT * compact + PRETTY_SLACK:
            return
    except (RecursionError, ValueError):
        pass
    _rewind(out, start)
    try:
        form(context, messages, out, pretty=False)
    except (RecursionError, ValueError):
        _rewind(out, start)
        out.write(TOO_DEEP)
