"""A session file too big for the daemon to render in memory (issue 26 point 6: "a
single 500 MB session file: ``cat transcript.md | tail``, ``grep`` and
``context.json`` work"), through a real mount: the render workers write its
``transcript.md`` and ``context.json`` into the cache dir a message at a time, and
``cat``, ``tail``, ``grep`` and ``ls -l`` read them from there, byte for byte what the
rendering in memory makes. The limit is lowered (``SESSIONFS_RENDER_LIMIT_BYTES``) so a
file of a few MB takes that path; tests/fs/test_compact_reads.py takes it through
``--cache-mb`` with a 12 MB file, bench/bench_huge_file.py with 540 MB."""

from __future__ import annotations

import errno
import html
import os
import stat
import subprocess
from pathlib import Path

import orjson
import pytest
from support.long_sessions import PROBE, Chain, a_long_session, turns
from support.mount import MountFactory, isolated_env
from support.other_agents import fake_home, home_env
from support.waiting import eventually

from sessionfs.view.cache_dir import agent_cache_dir
from sessionfs.view.loaded_session import LoadedSession
from sessionfs.view.session_cache import RENDER_LIMIT_ENV
from sessionfs.view.session_ref import SessionRef

pytestmark = pytest.mark.fuse

#: Files bigger than this are "too big to render in memory" for these mounts.
RENDER_LIMIT = 100_000
PROJECT = "--work--"
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


def cat(path: Path) -> bytes:
    return subprocess.run(["cat", str(path)], capture_output=True, check=True, timeout=120).stdout


def in_memory(path: Path, what: str) -> bytes:
    ref = SessionRef(path.parent.name, path.stem, path, {}, 0, 0)
    session = LoadedSession(ref=ref)
    session.load()
    return session.rendered(what)


def stored_in(cache_dir: Path) -> list[Path]:
    """The cache files in ``cache_dir`` (not a temporary file being written)."""
    return [p for p in cache_dir.iterdir() if not p.name.startswith(".")]


def nothing_refused_nor_written(session: Path, file: Path, before: bytes) -> None:
    assert "last_error: \n" in cat(session / "ctl").decode()
    assert file.read_bytes() == before


def big_session(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    path = a_long_session(agent / "sessions" / PROJECT)
    assert path.stat().st_size > 4 * RENDER_LIMIT
    return path


def mount_with_a_low_limit(mount_factory: MountFactory, agent: Path, cache: Path) -> Path:
    env = {**isolated_env(), RENDER_LIMIT_ENV: str(RENDER_LIMIT)}
    mount = mount_factory(agent, "--no-agents", "--cache-dir", str(cache), env=env)
    return mount.path


def test_a_file_too_big_to_render_in_memory_is_read_cat_tail_and_grep(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file = big_session(tmp_path)
    before = file.read_bytes()
    cache = tmp_path / "cache"
    mnt = mount_with_a_low_limit(mount_factory, tmp_path / "agent", cache)
    session = mnt / "sessions" / PROJECT / file.stem

    transcript = in_memory(file, "transcript.md")
    context = in_memory(file, "context.json")
    assert run("sh", "-c", f"cat '{session}/transcript.md' | tail -n 3").encode() == (
        b"\n".join(transcript.split(b"\n")[-4:])
    )
    assert int(run("grep", "-c", PROBE, str(session / "transcript.md"))) == (
        transcript.count(PROBE.encode())
    )
    assert cat(session / "context.json") == context
    assert run("tail", "-c", "200", str(session / "context.json")).encode() == context[-200:]
    assert os.stat(session / "context.json").st_size == len(context)
    assert os.stat(session / "transcript.md").st_size == len(transcript)
    assert cat(mnt / "transcripts" / PROJECT / f"{file.stem}.md") == transcript
    assert orjson.loads(cat(session / "context.json"))["models"] == orjson.loads(context)["models"]

    # Written into the cache dir (private, as everything the daemon writes), not held.
    own = agent_cache_dir(cache, tmp_path / "agent")
    for kind in ("renders", "contexts"):
        (stored,) = stored_in(own / kind)
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600, kind
    nothing_refused_nor_written(session, file, before)


def test_another_process_appends_and_the_streamed_renderings_follow(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file = big_session(tmp_path)
    mnt = mount_with_a_low_limit(mount_factory, tmp_path / "agent", tmp_path / "cache")
    session = mnt / "sessions" / PROJECT / file.stem
    assert cat(session / "context.json") == in_memory(file, "context.json")
    assert cat(session / "transcript.md") == in_memory(file, "transcript.md")

    lines = [orjson.loads(line) for line in file.read_bytes().splitlines()]
    more = Chain()
    more.lines, more.last = lines[1:], lines[-1]["id"]
    count = len(more.lines)
    turns(more, 2, start=9000)
    with open(file, "ab") as f:  # another process appends two turns
        f.write(b"".join(orjson.dumps(e) + b"\n" for e in more.lines[count:]))

    def shows_the_append() -> bool:
        return b"prompt 9001" in cat(session / "transcript.md")

    eventually(shows_the_append, "the appended prompt in transcript.md", within=30)
    assert cat(session / "transcript.md") == in_memory(file, "transcript.md")
    assert cat(session / "context.json") == in_memory(file, "context.json")


def test_the_page_of_a_file_too_big_to_render_in_memory_is_streamed_and_escaped(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """``transcript.html`` comes from the pages' worker, written a message at a time
    into the cache dir: the page rendered in memory, a hostile string escaped."""
    file = big_session(tmp_path)
    last = orjson.loads(file.read_bytes().splitlines()[-1])["id"]
    hostile = {
        "type": "message",
        "id": "hostile1",
        "parentId": last,
        "timestamp": "2026-01-02T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": HOSTILE}]},
    }
    with open(file, "ab") as f:
        f.write(orjson.dumps(hostile) + b"\n")
    before = file.read_bytes()
    cache = tmp_path / "cache"
    mnt = mount_with_a_low_limit(mount_factory, tmp_path / "agent", cache)
    session = mnt / "sessions" / PROJECT / file.stem

    page = in_memory(file, "transcript.html")
    assert cat(session / "transcript.html") == page
    assert os.stat(session / "transcript.html").st_size == len(page)
    assert run("tail", "-c", "300", str(session / "transcript.html")).encode() == page[-300:]
    assert HOSTILE.encode() not in page and html.escape(HOSTILE).encode() in page
    # The turns since the last compaction, and its summary: core's context rules.
    assert page.count(b'<section class="msg ') > 30 and b"were summarised" in page
    own = agent_cache_dir(cache, tmp_path / "agent")
    (stored,) = stored_in(own / "pages")
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stored.stat().st_size > len(page)  # the page itself, behind its head
    # The same job wrote transcript.md and context.json from its index of the file.
    assert stored_in(own / "renders") and stored_in(own / "contexts")
    assert cat(session / "transcript.md") == in_memory(file, "transcript.md")
    assert cat(session / "context.json") == in_memory(file, "context.json")
    nothing_refused_nor_written(session, file, before)


def test_a_rendering_with_nowhere_to_go_is_efbig_with_the_reason_in_ctl(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    file = big_session(tmp_path)
    cache = tmp_path / "cache"
    own = agent_cache_dir(cache, tmp_path / "agent")
    own.mkdir(parents=True)
    (own / "contexts").write_text("a file where the contexts dir should be")
    mnt = mount_with_a_low_limit(mount_factory, tmp_path / "agent", cache)
    session = mnt / "sessions" / PROJECT / file.stem

    with pytest.raises(OSError) as refused:
        (session / "context.json").read_bytes()
    assert refused.value.errno == errno.EFBIG
    status = cat(session / "ctl").decode()
    assert "last_error: context.json: the session file is" in status
    assert "cannot be written to the cache dir" in status
    # The rest still works: the transcript has its own cache dir, entries their lines.
    assert cat(session / "transcript.md") == in_memory(file, "transcript.md")
    assert len(os.listdir(session / "entries")) == len(file.read_bytes().splitlines()) - 1


def test_another_agents_file_over_the_limit_serves_the_same_entries(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Claude Code's session read where it is (its lines from the file, never held
    whole) shows exactly what the same session read whole shows."""
    trees = fake_home(tmp_path / "home")
    agent = tmp_path / "xcsh"
    (agent / "sessions").mkdir(parents=True)
    whole = mount_factory(agent, "--agents", "claude", env=home_env(trees.home), name="whole")
    size = trees.claude_compacted.stat().st_size
    in_place_env = {**home_env(trees.home), RENDER_LIMIT_ENV: str(size // 2)}
    in_place = mount_factory(agent, "--agents", "claude", env=in_place_env, name="in-place")

    def shown(mnt: Path) -> dict[str, bytes]:
        (session,) = (mnt / "agents" / "claude" / "sessions").glob(
            f"*/{trees.claude_compacted.stem}"
        )
        files = {name: cat(session / "entries" / name) for name in os.listdir(session / "entries")}
        files["leaf"] = os.readlink(session / "leaf").encode()
        return files

    expected = shown(whole.path)
    assert len(expected) > 5
    assert shown(in_place.path) == expected


def test_a_branch_page_of_a_file_too_big_to_render_is_efbig_with_the_reason(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """A branch page is made only in memory: for a file this big it is refused, and
    ``ctl`` says why and what still serves the file (the page at its leaf does)."""
    file = big_session(tmp_path)
    mnt = mount_with_a_low_limit(mount_factory, tmp_path / "agent", tmp_path / "cache")
    session = mnt / "sessions" / PROJECT / file.stem
    pages = os.listdir(session / "branches")
    assert len(pages) >= 2  # the long session has a branch
    with pytest.raises(OSError) as refused:
        (session / "branches" / pages[0]).read_bytes()
    assert refused.value.errno == errno.EFBIG
    status = cat(session / "ctl").decode()
    assert f"last_error: branches/{pages[0]}: the session file is" in status
    assert "a branch page is made only in memory, so not for a file this big" in status
    assert cat(session / "transcript.html") == in_memory(file, "transcript.html")
