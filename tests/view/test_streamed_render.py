"""``transcript.md``, ``context.json`` and ``transcript.html`` of a session file too big
to hold, written a message at a time (`sessionfs.view.streamed_render`,
`sessionfs.view.streamed_json`, `sessionfs.view.render_html.transcript_html_pieces`):
byte for byte what the rendering in memory makes, for real sessions and odd ones, in a
fraction of the memory; and stored into a cache file the daemon validates and reads
(`RenderCache.store_streamed`, `prerender.render_transcript`)."""

from __future__ import annotations

import hashlib
import html
import io
import os
import stat
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.fixture_paths import fixture_files
from support.long_claude_sessions import a_long_claude_session
from support.long_sessions import Chain, a_long_session, turns

from core import SessionManager
from core.context import empty_context
from sessionfs.view.agent_sources import open_agent_file
from sessionfs.view.html_images import PAGE_IMAGE_BUDGET
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.prerender import TooBigToHold, render_transcript
from sessionfs.view.render import context_json
from sessionfs.view.render_cache import FileIdentity, RenderCache
from sessionfs.view.renderings import render_source
from sessionfs.view.session_ref import SessionRef
from sessionfs.view.streamed_json import write_context_json
from sessionfs.view.streamed_render import STREAMED, open_index, write_streamed

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def in_memory(path: Path, what: str) -> bytes:
    """The rendering as the daemon makes it for a file it holds (the reference)."""
    ref = SessionRef(path.parent.name, path.stem, path, {}, 0, 0)
    session = LoadedSession(ref=ref)
    session.load()
    return session.rendered(what)


def streamed(path: Path, what: str) -> bytes:
    out = io.BytesIO()
    write_streamed(open_index(path), what, out)
    return out.getvalue()


@pytest.mark.parametrize("what", sorted(STREAMED))
def test_a_long_session_streams_the_bytes_rendered_in_memory(tmp_path: Path, what: str) -> None:
    path = a_long_session(tmp_path)
    assert streamed(path, what) == in_memory(path, what)


@pytest.mark.parametrize("what", sorted(STREAMED))
def test_real_sessions_stream_the_bytes_rendered_in_memory(tmp_path: Path, what: str) -> None:
    for fixture in fixture_files():
        path = tmp_path / fixture.name
        path.write_bytes(fixture.read_bytes())
        SessionManager.open(str(path))  # migrated to the current version, as agents do
        assert streamed(path, what) == in_memory(path, what), fixture.name


def test_odd_sessions_stream_the_bytes_rendered_in_memory(tmp_path: Path) -> None:
    untitled = Chain()
    untitled.message("user", content="only one")
    empty = Chain()
    rooted_twice = Chain()
    rooted_twice.message("user", content="first root")
    rooted_twice.message("user", parent=None, content="second root")
    odd = Chain()
    odd.message("user", content=[{"type": "text", "text": "lone surrogate"}])
    for name, chain in {
        "untitled": untitled,
        "empty": empty,
        "rooted": rooted_twice,
        "odd": odd,
    }.items():
        path = tmp_path / f"{name}.jsonl"
        if name == "odd":  # orjson cannot write a lone surrogate; JSON can hold one
            header = b'{"type":"session","version":3,"id":"o","cwd":"/","timestamp":"t"}'
            line = orjson.dumps(odd.lines[0]).replace(b"lone ", b"lone \\udc80")
            path.write_bytes(header + b"\n" + line + b"\n")
        else:
            chain.write(path, title=None if name == "untitled" else "t")
        for what in STREAMED:
            assert streamed(path, what) == in_memory(path, what), (name, what)


def nested(depth: int) -> list[Any]:
    root: list[Any] = []
    level = root
    for _ in range(depth):
        level.append([])
        level = level[0]
    return root


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{"role": "user", "content": "a\nb", "x": {"a": [1, {}], "b": []}}],
        [{"role": "user", "content": "lone \udc80"}],  # Python's encoder, ASCII, throughout
        [nested(300)],  # deeper than orjson: the compact form
        [nested(200)] * 40,  # indentation past the growth limit: the compact form
        ["x" * 10_000, 3, None],
        [*[nested(200)] * 40, "lone \udc80"],  # both: the compact form counted apart
        # about orjson's depth limit: a chunk (a list) is one level deeper than its items
        [{"a": 1}, nested(252), nested(253), "b"],
    ],
    ids=[
        "empty",
        "plain",
        "surrogate",
        "deep",
        "growth",
        "scalars",
        "surrogate-growth",
        "depth-limit",
    ],
)
@pytest.mark.parametrize("chunk", [1, 3, 256])
def test_context_json_written_a_message_at_a_time_is_pretty_json(
    messages: list[Any], chunk: int
) -> None:
    context = empty_context()
    context["messages"] = messages
    context["models"] = {"default": "anthropic/claude"}
    out = io.BytesIO()
    out.write(b"kept")  # written from where the file is
    write_context_json(context, lambda: iter(messages), out, chunk=chunk)
    assert out.getvalue() == b"kept" + context_json(context)


def test_streaming_holds_a_fraction_of_what_rendering_in_memory_does(tmp_path: Path) -> None:
    chain = Chain()
    turns(chain, 400)
    path = chain.write(tmp_path / "big.jsonl")
    size = path.stat().st_size
    assert size > 1_400_000
    for what in STREAMED:
        with open(tmp_path / "out", "w+b") as out:  # a file, as the cache's: holds nothing
            tracemalloc.start()
            try:
                # (Building the index reads a megabyte at a time: a constant peak.)
                index = open_index(path)
                held, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                write_streamed(index, what, out)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        tracemalloc.start()
        try:
            in_memory(path, what)
            _, whole = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # The index with its stand-ins (~660 bytes an entry: entries of 1.5 KB here,
        # ~4.4 KB in bench_huge_file's), then one message at a time (the page also
        # builds its tree and entry names: ~440 bytes an entry): a fraction of the
        # parse of every line.
        assert held < 700 * len(index), (what, held, len(index))
        assert peak < held + 500 * len(index), (what, peak, held, len(index))
        assert whole > 3 * size, (what, whole, size)


def test_a_streamed_cache_file_validates_and_reads_back(tmp_path: Path) -> None:
    path = a_long_session(tmp_path)
    identity = FileIdentity.of(os.stat(path))
    cache = RenderCache(tmp_path / "cache" / "contexts", "context.json")
    index = open_index(path)
    record = cache.store_streamed(
        "long.jsonl", identity, {}, lambda out: write_streamed(index, "context.json", out)
    )
    expected = in_memory(path, "context.json")
    assert record is not None and record.transcript_size == len(expected)
    assert cache.validate("long.jsonl", identity) == record
    loaded = cache.load("long.jsonl", identity)  # the CRC checked too
    assert loaded is not None and loaded[1] == expected
    assert stat.S_IMODE(os.stat(cache.path_for("long.jsonl")).st_mode) == 0o600
    assert [p.name for p in cache.root.iterdir()] == [cache.path_for("long.jsonl").name]


def test_a_render_worker_streams_a_file_over_its_limit_into_the_cache(tmp_path: Path) -> None:
    path = a_long_session(tmp_path)
    cache_root = tmp_path / "cache" / "renders"
    outcome = render_transcript(str(path), "long.jsonl", str(cache_root), True, stream_over=1000)
    assert outcome.rendered and outcome.data is None  # never handed over whole
    expected = in_memory(path, "transcript.md")
    assert outcome.record.sizes["transcript.md"] == len(expected)
    assert outcome.record.sizes["title"] == len(in_memory(path, "title"))
    assert outcome.record.sizes["header.json"] == len(in_memory(path, "header.json"))
    found = RenderCache(cache_root).load("long.jsonl", outcome.record.identity)
    assert found is not None and found[1] == expected
    again = render_transcript(str(path), "long.jsonl", str(cache_root), False, stream_over=1000)
    assert not again.rendered  # the cache file is valid: nothing rendered twice


def test_a_page_worker_streams_the_page_with_its_images_capped(tmp_path: Path) -> None:
    """``transcript.html`` of a file over the limit, images inlined from the blob store
    up to the page's budget, the rest linked: the page the daemon renders in memory."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    chain = Chain()
    turns(chain, 5)
    for i in range(PAGE_IMAGE_BUDGET // 1_000_000 + 2):  # past the page's budget
        picture = b"\x89PNG\r\n\x1a\n" + bytes([i]) * (1_000_000 - 8)
        sha = hashlib.sha256(picture).hexdigest()
        (blobs / sha).write_bytes(picture)
        image = {"type": "image", "data": f"blob:sha256:{sha}", "mimeType": "image/png"}
        chain.message("user", content=[{"type": "text", "text": HOSTILE}, image])
    turns(chain, 5, start=5)
    path = chain.write(tmp_path / "sessions" / "p" / "pics.jsonl", title=HOSTILE)
    for file in (path, *blobs.iterdir()):
        os.chmod(file, 0o600)
    cache_root = tmp_path / "cache" / "pages"
    outcome = render_transcript(
        str(path),
        "k",
        str(cache_root),
        True,
        what="transcript.html",
        blobs_dir=str(blobs),
        stream_over=1000,
    )
    assert outcome.rendered and outcome.data is None  # asked for, yet never handed over whole
    found = RenderCache(cache_root, "transcript.html").load("k", outcome.record.identity)
    assert found is not None
    page = found[1]
    ref = SessionRef(path.parent.name, path.stem, path, {}, 0, 0)
    session = LoadedSession(ref=ref, blobs_dir=blobs)
    session.load()
    assert page == session.rendered("transcript.html")
    assert page.count(b'<img alt="image" src="data:image/png;base64,') == (
        PAGE_IMAGE_BUDGET // 1_000_000
    )
    assert page.count(b"too big to inline here") == 2
    assert HOSTILE.encode() not in page and html.escape(HOSTILE).encode() in page


def long_session_of(agent: str, tmp_path: Path) -> Path:
    if agent == "claude":
        return a_long_claude_session(tmp_path / "p" / "long.jsonl")
    return a_long_session(tmp_path)


def in_memory_of(agent: str, path: Path, what: str) -> bytes:
    """The rendering in memory of ``agent``'s file (xcsh: as the daemon holds it)."""
    if agent == "xcsh":
        return in_memory(path, what)
    return render_source(open_agent_file(agent, path), what, path=path)


@pytest.mark.parametrize("agent", ["xcsh", "claude"])
def test_the_job_streaming_one_rendering_writes_the_others_from_the_same_index(
    tmp_path: Path, agent: str
) -> None:
    """Indexing is most of a streamed rendering's work: the job asked for one writes
    the others into their cache dirs too, and their own jobs then find them valid;
    the bytes are never handed over whole, even when asked for."""
    path = long_session_of(agent, tmp_path)
    roots = {what: tmp_path / "cache" / what.replace(".", "-") for what in STREAMED}
    others = tuple((what, str(roots[what]), None) for what in sorted(STREAMED - {"context.json"}))
    asked = render_transcript(
        str(path),
        "k",
        str(roots["context.json"]),
        True,
        agent=agent,
        what="context.json",
        stream_over=1000,
        also_streamed=others,
    )
    assert asked.rendered and asked.data is None
    for what in STREAMED:
        found = RenderCache(roots[what], what).load("k", asked.record.identity)
        assert found is not None and found[1] == in_memory_of(agent, path, what), what
        again = render_transcript(
            str(path), "k", str(roots[what]), False, agent=agent, what=what, stream_over=1000
        )
        assert not again.rendered, what  # found valid: not rendered a second time
        assert again.record.sizes[what] == len(in_memory_of(agent, path, what))
    transcript = RenderCache(roots["transcript.md"]).validate("k", asked.record.identity)
    assert transcript is not None
    for name in ("title", "header.json"):  # as its own job's
        assert transcript.sizes[name] == len(in_memory_of(agent, path, name))


def test_a_streamed_rendering_with_no_cache_dir_to_go_to_is_refused(tmp_path: Path) -> None:
    path = a_long_session(tmp_path)
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache dir should be")
    with pytest.raises(TooBigToHold, match="cannot be written to the cache dir"):
        render_transcript(str(path), "long.jsonl", str(blocked / "renders"), False, stream_over=1)
    # Under the limit the worker renders in memory and hands the bytes over as before.
    small = render_transcript(str(path), "long.jsonl", str(blocked / "renders"), False)
    assert small.data == in_memory(path, "transcript.md")
