"""A Claude Code session file too big for the daemon to render in memory (issue 26
point 6: real Claude Code users have the biggest files), through a real mount: the
render workers write its ``transcript.md``, ``context.json`` and ``transcript.html``
into the cache dir a turn at a time, and ``cat``, ``tail``, ``grep`` and ``ls -l`` read
them from there, byte for byte what the rendering in memory makes (compactions, a
preserved segment, parallel tool calls, a rewound branch: `a_long_claude_session`).
A Codex rollout over the limit is read the same way. The limit is lowered
(``SESSIONFS_RENDER_LIMIT_BYTES``) so a file of a few MB takes that path;
bench/bench_huge_file.py ``--claude`` takes it with hundreds of MB."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import orjson
import pytest
import zstandard
from support.long_claude_sessions import SESSION_ID, a_long_claude_session, claude_turns
from support.long_codex_sessions import SESSION_ID as CODEX_SESSION_ID
from support.long_codex_sessions import a_long_codex_session
from support.long_sessions import PROBE
from support.mount import MountFactory
from support.other_agents import home_env, load_demo_agents
from support.waiting import eventually

from sessionfs.view.agent_sources import open_agent_file
from sessionfs.view.renderings import render_source
from sessionfs.view.search_view import DB_NAME
from sessionfs.view.session_cache import RENDER_LIMIT_ENV

pytestmark = pytest.mark.fuse

#: Files bigger than this are "too big to render in memory" for these mounts.
RENDER_LIMIT = 100_000


def run(*argv: str) -> bytes:
    done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


def in_memory(path: Path, what: str) -> bytes:
    return render_source(open_agent_file("claude", path), what, path=path)


def mounted_big_session(
    tmp_path: Path, mount_factory: MountFactory
) -> tuple[Path, Path, Path, Path]:
    """(the session file, its dir in the mount, the mount, the cache dir)."""
    home = tmp_path / "home"
    file = a_long_claude_session(home / ".claude" / "projects" / "-home-me-app" / "s.jsonl")
    file = file.rename(file.with_name(f"{SESSION_ID}.jsonl"))
    assert file.stat().st_size > 10 * RENDER_LIMIT
    agent = tmp_path / "xcsh"
    (agent / "sessions").mkdir(parents=True)
    cache = tmp_path / "cache"
    env = {**home_env(home), RENDER_LIMIT_ENV: str(RENDER_LIMIT)}
    mount = mount_factory(agent, "--agents", "claude", "--cache-dir", str(cache), env=env)
    (session,) = (mount.path / "agents" / "claude" / "sessions").glob(f"*/{SESSION_ID}")
    return file, session, mount.path, cache


def test_a_claude_file_too_big_to_render_in_memory_is_read_cat_tail_and_grep(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file, session, mnt, cache = mounted_big_session(tmp_path, mount_factory)
    before = file.read_bytes()
    transcript = in_memory(file, "transcript.md")
    context = in_memory(file, "context.json")
    page = in_memory(file, "transcript.html")

    context_tail = run("sh", "-c", f"cat '{session}/context.json' | tail -c 300")
    assert context_tail == context[-300:]
    assert run("tail", "-n", "3", str(session / "transcript.md")) == b"\n".join(
        transcript.split(b"\n")[-4:]
    )
    assert int(run("grep", "-c", PROBE, str(session / "transcript.md"))) == (
        transcript.count(PROBE.encode())
    )
    assert run("cat", str(session / "context.json")) == context
    assert orjson.loads(context)["messages"][0]["content"] == "Summary: the second part."
    assert run("cat", str(session / "transcript.html")) == page
    for name, rendered in (
        ("transcript.md", transcript),
        ("context.json", context),
        ("transcript.html", page),
    ):
        assert os.stat(session / name).st_size == len(rendered), name
    project = session.parent.name
    transcripts = mnt / "agents" / "claude" / "transcripts" / project / f"{SESSION_ID}.md"
    assert run("cat", str(transcripts)) == transcript

    # Written into the cache dir (private, as everything the daemon writes), not held.
    for kind in ("renders", "contexts", "pages"):
        stored = [p for p in cache.glob(f"*/{kind}/*") if not p.name.startswith(".")]
        assert stored, kind
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in stored), kind
    assert "last_error: \n" in run("cat", str(session / "ctl")).decode()
    assert file.read_bytes() == before


def test_claude_code_appends_and_the_streamed_renderings_follow(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file, session, _mnt, _cache = mounted_big_session(tmp_path, mount_factory)
    assert run("cat", str(session / "context.json")) == in_memory(file, "context.json")
    assert run("cat", str(session / "transcript.md")) == in_memory(file, "transcript.md")

    lines = [orjson.loads(line) for line in file.read_bytes().splitlines() if line[:1] == b"{"]
    demo = load_demo_agents()
    more = demo.ClaudeLines("appended", "/home/me/app", 1_790_000_000.0)  # its own uuids
    (leaf,) = [line["leafUuid"] for line in lines if line.get("type") == "last-prompt"]
    more.last = leaf
    claude_turns(more, 2, start=20_000)
    more.meta("last-prompt", lastPrompt="prompt 20001", leafUuid=more.last)
    with open(file, "ab") as f:  # Claude Code appends two turns
        f.write(
            b"".join(orjson.dumps({**line, "sessionId": SESSION_ID}) + b"\n" for line in more.lines)
        )

    def shows_the_append() -> bool:
        return b"prompt 20001" in run("cat", str(session / "transcript.md"))

    eventually(shows_the_append, "the appended prompt in transcript.md", within=30)
    assert run("cat", str(session / "transcript.md")) == in_memory(file, "transcript.md")
    assert run("cat", str(session / "context.json")) == in_memory(file, "context.json")


def mounted_codex(
    tmp_path: Path, mount_factory: MountFactory, archived: bool = False, small: bool = False
) -> tuple[Path, Path, Path]:
    """A long Codex rollout over the render limit (``archived``: as a ``.jsonl.zst``,
    whose text compresses so well that the limit is set below its compressed size;
    ``small``: above it, twice the compressed size, the text still ~35 times over it),
    mounted: (the rollout, its dir in the mount, the cache dir)."""
    home = tmp_path / "home"
    demo = load_demo_agents()
    path = demo.rollout_path(home / ".codex", 1_780_000_000.0, CODEX_SESSION_ID, archived)
    file = a_long_codex_session(path)
    limit, text_size = RENDER_LIMIT, file.stat().st_size
    if archived:
        plain, file = file, file.with_name(file.name + ".zst")
        file.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
        plain.unlink()
        limit = file.stat().st_size * 2 if small else file.stat().st_size // 2
    assert text_size > 2 * limit
    agent = tmp_path / "xcsh"
    (agent / "sessions").mkdir(parents=True)
    env = {**home_env(home), RENDER_LIMIT_ENV: str(limit)}
    cache = tmp_path / "cache"
    mount = mount_factory(agent, "--agents", "codex", "--cache-dir", str(cache), env=env)
    return file, mount.path / "agents" / "codex" / "by-id" / CODEX_SESSION_ID, cache


def codex_in_memory(file: Path, what: str) -> bytes:
    return render_source(open_agent_file("codex", file), what, path=file)


def test_a_codex_rollout_too_big_to_render_in_memory_is_read_the_same_way(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file, session, cache = mounted_codex(tmp_path, mount_factory)
    context, transcript = (
        codex_in_memory(file, "context.json"),
        codex_in_memory(file, "transcript.md"),
    )
    assert run("sh", "-c", f"cat '{session}/context.json' | tail -c 300") == context[-300:]
    assert run("tail", "-n", "3", str(session / "transcript.md")) == b"\n".join(
        transcript.split(b"\n")[-4:]
    )
    assert int(run("grep", "-c", PROBE, str(session / "transcript.md"))) == (
        transcript.count(PROBE.encode())
    )
    assert run("cat", str(session / "transcript.html")) == codex_in_memory(file, "transcript.html")
    assert [p for p in cache.glob("*/contexts/*") if not p.name.startswith(".")]


@pytest.mark.parametrize("small", [False, True], ids=["over", "text-over"])
def test_an_archived_codex_rollout_too_big_to_render_in_memory_is_streamed_too(
    tmp_path: Path, mount_factory: MountFactory, small: bool
) -> None:
    """A ``.jsonl.zst`` over the limit, or whose text is (``small``: its compressed
    file under it): a worker decompresses its text once into a file of the cache dir
    that has no name (0600, gone after the job) and writes the three renderings from
    it, as for a plain rollout; nothing of the text stays behind."""
    file, session, cache = mounted_codex(tmp_path, mount_factory, archived=True, small=small)
    transcript = codex_in_memory(file, "transcript.md")
    assert run("tail", "-n", "3", str(session / "transcript.md")) == b"\n".join(
        transcript.split(b"\n")[-4:]
    )
    assert int(run("grep", "-c", PROBE, str(session / "transcript.md"))) == (
        transcript.count(PROBE.encode())
    )
    written = [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")]
    streamed = [p for p in written if p.parent.name in ("renders", "contexts", "pages")]
    # The three written by one streamed job before the other two are asked for (in
    # memory, each rendering is its own job).
    assert sorted(p.parent.name for p in streamed) == ["contexts", "pages", "renders"]
    assert run("cat", str(session / "context.json")) == codex_in_memory(file, "context.json")
    assert run("cat", str(session / "transcript.html")) == codex_in_memory(file, "transcript.html")
    size = len(transcript)
    for path in written:  # no copy of the text (~ the transcript's size) stays
        assert path.stat().st_mode & 0o777 == 0o600, path
        # (The search index holds the text's words: its file and write-ahead log may
        # pass a quarter of it, as seen under load, but never hold a whole copy.)
        most = size if path.name.startswith(DB_NAME) else size // 4
        assert path in streamed or path.stat().st_size < most, path
