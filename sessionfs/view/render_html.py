"""``transcript.html`` and ``branches/<tip>.html``: a conversation as one page to read.

One self-contained page per branch (`sessionfs.view.branch_pages`): the same turns as
``transcript.md`` (`SessionSource.transcript_messages`, or ``_at`` a tip for a branch
page), thinking and tool calls folded in ``<details>``, long tool results folded with
their first line showing, images inlined as ``data:`` URIs within caps
(`sessionfs.view.html_images`), labels as badges, compactions and branch summaries
marked, and at each branch point of the path a link to every other branch's page.
Light or dark as the reader's system prefers; no script, font, or anything else
fetched: the page's own Content-Security-Policy forbids it (``default-src 'none'``,
images only from ``data:`` and the mount, the one style block by its hash).

A session is untrusted input: every string from it goes through `html.escape`, every
link is built from an ``entries/`` or ``blobs/`` file name and percent-encoded whole
(so it is always a relative path, never ``javascript:`` or another scheme), and only
sniffed image bytes become ``data:`` URIs. Bounded like ``transcript.md``: text is
escaped once (at most 6 bytes per byte of the message, usually 1), each fork shows at
most `BRANCH_LINKS` links, and inlined images stop at the page's image budget.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol
from urllib.parse import quote

from core.blobs import parse_blob_ref
from core.formats.base import SessionSource, TranscriptMessage
from sessionfs.view.branch_pages import BRANCHES_DIR, branch_tip, page_name
from sessionfs.view.html_images import (
    ImageBudget,
    ImageSource,
    decode_base64_image,
    sniff_image_type,
)
from sessionfs.view.names import entry_file_names_when_asked
from sessionfs.view.render import index_flags, pretty_json

__all__ = [
    "BRANCH_LINKS",
    "FOLD_CHARS",
    "FOLD_LINES",
    "PAGE_CSS",
    "transcript_html",
    "transcript_html_pieces",
]

#: A tool result or output longer than this (lines or characters) is folded.
FOLD_LINES: Final = 12
FOLD_CHARS: Final = 1500
#: Links a fork shows to other branches; the rest are counted (all are in branches/).
BRANCH_LINKS: Final = 50
#: Entries down a branch a link looks for the first message to describe it by.
LINK_LOOKAHEAD: Final = 8
#: Characters of an entry's text a branch link shows.
LINK_TEXT_CHARS: Final = 70

PAGE_CSS: Final = """\
:root{color-scheme:light dark;--bg:#f7f7f5;--card:#fff;--fg:#1f2328;--muted:#656d76;
--line:#d8dee4;--code:#f1f3f5;--user:#2f6fdb;--assistant:#8250df;--tool:#1a7f37;
--error:#cf222e;--note:#9a6700;--label-bg:#fff1c2;--label-fg:#6b4b00;--link:#0b5cd5}
@media (prefers-color-scheme:dark){:root{--bg:#0f1216;--card:#171b21;--fg:#e6edf3;
--muted:#8d96a0;--line:#2d333b;--code:#0b0e12;--user:#6ca4ff;--assistant:#b694f5;
--tool:#48c16b;--error:#ff7b72;--note:#d4a72c;--label-bg:#3d3100;--label-fg:#f2cc60;
--link:#79b8ff}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.6 system-ui,-apple-system,
"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif}
main{max-width:54rem;margin:0 auto;padding:1.5rem 1rem 4rem}
a{color:var(--link)}
h1{font-size:1.45rem;line-height:1.3;margin:.2rem 0 .4rem;overflow-wrap:anywhere}
.meta{color:var(--muted);font-size:.85rem;margin:0 0 1.2rem}
.meta span+span::before{content:" · "}
.msg{background:var(--card);border:1px solid var(--line);border-left:4px solid var(--edge,
var(--line));border-radius:8px;margin:.9rem 0;padding:.55rem .9rem .7rem}
.msg>header{display:flex;flex-wrap:wrap;gap:.25rem .6rem;align-items:baseline;
font-size:.78rem;color:var(--muted);margin-bottom:.3rem}
.msg>header a{color:var(--muted);text-decoration:none;font-family:ui-monospace,
"DejaVu Sans Mono",monospace}
.msg>header a:hover{text-decoration:underline}
.role{font-weight:650;text-transform:uppercase;letter-spacing:.05em;color:var(--edge,
var(--muted))}
.user{--edge:var(--user)}.assistant{--edge:var(--assistant)}
.toolResult,.bashExecution,.pythonExecution{--edge:var(--tool)}
.is-error{--edge:var(--error)}
.compactionSummary,.branchSummary,.custom,.note{--edge:var(--note)}
.system,.developer{--edge:var(--muted)}
.text{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2rem 0}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.35rem 0;padding:.5rem .7rem;
background:var(--code);border:1px solid var(--line);border-radius:6px;
font:12.5px/1.45 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
details{margin:.35rem 0}
summary{cursor:pointer;color:var(--muted);font-size:.86rem}
summary code,.msg>header code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;
color:var(--fg)}
details.thinking>.text{color:var(--muted);font-style:italic;border-left:2px solid
var(--line);padding-left:.7rem}
.label{background:var(--label-bg);color:var(--label-fg);border-radius:999px;
padding:0 .55rem;font-weight:600;letter-spacing:.02em}
.marker{font-weight:650;color:var(--note)}
.forks{margin:.5rem 0 .2rem;padding:.4rem .7rem;border:1px dashed var(--line);
border-radius:6px;font-size:.85rem;color:var(--muted)}
.forks ul{margin:.2rem 0 0;padding-left:1.2rem}
.forks li{overflow-wrap:anywhere}
figure{margin:.4rem 0}
figure img{max-width:100%;height:auto;border-radius:6px;border:1px solid var(--line)}
figcaption,.muted{color:var(--muted);font-size:.8rem}
nav.page{font-size:.85rem;margin:0 0 1rem;color:var(--muted)}
"""
#: The page's policy: nothing runs, nothing is fetched but images from data: URIs and
#: the mount itself, and the one style block is allowed by its hash.
_STYLE_HASH = base64.b64encode(hashlib.sha256(PAGE_CSS.encode()).digest()).decode()
_CSP = (
    f"default-src 'none'; img-src data: 'self'; style-src 'sha256-{_STYLE_HASH}'; "
    "base-uri 'none'; form-action 'none'"
)

Add = Callable[[str], None]


_SPECIAL = re.compile("[&<>\"']")
#: A name that percent-encoding leaves as it is (most ids and file names).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.~-]+")


def esc(value: object) -> str:
    """Any value as HTML text (quotes too: safe inside an attribute). Text without
    anything to escape (most of it) is returned as it is, after one scan."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(text, quote=True) if _SPECIAL.search(text) else text


def href(*parts: str) -> str:
    """A relative link inside the mount, each part percent-encoded whole (no part can
    make it absolute or give it a scheme), escaped for an attribute."""
    return esc(
        "/".join(part if _PLAIN_NAME.fullmatch(part) else quote(part, safe="") for part in parts)
    )


class _Page:
    """One page being built: its pieces, links relative to where it lives."""

    def __init__(
        self,
        source: SessionSource,
        names: Sequence[str],
        up: str,
        images: ImageSource | None,
    ) -> None:
        self.source = source
        self.names = names  # entries/ file names by index
        #: "" for transcript.html, "../" for a page in branches/
        self.up = up
        self.images = images
        self.budget = ImageBudget()
        #: entries whose card carries their anchor (``#e-<entry file>``) already: a
        #: flag an entry (a set of 350,000 ints costs ~50 bytes each)
        self.anchored = bytearray(len(source))
        self.parts: list[str] = []
        self.add: Add = self.parts.append

    def link(self, *parts: str) -> str:
        return esc(self.up) + href(*parts)

    def take(self) -> bytes:
        """What was added since the last `take`, as UTF-8 (a lone surrogate is ``?``
        wherever the pieces are cut: the encoder never pairs surrogates)."""
        data = "".join(self.parts).encode("utf-8", "replace")
        self.parts.clear()
        return data

    def entry_link(self, index: int) -> str:
        """A link to entry ``index``'s file in ``entries/``, named as the session names it."""
        target = self.link("entries", self.names[index])
        return f'<a href="{target}">{esc(self.source.entry_name(index))}</a>'

    # -- blocks ----------------------------------------------------------------------

    def text(self, text: str) -> None:
        self.add('<div class="text">')
        self.add(esc(text))
        self.add("</div>\n")

    def pre(self, text: str, fold_as: str | None = None) -> None:
        """Preformatted text, folded under a summary when long (``fold_as`` names it)."""
        lines = text.count("\n") + 1
        if fold_as is not None and (lines > FOLD_LINES or len(text) > FOLD_CHARS):
            first = text.lstrip().split("\n", 1)[0][:120]
            self.add(f"<details><summary>{esc(fold_as)}: {lines} lines")
            self.add(f" \u00b7 <code>{esc(first)}</code></summary>" if first else "</summary>")
            self.add(f"<pre>{esc(text)}</pre></details>\n")
            return
        self.add(f"<pre>{esc(text)}</pre>\n")

    def json_block(self, value: Any) -> None:
        self.pre(pretty_json(value).decode("utf-8", "replace").rstrip("\n"), "JSON")

    def block(self, block: Any, as_output: bool) -> None:
        if isinstance(block, str):
            self.pre(block, "output") if as_output else self.text(block)
            return
        if not isinstance(block, dict):
            self.json_block(block)
            return
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            self.pre(text, "output") if as_output else self.text(text)
        elif kind == "thinking":
            thinking = block.get("thinking")
            if isinstance(thinking, str) and thinking:
                self.add('<details class="thinking"><summary>thinking')
                self.add(f" \u00b7 {len(thinking):,} characters</summary>")
                self.text(thinking)
                self.add("</details>\n")
        elif kind == "toolCall":
            self.add('<details class="call"><summary>tool call ')
            self.add(f"<code>{esc(block.get('name', '?'))}</code>")
            call_id = block.get("id")
            self.add(f' <span class="muted">{esc(call_id)}</span>' if call_id else "")
            self.add("</summary>")
            arguments = pretty_json(block.get("arguments", {})).decode("utf-8", "replace")
            self.add(f"<pre>{esc(arguments)}</pre>")
            self.add("</details>\n")
        elif kind == "image" or "image_url" in block:
            self.image(block)
        else:
            self.json_block(block)

    def content(self, content: Any, as_output: bool = False) -> None:
        if content is None:
            return
        if isinstance(content, str):
            self.pre(content, "output") if as_output else self.text(content)
            return
        for block in content if isinstance(content, list) else [content]:
            self.block(block, as_output)

    # -- images ----------------------------------------------------------------------

    def image(self, block: Mapping[str, Any]) -> None:
        for value in (block.get("data"), block.get("image_url"), block.get("url")):
            sha = parse_blob_ref(value)
            if sha is not None:
                self._blob_image(sha)
                return
        data = block.get("data")
        claimed = block.get("mimeType") or block.get("mime_type") or "image"
        if not isinstance(data, str):
            self.add(f'<p class="muted">[image {esc(claimed)}: no data]</p>\n')
            return
        size, raw = decode_base64_image(data, self.budget.limit())
        if size == 0:
            self.add(f'<p class="muted">[image {esc(claimed)}: its data is not base64]</p>\n')
            return
        self._figure(raw, f"{esc(claimed)}, {size:,} bytes, in the message")

    def _blob_image(self, sha: str) -> None:
        link = self.link("blobs", sha)
        if self.images is None:
            self.add(f'<p><a href="{link}">image blob {esc(sha[:12])}</a></p>\n')
            return
        found = self.images.read(sha, self.budget.limit())
        named = f'<a href="{link}">blobs/{esc(sha[:12])}\u2026</a>'
        if found.size is None:  # gone, not readable by all who read the session, or
            # not fetched yet (a store mount fetches a blob when its file is opened)
            self.add(f'<p class="muted">[image {named}: not in the blob store here]</p>\n')
            return
        self._figure(found.data, f"{named}, {found.size:,} bytes")

    def _figure(self, raw: bytes | None, caption: str) -> None:
        """An image inlined when ``raw`` is one of the whitelisted kinds (and was read
        within the budget), else its caption says why not."""
        kind = sniff_image_type(raw) if raw is not None else None
        if raw is None or kind is None:
            why = (
                "not an image type this page shows" if raw is not None else "too big to inline here"
            )
            self.add(f'<p class="muted">[image: {caption}; {why}]</p>\n')
            return
        self.budget.spend(len(raw))
        uri = f"data:{kind};base64,{base64.b64encode(raw).decode('ascii')}"
        self.add(
            f'<figure><img alt="image" src="{uri}"><figcaption>{caption}</figcaption></figure>\n'
        )

    # -- messages --------------------------------------------------------------------

    def message(self, turn: TranscriptMessage, label: str | None, index: int | None) -> None:
        message = turn.message
        role = str(message.get("role", "?"))
        classes = f"msg {esc(role)}"
        if role == "toolResult" and message.get("isError"):
            classes += " is-error"
        anchor = ""
        if index is not None and not self.anchored[index]:  # turns may share a line
            self.anchored[index] = 1
            anchor = f' id="{esc("e-" + self.names[index])}"'
        self.add(f'<section class="{classes}"{anchor}>\n<header>')
        self.add(f'<span class="role">{esc(_ROLE_NAMES.get(role, role))}</span>')
        extra = _role_detail(message)
        if extra:
            self.add(f"<span>{extra}</span>")
        if index is not None:
            self.add(self.entry_link(index))
        elif turn.entry_name:
            self.add(f"<span>{esc(turn.entry_name)}</span>")
        if turn.time:
            self.add(f'<time datetime="{esc(turn.time)}">{esc(_readable_time(turn.time))}</time>')
        if label:
            self.add(f'<span class="label">{esc(label)}</span>')
        self.add("</header>\n")
        self.body(role, message)
        self.add("</section>\n")

    def body(self, role: str, message: Mapping[str, Any]) -> None:
        if role in ("compactionSummary", "branchSummary"):
            summary = message.get("summary")
            if isinstance(summary, str):
                self.text(summary)
        elif role == "toolResult":
            self.content(message.get("content"), as_output=True)
        elif role in ("bashExecution", "pythonExecution"):
            code = message.get("command") or message.get("code") or ""
            self.add(f"<pre>{esc(code)}</pre>\n")
            output = message.get("output")
            if output:
                self.pre(str(output), "output")
            if message.get("exitCode") not in (None, 0):
                self.add(f'<p class="muted">exit code {esc(message.get("exitCode"))}</p>\n')
        elif role in ("system", "developer") or (
            role == "custom" and message.get("display") is False
        ):
            hidden = "" if role in ("system", "developer") else " (not displayed by the agent)"
            self.add(f"<details><summary>{esc(role)} message{hidden}</summary>\n")
            self.content(message.get("content"))
            self.add("</details>\n")
        else:
            self.content(message.get("content"))


_ISO_TIME = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z?)")


def _readable_time(stored: str) -> str:
    """``2026-01-01T10:00:00.123Z`` as ``2026-01-01 10:00:00 UTC``; any other form as
    it is stored."""
    match = _ISO_TIME.fullmatch(stored)
    if match is None:
        return stored
    day, clock, utc = match.groups()
    return f"{day} {clock} UTC" if utc else f"{day} {clock}"


_ROLE_NAMES: Final = {
    "toolResult": "tool result",
    "compactionSummary": "compaction",
    "branchSummary": "branch summary",
    "bashExecution": "shell",
    "pythonExecution": "python",
}


def _role_detail(message: Mapping[str, Any]) -> str:
    """What a message's header says besides its role (HTML, escaped)."""
    role = message.get("role")
    if role == "toolResult":
        name = f"<code>{esc(message.get('toolName', '?'))}</code>"
        return name + (' <span class="marker">error</span>' if message.get("isError") else "")
    if role == "compactionSummary":
        before = message.get("tokensBefore")
        told = f" ({before:,} tokens)" if isinstance(before, int) else ""
        return f'<span class="marker">the turns before this were summarised{esc(told)}</span>'
    if role == "branchSummary":
        return '<span class="marker">what another branch did</span>'
    if role == "custom":
        return f"<code>{esc(message.get('customType', ''))}</code>"
    return ""


class _Forks:
    """The labels and branch points of a page's path, placed between its messages: a
    note is shown after the message of its entry, or before the first message past it
    on the path (an entry that shows no message of its own: a setting, a label)."""

    def __init__(
        self, page: _Page, path: Sequence[int], on_current: bytearray, is_current: bool
    ) -> None:
        self.page = page
        source = page.source
        #: each entry's position on the path (-1: not on it), an int an entry (a dict
        #: of a path of 350,000 entries costs ~90 bytes each)
        self.position = array("q", [-1]) * len(source)
        for at, index in enumerate(path):
            self.position[index] = at
        labels = source.labels()
        children = source.forest().children
        self.notes: list[tuple[int, int, str | None, list[int]]] = []  # (at, index, label, others)
        for at, index in enumerate(path):
            label = labels.get(source.entry_name(index)) if labels else None
            kids = children[index]
            others = (
                [k for k in kids if at + 1 >= len(path) or k != path[at + 1]]
                if len(kids) > 1
                else []
            )
            if label or others:
                self.notes.append((at, index, label, others))
        self.children = children
        self.on_current = on_current
        self.is_current = is_current
        self.next_note = 0
        self.labelled = {index: label for _, index, label, _ in self.notes if label}

    def before(self, index: int | None) -> None:
        """Show the notes of entries on the path before ``index``."""
        at = self.position[index] if index is not None else -1
        if at >= 0:
            self._flush(lambda note_at: note_at < at)

    def after(self, index: int | None) -> None:
        at = self.position[index] if index is not None else -1
        if at >= 0:
            self._flush(lambda note_at: note_at <= at, shown=index)

    def rest(self) -> None:
        self._flush(lambda _: True)

    def _flush(self, due: Callable[[int], bool], shown: int | None = None) -> None:
        while self.next_note < len(self.notes) and due(self.notes[self.next_note][0]):
            _, index, label, others = self.notes[self.next_note]
            self.next_note += 1
            if label and index != shown:
                self._label_note(index, label)
            if others:
                self._fork(index, others)

    def _first_message(self, start: int) -> int:
        """What a link to the branch from ``start`` describes: its first message (a
        branch may start with a label or a setting), along the newest children, at
        most `LINK_LOOKAHEAD` entries down; else ``start`` itself."""
        current = start
        for _ in range(LINK_LOOKAHEAD):
            if self.page.source.entry_role(current) is not None:
                return current
            kids = self.children[current]
            if not kids:
                break
            current = kids[-1]
        return start

    def _label_note(self, index: int, label: str) -> None:
        page = self.page
        page.add(f'<p class="forks">label <span class="label">{esc(label)}</span> on ')
        page.add(f"{page.entry_link(index)} ")
        page.add(f"({esc(page.source.entry_kind(index))})</p>\n")

    def _fork(self, index: int, others: list[int]) -> None:
        page = self.page
        source = page.source
        count = len(others)
        page.add(
            f'<div class="forks"><span class="marker">Branch point: {count + 1} branches</span> '
        )
        page.add("continue from here; this page follows one. The other")
        page.add(" one:" if count == 1 else "s:")
        page.add("<ul>\n")
        for kid in others[:BRANCH_LINKS]:
            if self.on_current[kid] and not self.is_current:
                target = page.link("transcript.html")
                where = " (the current branch)"
            else:
                tip = branch_tip(self.children, kid)
                target = page.link(BRANCHES_DIR, page_name(page.names[tip]))
                where = ""
            shown = self._first_message(kid)
            text = " ".join(source.entry_text(shown).split())[:LINK_TEXT_CHARS]
            page.add(f'<li><a href="{target}">{esc(source.entry_kind(shown))}')
            page.add(f": {esc(text)}</a>{where}</li>\n" if text else f"</a>{where}</li>\n")
        if count > BRANCH_LINKS:
            page.add(f"<li>and {count - BRANCH_LINKS:,} more: ")
            page.add(f'<a href="{page.link(BRANCHES_DIR)}/">branches/</a></li>\n')
        page.add("</ul></div>\n")


def transcript_html(
    source: SessionSource, tip: str | None = None, images: ImageSource | None = None
) -> bytes:
    """``transcript.html`` (``tip`` ``None``: the session at its leaf) or the page of
    the branch ending at the entry whose ``entries/`` file is ``tip``
    (``branches/<tip>.html``; ``KeyError`` when there is no such entry)."""
    return b"".join(transcript_html_pieces(source, tip, images))


class CountedTurns(Protocol):
    """A page's turns: counted (the page's header says how many), then read in order
    (a list, or turns read from the file as they are reached)."""

    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[TranscriptMessage]: ...


def transcript_html_pieces(
    source: SessionSource,
    tip: str | None = None,
    images: ImageSource | None = None,
    turns: CountedTurns | None = None,
) -> Iterator[bytes]:
    """`transcript_html`'s bytes a message at a time: joined, exactly its bytes.
    ``turns``: the page's turns when the caller has them (a session file too big to
    hold gives ones whose messages are parsed as they are read,
    `sessionfs.view.streamed_render`); else the source's."""
    names = entry_file_names_when_asked([source.entry_name(i) for i in range(len(source))])
    is_current = tip is None
    if tip is None:
        leaf = source.leaf_index()
    else:
        try:
            leaf = names.index(tip)
        except ValueError:
            raise KeyError(tip) from None
    page = _Page(source, names, "" if is_current else "../", images)
    forest = source.forest()
    path = forest.path_to(leaf)
    on_current = index_flags(len(source), path if is_current else source.path_indexes())
    if turns is None:
        turns = source.transcript_messages() if is_current else source.transcript_messages_at(leaf)
    title = source.title()
    add = page.add
    add('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n')
    add(f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n')
    add('<meta name="viewport" content="width=device-width, initial-scale=1">\n')
    add('<meta name="referrer" content="no-referrer">\n')
    add(f"<title>{esc(title or '(untitled session)')}</title>\n")
    add(f"<style>{PAGE_CSS}</style>\n</head>\n<body>\n<main>\n")
    add(f"<h1>{esc(title or '(untitled session)')}</h1>\n")
    _page_meta(page, leaf, len(turns), is_current)
    forks = _Forks(page, path, on_current, is_current)
    for turn in turns:
        index = source.index_of(turn.entry_name)
        forks.before(index)
        page.message(turn, forks.labelled.get(index) if index is not None else None, index)
        forks.after(index)
        yield page.take()
    forks.rest()
    if not turns:
        add('<p class="muted">No messages on this branch.</p>\n')
    add("</main>\n</body>\n</html>\n")
    yield page.take()


def _page_meta(page: _Page, leaf: int | None, count: int, is_current: bool) -> None:
    source = page.source
    header = source.header()
    add = page.add
    add('<p class="meta">')
    add(f"<span>{esc(source.agent)}</span>")
    session_id = header.get("id")
    if session_id:
        add(f"<span>session {esc(session_id)}</span>")
    cwd = header.get("cwd")
    if isinstance(cwd, str) and cwd:
        add(f"<span>{esc(cwd)}</span>")
    add(f"<span>{count:,} message{'' if count == 1 else 's'}</span>")
    add("</p>\n")
    add('<nav class="page">')
    here = page.entry_link(leaf) if leaf is not None else ""
    if is_current:
        add(f"The session at its leaf ({here})" if here else "The session (no leaf)")
    else:
        current = page.link("transcript.html")
        add(f"The branch ending at {here}; the session at its leaf: ")
        add(f'<a href="{current}">transcript.html</a>')
    add(f'; every branch: <a href="{page.link(BRANCHES_DIR)}/">branches/</a>.</nav>\n')
