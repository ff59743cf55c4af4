"""``transcript.md``, ``context.json`` and ``transcript.html`` of a Claude Code session
file too big to hold, written a turn at a time (`sessionfs.view.streamed_agents`):
byte for byte what the rendering in memory makes -- compactions, a preserved segment,
split responses, parallel tool calls with a result off the path, merged user lines,
images, sub-agent files, junk -- in a fraction of the memory; and of a Codex rollout
(compactions, rollbacks, calls and outputs, injected context). A render worker
writing them into the cache dir: tests/view/test_streamed_render.py."""

from __future__ import annotations

import io
import json
import os
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import zstandard
from support import codex_cli as cx
from support.long_claude_sessions import a_long_claude_session
from support.long_codex_sessions import a_long_codex_session
from support.other_agents import fake_home, load_demo_agents
from support.traced_memory import traced

from core.formats.claude import ClaudeSession
from core.formats.claude_turns import Turns
from core.formats.codex import CodexSession
from core.zstd_files import ASSUMED_RATIO
from sessionfs.view import render_worker
from sessionfs.view.agent_sources import open_agent_file
from sessionfs.view.prerender import render_transcript
from sessionfs.view.render_worker import RenderFailed
from sessionfs.view.renderings import render_source
from sessionfs.view.streamed_files import STREAMED, NotStreamable, open_streamed

CLAUDE = "claude"


def in_memory(path: Path, what: str) -> bytes:
    """The rendering as the daemon makes it of a file it reads whole (the reference)."""
    return render_source(open_agent_file(CLAUDE, path), what, path=path)


def streamed(path: Path, what: str) -> bytes:
    out = io.BytesIO()
    opened = open_streamed(CLAUDE, path)
    assert isinstance(opened.source(), ClaudeSession)
    opened.write(what, out, None)
    return out.getvalue()


def odd_sessions(root: Path) -> list[Path]:
    """Sessions with odd values: a lone surrogate (Python's JSON encoder), no title,
    a response whose lines are split by another line, nothing but metadata."""
    demo = load_demo_agents()
    odd = demo.ClaudeLines("odd", "/w", 1_780_000_000.0)
    odd.user("lone surrogate follows")
    odd.response("msg_a", [{"type": "text", "text": "first half"}], (1, 1, 0, 0))
    odd.user([{"type": "text", "text": "interjected"}])
    odd.response("msg_a", [{"type": "text", "text": "second half"}], (1, 1, 0, 0))
    odd.response(
        "msg_b", [{"type": "tool_use", "id": "t1", "name": "X", "input": {}}], (1, 1, 0, 0)
    )
    odd.tool_result("t1", "SURROGATE")
    path = demo.write_lines(root / "odd.jsonl", odd.lines)
    path.write_bytes(path.read_bytes().replace(b"SURROGATE", b"lone \\udc80"))
    meta_only = demo.write_lines(root / "meta.jsonl", [{"type": "summary", "summary": "s"}])
    return [path, meta_only]


def every_claude_file(tmp_path: Path) -> list[Path]:
    trees = fake_home(tmp_path / "home")
    files = sorted(trees.claude.rglob("*.jsonl"))  # the demo's, the compacted, sub-agents'
    assert any("subagents" in str(f) for f in files) and trees.claude_compacted in files
    long = a_long_claude_session(tmp_path / "long" / "long.jsonl")
    return [*files, long, *odd_sessions(tmp_path / "odd")]


@pytest.mark.parametrize("what", sorted(STREAMED))
def test_claude_sessions_stream_the_bytes_rendered_in_memory(tmp_path: Path, what: str) -> None:
    for path in every_claude_file(tmp_path):
        assert streamed(path, what) == in_memory(path, what), path.name


def test_the_turns_count_their_transcript_without_reading_it(tmp_path: Path) -> None:
    """The page's header says how many messages it shows before it shows them: the
    turns count them from their positions (``transcript_length``)."""
    for path in every_claude_file(tmp_path):
        session = open_agent_file(CLAUDE, path)
        assert isinstance(session, ClaudeSession)
        turns = Turns(session, hold=False)
        assert turns.transcript_length() == len(list(turns.transcript_messages())), path.name


def test_the_long_session_shows_what_the_turns_rules_read(tmp_path: Path) -> None:
    """The fixture is what it says: the context starts at the last compaction's
    summary with its preserved turns after it, a result off the path is placed, the
    caveat and prompt are one message, and the leaf is the one ``last-prompt`` names."""
    path = a_long_claude_session(tmp_path / "long.jsonl")
    context = json.loads(streamed(path, "context.json"))
    messages = context["messages"]
    assert messages[0]["content"] == "Summary: the second part."
    # the preserved segment: from the last line before it (its head) to its tail
    assert messages[1]["content"] == [{"type": "text", "text": "Done 89."}]
    assert "prompt 90 " in json.dumps(messages[2]) and "prompt 10000" not in json.dumps(context)
    transcript = streamed(path, "transcript.md").decode()
    assert "read 91 " not in transcript and "91 read" in transcript  # off-path result
    assert transcript.startswith("# A long Claude session\n")
    assert "## toolResult" in transcript and "no call" in transcript
    assert context["model"] == "claude-sonnet-4-5-20250929"
    merged = messages[-2]["content"]  # the caveat and the prompt after it: one message
    assert merged[0]["text"].endswith("</local-command-caveat>\n")
    assert merged[1]["text"].startswith("the last prompt")
    assert messages[-1]["content"] == [{"type": "text", "text": "The last answer."}]


def test_streaming_holds_a_fraction_of_what_rendering_in_memory_does(tmp_path: Path) -> None:
    path = a_long_claude_session(tmp_path / "long.jsonl", turns=60)
    size = path.stat().st_size
    assert size > 2_000_000
    lines = len(path.read_bytes().splitlines())
    for what in sorted(STREAMED):
        # a record per line (`ClaudeSession`), then the rendering written to a file
        opened, held, _ = traced(lambda: open_streamed(CLAUDE, path))
        with open(tmp_path / "out", "w+b") as out:  # a file, as the cache's: holds nothing
            _, _, peak = traced(partial(opened.write, what, out, None))
        _, _, whole = traced(partial(in_memory, path, what))
        # The reader's records, then the turns' positions and one turn's content (the
        # page also builds its tree and entry names): a few hundred bytes a line, where
        # the rendering in memory holds every turn (lines of 2.4 KB here, more in life).
        # (Measured ~460-490 bytes a line held; the bound is this test's own, not the
        # cache's accounting figure, `ClaudeSession.LINE_INDEX_BYTES`.)
        assert held < 700 * lines, (what, held, lines)
        assert peak < 700 * lines, (what, peak, held, lines)
        assert whole > 2 * size, (what, whole, size)


def every_codex_file(tmp_path: Path) -> list[Path]:
    trees = fake_home(tmp_path / "home")
    plain = [trees.codex_rollout, trees.codex_subagent, trees.codex_old_format]
    return [*plain, a_long_codex_session(tmp_path / "codex" / "rollout-long.jsonl")]


@pytest.mark.parametrize("what", sorted(STREAMED))
def test_codex_rollouts_stream_the_bytes_rendered_in_memory(tmp_path: Path, what: str) -> None:
    for path in every_codex_file(tmp_path):
        out = io.BytesIO()
        open_streamed("codex", path).write(what, out, None)
        expected = render_source(open_agent_file("codex", path), what, path=path)
        assert out.getvalue() == expected, path.name


def a_codex_fork(home: Path) -> Path:
    """A Codex 0.17x fork (``history_base``) of a parent rollout in the same home: its
    context and transcript start with the parent's, up to the fork point."""
    day = home / "sessions" / "2026" / "03" / "02"
    parent_id, fork_id = (f"01a2470c-0000-7000-8000-00000000000{n}" for n in "ab")
    parent = cx.write_jsonl(
        day / f"rollout-2026-03-02T09-00-00-{parent_id}.jsonl",
        [
            cx.session_meta(0, parent_id),
            cx.item(cx.message("user", "parent question"), 1),
            cx.item(cx.message("assistant", "parent answer"), 2),
            cx.item(cx.message("user", "after the fork point"), 3),
        ],
    )
    offset = sum(len(line) + 1 for line in parent.read_bytes().split(b"\n")[:3])
    base = {"thread_id": parent_id, "end_ordinal_exclusive": 3, "end_byte_offset": offset}
    meta = cx.session_meta(4, fork_id, forked_from_id=parent_id, history_base=base)
    return cx.write_jsonl(
        day / f"rollout-2026-03-02T09-00-04-{fork_id}.jsonl",
        [meta, cx.item(cx.message("user", "fork question"), 5)],
    )


def test_one_job_finds_a_codex_rollouts_messages_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three renderings a job writes from one opened rollout (`_render_streamed`'s
    ``also``) share one pass over its history, as Claude Code's share its turns: the
    same bytes as in memory, in any order, each written twice."""
    passes: list[CodexSession] = []
    payloads = CodexSession._payloads

    def counted(self: CodexSession, until: int | None = None) -> Any:
        passes.append(self)
        return payloads(self, until)

    monkeypatch.setattr(CodexSession, "_payloads", counted)
    fork = a_codex_fork(tmp_path / "home" / ".codex")
    for path in [*every_codex_file(tmp_path), fork]:
        opened = open_streamed("codex", path)
        session = opened.source()
        assert isinstance(session, CodexSession)
        for what in [*sorted(STREAMED), *sorted(STREAMED, reverse=True)]:
            out = io.BytesIO()
            opened.write(what, out, None)
            assert sum(scanned is session for scanned in passes) == 1, (path.name, what)
            assert out.getvalue() == in_memory_codex(path, what), (path.name, what)
    fork_transcript = in_memory_codex(fork, "transcript.md").decode()
    assert "parent answer" in fork_transcript and "fork question" in fork_transcript
    assert "after the fork point" not in fork_transcript


def test_the_long_rollout_shows_its_compaction_and_rollback(tmp_path: Path) -> None:
    path = a_long_codex_session(tmp_path / "rollout-long.jsonl")
    out = io.BytesIO()
    open_streamed("codex", path).write("context.json", out, None)
    context = json.loads(out.getvalue())
    said = json.dumps(context["messages"])
    assert context["messages"][0]["content"][0]["text"] == "An older compaction: a summary only."
    assert "prompt 78 " in said and "prompt 59 " not in said
    assert "prompt 79 " not in said and "prompt 80 " in said  # rolled back, then one more
    assert context["model"] == "gpt-5.1-codex"
    transcript = in_memory_codex(path, "transcript.md").decode()
    assert "prompt 39 " in transcript and "compactionSummary" in transcript


def in_memory_codex(path: Path, what: str) -> bytes:
    return render_source(open_agent_file("codex", path), what, path=path)


def compressed(plain: Path) -> Path:
    """``plain`` as Codex archives a rollout: ``.jsonl.zst``, the plain file gone."""
    archived = plain.with_name(plain.name + ".zst")
    archived.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    plain.unlink()
    return archived


def test_a_compressed_rollout_is_streamed_from_a_private_copy_of_its_text(
    tmp_path: Path,
) -> None:
    """An archived ``.jsonl.zst`` over the limit: its text decompressed once into a
    file of the cache dir that has no name (0600, gone with the reading), read where
    it is; the same bytes as the rendering in memory. Without a dir it is not streamed
    (a worker renders it in memory, read whole)."""
    path = compressed(a_long_codex_session(tmp_path / "rollout-long.jsonl"))
    with pytest.raises(NotStreamable):
        open_streamed("codex", path)
    spill = tmp_path / "spill"
    spill.mkdir()
    opened = open_streamed("codex", path, str(spill))
    source = opened.source()
    assert isinstance(source, CodexSession)
    fd = source._file.data.fd  # type: ignore[union-attr]  # (read where it is)
    copy = os.fstat(fd)
    assert copy.st_nlink == 0 and copy.st_mode & 0o777 == 0o600
    assert list(spill.iterdir()) == []  # nothing named, nothing left behind
    for what in sorted(STREAMED):
        out = io.BytesIO()
        opened.write(what, out, None)
        assert out.getvalue() == in_memory_codex(path, what), what
    del opened, source
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the reading: the copy is gone


def test_a_worker_streams_a_compressed_rollout_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = compressed(a_long_codex_session(tmp_path / "rollout-long.jsonl"))
    cache = tmp_path / "cache"
    whole = render_transcript(str(path), "k", None, True, agent="codex")

    def not_in_memory(*args: Any) -> Any:
        raise AssertionError("rendered in memory, not streamed")

    monkeypatch.setattr(render_worker, "_render", not_in_memory)
    streamed = render_transcript(str(path), "k", str(cache), False, agent="codex", stream_over=1)
    assert streamed.rendered
    found = render_transcript(str(path), "k", str(cache), True, agent="codex")
    assert found.data == whole.data and whole.data and not found.rendered
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 1, files  # the rendering only: no copy of the text stays


def rendered_in_memory(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths a worker renders in memory from now on (it still does)."""
    seen: list[str] = []
    render = render_worker._render

    def noted(path: Path, *args: Any) -> Any:
        seen.append(str(path))
        return render(path, *args)

    monkeypatch.setattr(render_worker, "_render", noted)
    return seen


@pytest.mark.parametrize("header_says_its_size", [True, False])
def test_a_small_compressed_rollout_of_a_big_text_is_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, header_says_its_size: bool
) -> None:
    """What a rendering in memory holds grows with the text, not with the ``.zst``
    (JSONL compresses 10-20 times, this one ~70): a worker streams a rollout whose
    text is over the limit though its compressed file is far under it, as the frame
    header says its text's size, or, when it does not, as `ASSUMED_RATIO` times the
    compressed size is over it; the same bytes as in memory. At the limit it is
    rendered in memory as before."""
    plain = a_long_codex_session(tmp_path / "rollout-long.jsonl")
    text = plain.read_bytes()
    compressor = zstandard.ZstdCompressor(write_content_size=header_says_its_size)
    path = plain.with_name(plain.name + ".zst")
    path.write_bytes(compressor.compress(text))
    plain.unlink()
    size = path.stat().st_size
    assert size * ASSUMED_RATIO < len(text)  # (a ratio the header alone can tell)
    whole = render_transcript(str(path), "k", None, True, agent="codex")
    text_size = len(text) if header_says_its_size else size * ASSUMED_RATIO
    in_memory = rendered_in_memory(monkeypatch)
    cache = tmp_path / "cache"
    over = render_transcript(
        str(path), "k", str(cache), False, agent="codex", stream_over=text_size - 1
    )
    assert over.rendered and in_memory == []
    found = render_transcript(str(path), "k", str(cache), True, agent="codex")
    assert found.data == whole.data and whole.data and not found.rendered
    at_limit = render_transcript(str(path), "k", None, True, agent="codex", stream_over=text_size)
    assert at_limit.data == whole.data and in_memory == [str(path)]


@pytest.mark.parametrize(
    ("agent", "name", "make"),
    [
        ("claude", "long.jsonl", a_long_claude_session),
        ("codex", "rollout-long.jsonl", a_long_codex_session),
    ],
)
def test_a_file_cut_short_while_it_is_streamed_fails_as_no_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str, name: str, make: Any
) -> None:
    """Another agent's file truncated between its index and the lines read again: a
    clear "changed" refusal (the next access renders it again), not a worker's crash."""
    path = make(tmp_path / agent / name)
    opened = render_worker.open_streamed

    def open_then_cut(agent_: str, at: str, decompress_dir: str | None) -> Any:
        index = opened(agent_, at, decompress_dir)
        with open(at, "r+b") as file:
            file.truncate(os.path.getsize(at) // 2)
        return index

    monkeypatch.setattr(render_worker, "open_streamed", open_then_cut)
    cache = tmp_path / "cache"
    with pytest.raises(RenderFailed, match="changed while it was rendered"):
        render_transcript(str(path), "k", str(cache), False, agent=agent, stream_over=1)
