"""``transcript.html`` and the branch pages, rendered from a `SessionSource`: every
string from the session escaped, links relative and inside the mount, thinking and
tool calls folded, images inlined only when they are images and within the caps, and
each branch point linking the other branches' pages (xcsh, Claude Code, Codex); and
``tree.svg``: well-formed whatever the session holds, path and labels marked, capped."""

from __future__ import annotations

import base64
import os
import re
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

import orjson
import pytest
from support import claude_code as cc
from support import codex_cli as cx

from core.formats.claude import ClaudeSession
from core.formats.codex import CodexSession
from core.formats.xcsh import XcshSession
from sessionfs.view import render_html
from sessionfs.view.access import FileAccess
from sessionfs.view.branch_pages import tip_indexes
from sessionfs.view.html_images import IMAGE_CAP, BlobFiles, ImageBudget
from sessionfs.view.loaded_session import (
    BRANCH_PAGES_KEPT,
    TABLE_BYTES_PER_ENTRY,
    LoadedSession,
)
from sessionfs.view.prerender import render_transcript
from sessionfs.view.render_cache import FileIdentity, RenderCache
from sessionfs.view.render_html import BRANCH_LINKS, FOLD_LINES, transcript_html
from sessionfs.view.render_svg import MAX_ROWS, tree_svg
from sessionfs.view.session_ref import SessionRef

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
HEADER = {"type": "session", "version": 3, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/x"}


def png(width: int = 4, height: int = 4) -> bytes:
    rows = b"".join(b"\x00" + b"\x80\x40\x20" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def entry(entry_id: str, parent: str | None, message: dict[str, Any], second: int = 1) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": f"2026-01-01T00:00:{second:02d}.000Z",
        "message": {"timestamp": 0, **message},
    }


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def write_session(path: Path, rows: list[dict[str, Any]], title: str | None = None) -> Path:
    header = {**HEADER, "id": "s1"} | ({"title": title} if title is not None else {})
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in [header, *rows]) + b"\n")
    return path


class Links(HTMLParser):
    """Every href and src of a page, and whether any script element exists."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.tags: list[str] = []
        self.handlers: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append(name)
            if name == "href" and value is not None:
                self.hrefs.append(value)
            if name == "src" and value is not None:
                self.srcs.append(value)
            if name == "id" and value is not None:
                self.ids.append(value)


def parsed(page: bytes) -> Links:
    links = Links()
    links.feed(page.decode())
    return links


def assert_safe(page: bytes) -> Links:
    """No script, no handler, every link relative inside the mount, every image a
    whitelisted data: URI."""
    links = parsed(page)
    assert "script" not in links.tags and not links.handlers
    assert len(set(links.ids)) == len(links.ids)  # every anchor names one card
    for link in links.hrefs:
        parts = urlsplit(link)
        assert not parts.scheme and not parts.netloc and not link.startswith("/"), link
    for src in links.srcs:
        assert re.fullmatch(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+", src), src
    return links


def test_every_string_from_the_session_is_escaped(tmp_path: Path) -> None:
    rows = [
        entry("javascript:alert(1)", None, user(HOSTILE)),
        entry(
            'a"><script>x()</script>',
            "javascript:alert(1)",
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": HOSTILE},
                    {"type": "text", "text": HOSTILE},
                    {"type": "toolCall", "id": HOSTILE, "name": HOSTILE, "arguments": {HOSTILE: 1}},
                ],
            },
            2,
        ),
        entry(
            "r1",
            'a"><script>x()</script>',
            {"role": "toolResult", "toolName": HOSTILE, "toolCallId": "c", "content": HOSTILE},
            3,
        ),
        {
            "type": "label",
            "id": "l1",
            "parentId": "r1",
            "timestamp": "2026-01-01T00:00:04Z",
            "targetId": "r1",
            "label": HOSTILE,
        },
    ]
    source = XcshSession(write_session(tmp_path / "s.jsonl", rows, title=HOSTILE))
    page = transcript_html(source)
    links = assert_safe(page)
    text = page.decode()
    assert "<script" not in text and "onerror=" not in text.replace("onerror=alert", "")
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in text
    assert (
        f"<title>{HOSTILE.replace('<', '&lt;').replace('>', '&gt;').replace(chr(39), '&#x27;')}"
        in text
    )
    # The entry links name the entries/ files, percent-encoded whole.
    entry_links = {unquote(h) for h in links.hrefs if h.startswith("entries/")}
    assert "entries/javascript:alert(1).json" in entry_links
    assert 'entries/a"><script>x()<%2Fscript>.json' in entry_links  # the file's name
    assert '<span class="label">&lt;script&gt;' in text


def test_thinking_and_tool_calls_fold_and_long_results_fold(tmp_path: Path) -> None:
    long_output = "\n".join(f"line {n}" for n in range(FOLD_LINES + 5))
    rows = [
        entry("u1", None, user("go")),
        entry(
            "a1",
            "u1",
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "let me think"},
                    {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": "ls"}},
                    {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"cmd": "cat"}},
                ],
            },
            2,
        ),
        entry(
            "r1",
            "a1",
            {
                "role": "toolResult",
                "toolName": "bash",
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "short"}],
            },
            3,
        ),
        entry(
            "r2",
            "r1",
            {
                "role": "toolResult",
                "toolName": "bash",
                "toolCallId": "c2",
                "content": [{"type": "text", "text": long_output}],
                "isError": True,
            },
            4,
        ),
    ]
    page = transcript_html(XcshSession(write_session(tmp_path / "s.jsonl", rows))).decode()
    assert re.search(
        r'<details class="thinking"><summary>thinking[^<]*</summary>'
        r'<div class="text">let me think</div>',
        page,
    )
    calls = re.findall(
        r'<details class="call"><summary>tool call <code>bash</code>.*?</details>', page, re.S
    )
    assert len(calls) == 2 and "&quot;cmd&quot;: &quot;ls&quot;" in calls[0]
    assert "<pre>short</pre>" in page  # a short result is shown as it is
    folded = re.search(
        r"<details><summary>output: (\d+) lines · <code>line 0</code></summary>"
        r"<pre>line 0\nline 1",
        page,
    )
    assert folded and int(folded.group(1)) == FOLD_LINES + 5
    assert 'class="msg toolResult is-error"' in page


def test_images_inline_within_the_caps_and_never_what_is_not_an_image(tmp_path: Path) -> None:
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    picture = png()

    def blob(data: bytes, mode: int = 0o600) -> str:
        import hashlib

        sha = hashlib.sha256(data).hexdigest()
        (blobs / sha).write_bytes(data)
        os.chmod(blobs / sha, mode)
        return sha

    good = blob(picture)
    fake = blob(b"<html><script>alert(1)</script></html>")  # claims to be a PNG below
    svg = blob(b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    huge = blob(picture + b"\0" * IMAGE_CAP)
    inline = base64.b64encode(picture).decode()

    def image(data: str, mime: str = "image/png") -> dict[str, Any]:
        return {"type": "image", "data": data, "mimeType": mime}

    rows = [
        entry(
            "u1",
            None,
            user(
                [
                    image(f"blob:sha256:{good}"),
                    image(f"blob:sha256:{fake}"),
                    image(f"blob:sha256:{svg}", "image/svg+xml"),
                    image(f"blob:sha256:{huge}"),
                    image(f"blob:sha256:{'0' * 64}"),
                    image(inline),
                    image(base64.b64encode(b"GIF89a" + b"<script>").decode(), "text/html"),
                    image('"><script>alert(1)</script>'),  # not base64: a note, never an attribute
                ]
            ),
        ),
    ]
    path = write_session(tmp_path / "s.jsonl", rows)
    os.chmod(path, 0o600)
    access = FileAccess.of(os.stat(path))
    page = transcript_html(XcshSession(path), images=BlobFiles(blobs, access))
    links = assert_safe(page)
    text = page.decode()
    png_uri = "data:image/png;base64," + base64.b64encode(picture).decode()
    assert links.srcs == [
        png_uri,
        png_uri,
        "data:image/gif;base64," + base64.b64encode(b"GIF89a<script>").decode(),
    ]
    for sha in (good, fake, svg, huge):
        assert f"blobs/{sha}" in links.hrefs  # each blob links to its file in the mount
    assert text.count("not an image type this page shows") == 2  # the HTML and the SVG
    assert "too big to inline here" in text and f"{IMAGE_CAP + len(picture):,} bytes" in text
    assert "not in the blob store" in text
    assert "[image image/png: its data is not base64]" in text
    # A blob that the session's other readers may not read is not inlined for them.
    os.chmod(path, 0o644)
    shared = transcript_html(
        XcshSession(path), images=BlobFiles(blobs, FileAccess.of(os.stat(path)))
    )
    assert parsed(shared).srcs == [
        png_uri,
        "data:image/gif;base64," + base64.b64encode(b"GIF89a<script>").decode(),
    ]


def test_the_page_image_budget_bounds_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picture = png(16, 16)
    encoded = base64.b64encode(picture).decode()
    rows = [
        entry(
            f"u{n}",
            f"u{n - 1}" if n else None,
            user([{"type": "image", "data": encoded, "mimeType": "image/png"}]),
            n,
        )
        for n in range(40)
    ]
    path = write_session(tmp_path / "s.jsonl", rows)
    assert len(parsed(transcript_html(XcshSession(path))).srcs) == 40  # all fit by default
    budget = 3 * len(picture)
    monkeypatch.setattr(render_html, "ImageBudget", lambda: ImageBudget(budget, IMAGE_CAP))
    page = transcript_html(XcshSession(path))
    assert len(parsed(page).srcs) == 3
    assert page.decode().count("too big to inline here") == 37
    assert len(page) < 40 * 1000 + 3 * len(encoded) + 10_000


def fork_rows() -> list[dict[str, Any]]:
    """u1 -> a1 -> {u2 -> a2 (older), u3 -> a3 (newer, the leaf)}; a label on a1."""
    return [
        entry("u1", None, user("question"), 1),
        entry(
            "a1", "u1", {"role": "assistant", "content": [{"type": "text", "text": "answer"}]}, 2
        ),
        entry("u2", "a1", user("first try"), 3),
        entry("a2", "u2", {"role": "assistant", "content": "done one way"}, 4),
        entry("u3", "a1", user("second try"), 5),
        {
            "type": "label",
            "id": "l1",
            "parentId": "u3",
            "timestamp": "2026-01-01T00:00:06Z",
            "targetId": "a1",
            "label": "fork-here",
        },
        entry("a3", "l1", {"role": "assistant", "content": "done the other way"}, 7),
    ]


def test_branch_tips_have_no_children_and_a_parent(tmp_path: Path) -> None:
    """A lone root (a single message, a metadata line) ends no branch."""
    rows = [entry("solo", None, user("a lone root")), *fork_rows()]
    source = XcshSession(write_session(tmp_path / "s.jsonl", rows))
    assert [source.entry_name(i) for i in tip_indexes(source)] == ["a2", "a3"]


def test_branch_points_link_the_other_branches_pages(tmp_path: Path) -> None:
    source = XcshSession(write_session(tmp_path / "s.jsonl", fork_rows()))
    assert [source.entry_name(i) for i in tip_indexes(source)] == ["a2", "a3"]
    current = transcript_html(source)
    links = assert_safe(current)
    text = current.decode()
    assert "branches/a2.html" in links.hrefs
    assert "second try" in text and "first try" not in text.split("Branch point")[0]
    assert '<span class="label">fork-here</span>' in text  # the label's badge on a1
    other = transcript_html(source, tip="a2.json")
    other_links = assert_safe(other)
    other_text = other.decode()
    assert "first try" in other_text and "done one way" in other_text
    assert "second try" not in other_text.split("Branch point")[0]
    assert "../transcript.html" in other_links.hrefs  # back to the current branch
    assert "../entries/a2.json" in other_links.hrefs
    assert "(the current branch)" in other_text
    with pytest.raises(KeyError):
        transcript_html(source, tip="nope.json")


def test_a_fork_shows_a_bounded_number_of_links(tmp_path: Path) -> None:
    rows = [entry("root", None, user("start"), 1)]
    rows += [entry(f"k{n:04d}", "root", user(f"try {n}"), 2) for n in range(BRANCH_LINKS + 30)]
    page = transcript_html(XcshSession(write_session(tmp_path / "s.jsonl", rows)))
    links = assert_safe(page)
    assert sum(1 for h in links.hrefs if h.startswith("branches/k")) == BRANCH_LINKS
    assert "and 29 more" in page.decode() and "branches/" in links.hrefs


def test_a_claude_rewind_has_a_page_per_branch(tmp_path: Path) -> None:
    results = [
        {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"out {n}"} for n in (1, 2)
    ]
    lines = [
        cc.user("u0", None, "Why does it loop?", 0),
        cc.assistant("c0", "u0", "m0", cc.tool_use("t1", "Read", {"file_path": "a"}), 0),
        cc.assistant("c1", "c0", "m0", cc.tool_use("t2", "Read", {"file_path": "b"}), 0),
        cc.user("u1", "c1", results, 1),  # two results in one line: two cards, one anchor
        cc.assistant("a1", "u1", "m1", cc.text("Exempt /login or move it?"), 2),
        cc.user("u2", "a1", "Exempt it.", 3),
        cc.assistant("a2", "u2", "m2", cc.text("Exempted."), 4),
        cc.user("u3", "a1", "No: move it.", 5),
        cc.assistant("a3", "u3", "m3", cc.text("Moved."), 6),
    ]
    source = ClaudeSession(cc.write_jsonl(tmp_path / "c.jsonl", lines))  # type: ignore[arg-type]
    page = transcript_html(source)
    assert_safe(page)
    current = page.decode()
    assert current.count('class="msg toolResult"') == 2 and current.count('id="e-u1.json"') == 1
    assert "Moved." in current and "branches/a2.html" in current and "Exempted." not in current
    other = transcript_html(source, tip="a2.json").decode()
    assert "Exempted." in other and "Moved." not in other and "../transcript.html" in other


def test_a_codex_session_is_one_branch(tmp_path: Path) -> None:
    lines = [
        cx.session_meta(0),
        cx.item(cx.message("user", HOSTILE), 1),
        cx.item(cx.message("assistant", "fine"), 2),
    ]
    path = tmp_path / f"rollout-2026-03-02T09-00-00-{cx.THREAD_ID}.jsonl"
    cc.write_jsonl(path, lines)  # type: ignore[arg-type]
    source = CodexSession(path)
    page = transcript_html(source)
    assert_safe(page)
    assert "&lt;script&gt;" in page.decode() and "Branch point" not in page.decode()
    assert len(tip_indexes(source)) == 1
    tip = source.entry_name(tip_indexes(source)[0])
    assert b"fine" in transcript_html(source, tip=f"{tip}.json")


# --- tree.svg -------------------------------------------------------------------------


def svg_rows(svg: bytes) -> list[tuple[str, str]]:
    """(class, text) of each drawn row of a well-formed picture."""
    root = ElementTree.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    return [
        (group.get("class", ""), "".join(group.find(f"{ns}a/{ns}text").itertext()))  # type: ignore[union-attr]
        for group in root.iter(f"{ns}g")
    ]


def test_tree_svg_marks_the_path_and_labels_and_escapes(tmp_path: Path) -> None:
    rows = fork_rows()
    rows[0]["message"]["content"] = "\x01\x1b[31m" + HOSTILE  # control characters, markup
    source = XcshSession(write_session(tmp_path / "s.jsonl", rows, title=HOSTILE))
    svg = tree_svg(source)
    elements = list(ElementTree.fromstring(svg).iter())
    assert not any(e.tag.endswith("script") or e.tag.endswith("img") for e in elements)
    assert not any(name.startswith("on") for e in elements for name in e.attrib)
    drawn = svg_rows(svg)  # parses: well-formed XML whatever the session held
    assert [text.split()[0] for _, text in drawn] == ["u1", "a1", "u2", "a2", "u3", "l1", "a3"]
    on = [text.split()[0] for cls, text in drawn if cls == "on"]
    assert on == ["u1", "a1", "u3", "l1", "a3"]
    assert "[fork-here]" in drawn[1][1]
    assert drawn[0][1].startswith("u1 user \ufffd\ufffd[31m" + HOSTILE[:40])
    links = re.findall(r'href="([^"]*)"', svg.decode())
    assert links[:4] == [
        "entries/u1.json",
        "entries/a1.json",
        "entries/u2.json",
        "branches/a2.html",
    ]


def test_tree_svg_of_a_huge_tree_is_capped(tmp_path: Path) -> None:
    count = MAX_ROWS * 50  # 100,000 entries
    lines = [orjson.dumps({**HEADER, "id": "big"})]
    lines += [
        orjson.dumps(entry(f"e{n}", f"e{n - 1}" if n else None, user(f"step {n}")))
        for n in range(count)
    ]
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    svg = tree_svg(XcshSession(path))
    assert len(svg_rows(svg)) == MAX_ROWS
    assert f"{count - MAX_ROWS:,} more entries not drawn".encode() in svg
    assert len(svg) < 1_000_000, len(svg)


def test_a_session_keeps_only_a_few_branch_pages(tmp_path: Path) -> None:
    rows = [entry("root", None, user("start"), 1)]
    rows += [entry(f"k{n}", "root", user(f"try {n}"), 2) for n in range(10)]
    path = write_session(tmp_path / "s.jsonl", rows)
    session = LoadedSession(ref=SessionRef("p", "s", path, {}, 0, 0))
    session.load()
    pages = [f"branches/{name}" for name in session.branch_page_names()]
    assert pages == [f"branches/k{n}.html" for n in range(10)]
    transcript = session.rendered("transcript.html")
    for page in pages:
        assert f"try {page[-6]}".encode() in session.rendered(page)
    kept = [page for page in pages if session.cached(page) is not None]
    assert kept == pages[-BRANCH_PAGES_KEPT:]
    assert session.cached("transcript.html") == transcript
    held = session.source.memory_cost() if session.source is not None else 0
    rendered = len(transcript) + sum(len(session.cached(page) or b"") for page in kept)
    table = len(session.table().names) * TABLE_BYTES_PER_ENTRY  # built for the page names
    assert session.memory_cost() == held + rendered + table


def test_the_pages_cache_holds_pages_and_never_a_transcript(tmp_path: Path) -> None:
    """A worker's page goes into the pages' cache dir with its images inlined, is
    found there again, and a cache file of ``transcript.md`` is never taken for one."""
    path = write_session(tmp_path / "s.jsonl", fork_rows())
    identity = FileIdentity.of(os.stat(path))
    pages_dir, transcripts_dir = tmp_path / "pages", tmp_path / "renders"
    made = render_transcript(str(path), "s.jsonl", str(pages_dir), True, what="transcript.html")
    assert made.rendered and made.data is not None and made.data.startswith(b"<!DOCTYPE html>")
    assert made.record.body == "transcript.html"
    assert made.record.transcript_size == len(made.data)
    again = render_transcript(str(path), "s.jsonl", str(pages_dir), True, what="transcript.html")
    assert not again.rendered and again.data == made.data
    render_transcript(str(path), "s.jsonl", str(transcripts_dir), False)  # transcript.md
    for name in os.listdir(transcripts_dir):
        os.replace(transcripts_dir / name, pages_dir / name)  # a transcript where a page was
    assert RenderCache(pages_dir, "transcript.html").validate("s.jsonl", identity) is None
    assert RenderCache(pages_dir).validate("s.jsonl", identity) is not None
