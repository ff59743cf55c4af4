"""Renderings of core objects for people: pretty JSON (``stats.json`` too), Markdown
transcript, tree text, ``key: value`` status. Pure functions over plain dicts; no FUSE, no I/O.

Every rendering returns the exact bytes a file shows, so ``st_size`` can be the
length of the same bytes ``read`` returns.

Every rendering is bounded by a small multiple of what it shows as stored, whatever
the data's shape (filesystem spec, "Scale"): pretty JSON falls back to compact JSON
when indentation would multiply it (a deeply nested value), and ``tree.txt`` caps
its indentation (a comb-shaped tree would otherwise grow with depth squared).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from core.blobs import parse_blob_ref
from core.context import path_to_root
from core.entry_text import describe_entry, kind_of, one_line
from core.jsonl import dumps_line, dumps_pretty, exact_bytes

if TYPE_CHECKING:
    from core.formats.base import SessionSource

__all__ = [
    "context_json",
    "index_flags",
    "pretty_json",
    "pretty_json_size",
    "source_tree_text",
    "status_text",
    "title_text",
    "transcript_md",
    "transcript_md_of_turns",
    "transcript_md_sections",
    "tree_rows",
    "tree_text",
]

Entry = dict[str, Any]
T = TypeVar("T")

TREE_TEXT_CHARS = 60
#: Lines of ``tree.txt`` joined and encoded at once (`_tree_lines`).
TREE_LINES_ENCODED_AT_ONCE = 4096
#: Indentation levels ``tree.txt`` shows; deeper lines say ``[depth N]`` instead.
TREE_MAX_INDENT = 64
#: Pretty JSON may be this many times its compact form (plus `PRETTY_SLACK` bytes)
#: before the compact form is shown instead: indentation grows with nesting depth, so
#: a value nested 255 levels deep would otherwise render ~250 times its size.
PRETTY_GROWTH_LIMIT = 4
PRETTY_SLACK = 4096
#: What a value too deeply nested for any JSON encoder shows (a JSON string).
TOO_DEEP = b'"(sessionfs: nested too deeply to render; see the session file)"\n'


def compact_json(obj: Any) -> bytes:
    """One line of JSON + newline; a value too deep even for the stdlib encoder (Python's
    recursion limit) becomes the `TOO_DEEP` note instead of an error."""
    try:
        return exact_bytes(dumps_line(obj))
    except (RecursionError, ValueError):
        return TOO_DEEP


def pretty_json(obj: Any) -> bytes:
    """Two-space indented JSON + newline: entries, header, context all look alike.

    Bounded: beyond orjson's nesting limit, or when indentation would make it more
    than `PRETTY_GROWTH_LIMIT` times the compact JSON, the compact JSON is shown.
    """
    return exact_bytes(_pretty_json_as_made(obj))


def pretty_json_size(obj: Any) -> int:
    """``len(pretty_json(obj))``, without the copy that trims what is kept (an
    ``entries/`` listing measures every entry file and keeps none)."""
    return len(_pretty_json_as_made(obj))


def _pretty_json_as_made(obj: Any) -> bytes:
    """`pretty_json`'s bytes, in the buffer the encoder made (maybe bigger)."""
    try:
        pretty = dumps_pretty(obj)
    except (RecursionError, ValueError):
        return compact_json(obj)
    if len(pretty) <= PRETTY_SLACK or _surely_within_growth_limit(pretty):
        return pretty  # the common case: no second encoding
    compact = compact_json(obj)
    if len(pretty) > PRETTY_GROWTH_LIMIT * len(compact) + PRETTY_SLACK:
        return compact
    return pretty


def _surely_within_growth_limit(pretty: bytes) -> bool:
    """Whether ``pretty`` is within `PRETTY_GROWTH_LIMIT` of its compact form, told from
    its own bytes (a context.json of a few MB is then encoded once, not twice). All the
    pretty form adds is newlines and spaces: each line's indentation (two spaces a
    level), one space after each key's colon, and a newline per line (a newline in a
    string is escaped). Every line but the outermost value's first and last is indented,
    so the newlines are at most half the spaces plus 2 (its closing line's and the one
    appended); and counting every space (strings hold more) overestimates the rest. So
    what was added is at most ``1.5 * spaces + 2``, and the compact form at least what
    is left. One count of one byte: two counts (spaces, newlines) took 0.8 ms of a
    2.4 MB session's first ``context.json``, the count of every ``"  "`` and ``": "``
    before them 10 ms (issue 26)."""
    spaces = pretty.count(b" ")
    added = spaces + spaces // 2 + 2
    return len(pretty) <= PRETTY_GROWTH_LIMIT * (len(pretty) - added) + PRETTY_SLACK


def context_json(context: Mapping[str, Any]) -> bytes:
    return pretty_json(context)


def title_text(header: Mapping[str, Any]) -> bytes:
    title = header.get("title")
    return (title + "\n").encode("utf-8", "surrogatepass") if isinstance(title, str) else b""


def status_text(pairs: Iterable[tuple[str, Any]]) -> bytes:
    """``key: value`` lines (the ``ctl`` files); ``None`` shows as an empty value."""
    lines = []
    for key, value in pairs:
        if value is None:
            text = ""
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = " ".join(str(value).split("\n"))
        lines.append(f"{key}: {text}\n")
    return "".join(lines).encode("utf-8", "surrogatepass")


# --- transcript.md ------------------------------------------------------------------
#
# The transcript is built as one list of pieces, encoded piece by piece and joined once:
# a tool output (most of a session's bytes) is copied by its encoding and the join and
# nowhere else (no intermediate f-strings, block joins or concatenations around it). A
# first ``grep -r`` over ``transcripts/`` renders every session: this is its inner loop.

_Add = Callable[[str], None]


#: Backticks `_has_fence` looks at one by one before it searches for three in a row.
_BACKTICKS_LOOKED_AT = 8


def _has_fence(text: str) -> bool:
    """``"```" in text``, faster where it matters: a search for a 3-character string
    reads every character (~1 ms a MB: 40 % of a transcript's rendering, since every
    tool output is searched), one for a single character is a ``memchr`` (~0.1 ms a
    MB). Most tool output holds no backtick, or a few; text with many (Markdown full
    of inline code) is searched as before after the first `_BACKTICKS_LOOKED_AT`."""
    find = text.find
    at = find("`")
    for _ in range(_BACKTICKS_LOOKED_AT):
        if at < 0:
            return False
        if text.startswith("``", at + 1):
            return True
        at = find("`", at + 1)
    return at >= 0 and find("```", at) >= 0


def _fence_ticks(text: str) -> str:
    """Backticks for a code fence longer than any backtick run inside ``text`` (so it
    cannot break)."""
    if not _has_fence(text):  # the common case: only then is the longest run worth finding
        return "```"
    return "`" * (max(len(run) for run in re.findall(r"`+", text)) + 1)


def _add_fenced(add: _Add, text: str, info: str = "") -> None:
    ticks = _fence_ticks(text)
    add(f"{ticks}{info}\n")
    add(text)
    add(f"\n{ticks}\n" if not text.endswith("\n") else f"{ticks}\n")


def _quote(text: str) -> str:
    """Every line as ``> line`` (an empty one as ``>``): two ``str.replace`` passes
    instead of a string per line. A line is empty where ``> `` stands between two
    newlines; one pass skips every second of a run of empty lines (the matches share a
    newline), the second pass gets those."""
    quoted = "\n> " + text.replace("\n", "\n> ") + "\n"
    if "\n> \n" in quoted:
        quoted = quoted.replace("\n> \n", "\n>\n").replace("\n> \n", "\n>\n")
    return quoted[1:]


def _image(block: Mapping[str, Any]) -> str:
    for value in (block.get("data"), block.get("image_url"), block.get("url")):
        sha = parse_blob_ref(value)
        if sha is not None:
            return f"![image](blobs/{sha})\n"
    mime = block.get("mimeType") or block.get("mime_type") or "image"
    data = block.get("data")
    size = len(data) if isinstance(data, str) else 0
    return f"*[inline {mime}, {size} base64 characters]*\n"


def _json_text(value: Any) -> str:
    return _pretty_json_as_made(value).decode("utf-8", "replace")  # (no trimmed copy: decoded)


def _add_text(add: _Add, text: str, fenced_text: bool) -> None:
    if fenced_text:
        _add_fenced(add, text)
        return
    add(text)
    if not text.endswith("\n"):
        add("\n")


def _add_block(add: _Add, block: Any) -> bool:
    """Add the pieces of one content block other than text (`_add_content` adds those);
    False when it shows nothing (a thinking block whose thinking is not a string)."""
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "thinking":
            thinking = block.get("thinking")
            if not isinstance(thinking, str):
                return False
            add(_quote(thinking))
            return True
        if kind == "toolCall":
            add(f"**tool call** `{block.get('name', '?')}` `{block.get('id', '')}`\n\n")
            _add_fenced(add, _json_text(block.get("arguments", {})), "json")
            return True
        if kind == "image" or "image_url" in block:
            add(_image(block))
            return True
    _add_fenced(add, _json_text(block), "json")  # anything else, as it is
    return True


def _add_content(out: list[str], content: Any, fenced_text: bool = False) -> None:
    """The message's content: a string, or its blocks separated by a blank line (a
    block that shows nothing takes no separator)."""
    if content is None:
        return
    add = out.append
    if isinstance(content, str):
        _add_text(add, content, fenced_text)
        return
    separate = False
    for block in content if isinstance(content, list) else [content]:
        if separate:
            add("\n")
        # A text block (most are) or a bare string is added here, one call instead of
        # two; any other block, or a text block whose text is no string, by `_add_block`.
        if isinstance(block, dict):
            text = block.get("text") if block.get("type") == "text" else None
        else:
            text = block
        if isinstance(text, str):
            _add_text(add, text, fenced_text)
            separate = True
        elif _add_block(add, block):
            separate = True
        elif separate:
            out.pop()


def _add_message_body(out: list[str], message: Mapping[str, Any]) -> None:
    add = out.append
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        summary = message.get("summary")
        if isinstance(summary, str):
            add(summary)
            add("\n")
    elif role == "toolResult":
        head = f"result of `{message.get('toolName', '?')}` `{message.get('toolCallId', '')}`"
        add(f"{head} (error)\n\n" if message.get("isError") else f"{head}\n\n")
        _add_content(out, message.get("content"), fenced_text=True)
    elif role in ("bashExecution", "pythonExecution"):
        lang = "sh" if role == "bashExecution" else "python"
        code = message.get("command") or message.get("code") or ""
        output = message.get("output") or ""
        _add_fenced(add, str(code), lang)
        if output:
            add("\n")
            _add_fenced(add, str(output))
        if message.get("exitCode") not in (None, 0):
            add(f"\nexit code {message.get('exitCode')}\n")
    else:
        _add_content(out, message.get("content"))


def transcript_md(
    title: str | None, messages: Sequence[Mapping[str, Any]], sources: Sequence[Entry] | None
) -> bytes:
    """The context as Markdown: one ``## <role> · <entry id> · <time>`` section each."""
    if sources is None:
        return transcript_md_of_turns(title, ((message, "?", "") for message in messages))
    turns = (
        (message, entry.get("id", "?"), entry.get("timestamp", ""))
        for message, entry in zip(messages, sources, strict=True)
    )
    return transcript_md_of_turns(title, turns)


def transcript_md_of_turns(
    title: str | None, turns: Iterable[tuple[Mapping[str, Any], Any, Any]]
) -> bytes:
    """`transcript_md` from (message, entry id, time) per turn (what a `SessionSource`
    gives: no dict made per turn to carry its id and time): every piece of
    `_add_sections`, encoded once each and joined once."""
    parts: list[str] = []
    for _ in _add_sections(parts, title, turns):
        pass
    return _utf8_pieces(parts)


def transcript_md_sections(
    title: str | None, turns: Iterable[tuple[Mapping[str, Any], Any, Any]]
) -> Iterator[bytes]:
    """`transcript_md`'s bytes a section at a time, from (message, entry id, time) per
    turn: joined, exactly its bytes, and never more than one message's in memory (a
    session file too big to hold, `sessionfs.view.streamed_render`)."""
    parts: list[str] = []
    for _ in _add_sections(parts, title, turns):
        yield _utf8_pieces(parts)
        parts.clear()


def _add_sections(
    parts: list[str], title: str | None, turns: Iterable[tuple[Mapping[str, Any], Any, Any]]
) -> Iterator[None]:
    """Add the transcript's pieces to ``parts``, pausing after each section: the
    title's, then one ``## <role> · <entry id> · <time>`` section per turn. (One list
    for the whole transcript: a list made per section costs ~4 % of the rendering.)"""
    add = parts.append
    add(f"# {title}\n" if title else "# (untitled session)\n")
    yield
    for message, entry_id, when in turns:
        add(f"\n## {message.get('role', '?')} · {entry_id} · {when}\n\n")
        _add_message_body(parts, message)
        yield


def _utf8_pieces(parts: list[str]) -> bytes:
    """``"".join(parts)`` as UTF-8, encoded piece by piece: an ASCII piece (most tool
    output) encodes as a plain copy, whereas the joined string would take the widest
    kind of any piece (the headings' ``·`` alone makes it Latin-1, whose encoding
    converts every character) and an emoji anywhere would make it four bytes a char."""
    try:
        return b"".join([part.encode() for part in parts])
    except UnicodeEncodeError:  # lone surrogates from odd JSON: the slow way
        return b"".join([part.encode("utf-8", "surrogatepass") for part in parts])


# --- tree.txt -----------------------------------------------------------------------


def one_line_text(entry: Entry) -> str:
    """A short human description of an entry: its text, summary or setting."""
    return one_line(describe_entry(entry), TREE_TEXT_CHARS)


def _indent(level: int, branch_start: bool) -> str:
    """Two spaces per level (``+ `` on the first entry of a branch), at most
    `TREE_MAX_INDENT` levels; a deeper line names its depth instead, so a line's length
    never depends on how deep the tree is."""
    shown = min(level, TREE_MAX_INDENT)
    indent = "  " * (shown - 1) + "+ " if branch_start else "  " * shown
    return indent + f"[depth {level}] " if level > TREE_MAX_INDENT else indent


def tree_rows(
    roots: Sequence[T], children: Callable[[T], Sequence[T]]
) -> Iterator[tuple[T, int, bool]]:
    """``(node, level, branch_start)`` per node in ``tree.txt``'s order (depth first,
    children in order): a chain stays at its level and only a fork's children go one
    level deeper, ``branch_start`` on each of them. Iterative: a 100,000-entry chain is
    one level, and never 100,000 frames deep."""
    stack: list[tuple[T, int, bool]] = [(r, 0, False) for r in reversed(roots)]
    while stack:
        node, level, branch_start = stack.pop()
        yield node, level, branch_start
        kids = children(node)
        forks = len(kids) > 1
        for kid in reversed(kids):
            stack.append((kid, level + 1 if forks else level, forks))


def _tree_lines(
    roots: Sequence[T], children: Callable[[T], Sequence[T]], describe: Callable[[T], str]
) -> bytes:
    """The lines of a tree, one per node (`tree_rows`), indented per branch (`_indent`),
    encoded `TREE_LINES_ENCODED_AT_ONCE` at a time: a str of every line (and the list
    of them) never lives beside the bytes (a 200,000-entry tree's ~40 MB more)."""
    pieces: list[bytes] = []
    lines: list[str] = []
    for node, level, branch_start in tree_rows(roots, children):
        lines.append(f"{_indent(level, branch_start)}{describe(node)}\n")
        if len(lines) == TREE_LINES_ENCODED_AT_ONCE:
            pieces.append("".join(lines).encode("utf-8", "surrogatepass"))
            lines.clear()
    pieces.append("".join(lines).encode("utf-8", "surrogatepass"))
    return b"".join(pieces)


def tree_text(
    roots: Sequence[Mapping[str, Any]], leaf_id: str | None, by_id: Mapping[str, Entry]
) -> bytes:
    """The whole tree, one line per entry: ``* id kind text [label]``.

    ``roots`` is core's ``get_tree()`` (``{entry, children, label}`` nodes, children
    oldest first by parsed timestamp, parent cycles cut), so the order is core's.
    A chain stays at one depth and only forks indent (``+`` marks the first entry of
    each branch), so a 100,000-entry linear session is not 100,000 levels deep; the
    indentation is capped (`_indent`).

    No view calls it: every session's ``tree.txt`` is `source_tree_text`. It is the
    definition over core's tree of entries that one is held to
    (tests/view/test_xcsh_stats.py), kept here beside the line making both share.
    """
    on_path = {id(e) for e in path_to_root(leaf_id, by_id)}

    def describe(node: Mapping[str, Any]) -> str:
        entry = node["entry"]
        mark = "*" if id(entry) in on_path else " "
        line = f"{mark} {entry.get('id')} {kind_of(entry)}"
        text = one_line_text(entry)
        if text:
            line += f" {text}"
        label = node.get("label")
        return f"{line} [{label}]" if label else line

    return _tree_lines(roots, lambda node: node["children"], describe)


def index_flags(count: int, indexes: Iterable[int]) -> bytearray:
    """A flag for each of ``count`` entries, set for ``indexes``: a byte an entry
    rather than a set of ints (the path of a 200,000-entry chain is every entry)."""
    flags = bytearray(count)
    for index in indexes:
        flags[index] = 1
    return flags


def source_tree_text(source: SessionSource) -> bytes:
    """``tree.txt`` of any agent's session (`SessionSource`): the same lines as
    `tree_text`, with the entry names ``entries/`` shows before encoding."""
    on_path = index_flags(len(source), source.path_indexes())
    labels = source.labels()

    def describe(index: int) -> str:
        mark = "*" if on_path[index] else " "
        line = f"{mark} {source.entry_tree_name(index)} {source.entry_kind(index)}"
        text = " ".join(source.entry_text(index).split())[:TREE_TEXT_CHARS]
        if text:
            line += f" {text}"
        label = labels.get(source.entry_name(index))
        return f"{line} [{label}]" if label else line

    # (each family copied out of the forest's array as it is reached: a list of one
    # family at a time, none of every entry's children)
    forest = source.forest()
    return _tree_lines(forest.roots, forest.children.__getitem__, describe)
