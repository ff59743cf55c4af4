"""``search/<words>`` through a real mount: what ``cat`` gives, that the printed entry
paths read back, the query syntax, hostile names, files changed by other processes
while the mount runs, and a cache dir that is corrupt, deleted or on a full disk.
None of it may change a byte under the agent dir."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from support.file_snapshot import files_snapshot
from support.mount import REPO, Mount, MountFactory, isolated_env, run
from support.waiting import search_ready
from support.write_setup import read_ctl

from sessionfs.view.search_view import search_db_path

pytestmark = pytest.mark.fuse

WAIT = 15.0


def wait_for(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def cat_search(mount: Mount, query: str) -> list[list[str]]:
    """``cat "search/<query>"``, each line split into its four fields."""
    out = run("cat", mount.path / "search" / query)
    return [line.split("\t") for line in out.splitlines()]


def cache_dir_of(mount: Mount) -> Path:
    return mount.path.parent / f"{mount.path.name}.cache"  # support.mount's default


def session_files(agent_dir: Path) -> list[Path]:
    return sorted((agent_dir / "sessions").glob("*/*.jsonl"))


def user_line(entry_id: str, text: str) -> bytes:
    entry = {
        "type": "message",
        "id": entry_id,
        "parentId": None,
        "timestamp": "2027-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    }
    return orjson.dumps(entry) + b"\n"


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as out:
        out.write(data)


@pytest.fixture
def searched(demo_agent: Path, mount_factory: MountFactory) -> Iterator[Mount]:
    """A demo mount with its index built; afterwards the agent dir must be unchanged
    but for what the test itself wrote (tests that write take their own snapshot)."""
    before = files_snapshot(demo_agent)
    mount = mount_factory(demo_agent)
    search_ready(mount.path)
    yield mount
    assert files_snapshot(demo_agent) == before


# --- what cat gives -------------------------------------------------------------------


def test_cat_search_lists_hits_newest_first_and_their_paths_read_back(searched: Mount) -> None:
    hits = cat_search(searched, "redirect loop")
    assert len(hits) == 2
    assert all(len(fields) == 4 for fields in hits)
    times = [fields[0] for fields in hits]
    assert times == sorted(times, reverse=True)
    assert {fields[2] for fields in hits} == {"user", "assistant"}
    for when, path, role, snippet in hits:
        assert path.startswith("sessions/") and "/entries/" in path, path
        entry = orjson.loads(run("cat", searched.path / path))
        assert entry["timestamp"] == when
        assert entry["message"]["role"] == role
        assert "redirect loop" in snippet.lower()
    assert run("ls", "-A", searched.path / "search") == ""  # lookup-only: lists empty


def test_a_search_right_after_mounting_waits_for_the_first_build(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    """A script that mounts and searches at once: the index of a small agent dir is
    built within moments, so the first search waits for it rather than answer from a
    half-built (here: empty) index."""
    mount = mount_factory(demo_agent)
    hits = cat_search(mount, "redirect loop")  # the very first request after mounting
    assert len(hits) == 2, hits
    assert read_ctl(mount.path)["search"].startswith("ready")


def test_the_command_line_prints_what_the_mount_shows(searched: Mount, tmp_path: Path) -> None:
    options = ["--agent-dir", str(searched.agent_dir), "--cache-dir", str(tmp_path / "cli")]
    out = subprocess.run(
        [sys.executable, "-m", "sessionfs", "search", "redirect", "loop", *options],
        cwd=REPO,
        env=isolated_env(),  # never the machine user's Claude Code or Codex sessions
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out == run("cat", searched.path / "search" / "redirect loop")


def test_words_are_anded_quoted_phrases_kept_and_the_last_word_a_prefix(searched: Mount) -> None:
    both = cat_search(searched, "redirect regression")
    assert [fields[3] for fields in both] == ["Write a regression test for the redirect loop."]
    phrase = cat_search(searched, '"exempt the"')
    assert len(phrase) == 2 and all("exempt the" in f[3].lower() for f in phrase)
    assert cat_search(searched, '"the exempt"') == []
    prefix = cat_search(searched, "redir")  # the last word matches as a prefix
    assert {tuple(f) for f in cat_search(searched, "redirect")} <= {tuple(f) for f in prefix}
    assert cat_search(searched, "redir loop") == []  # only the last word is a prefix


def test_hostile_queries_never_fail_and_a_name_too_long_is_the_kernels_enametoolong(
    searched: Mount,
) -> None:
    search = searched.path / "search"
    assert run("cat", search / "!!! ... ???") == ""  # only punctuation: no words, no hits
    assert run("cat", search / 'AND OR NOT NEAR( col: * ^ "') == ""  # FTS syntax: just words
    # A query is a file name: %2F stands for "/", which a name cannot hold.
    slashed = cat_search(searched, "src%2Fauth.ts")
    assert slashed and all("src/auth.ts" in fields[3] for fields in slashed)
    long_query = "redirect loop " + "~" * 980  # 994 bytes: the kernel still passes it on
    assert cat_search(searched, long_query) == cat_search(searched, "redirect loop")
    result = subprocess.run(
        ["cat", str(search / ("x" * 10_000))], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert os.strerror(errno.ENAMETOOLONG) in result.stderr
    assert searched.alive()


# --- files changed by other processes -----------------------------------------------


def test_an_append_by_another_process_is_found_within_seconds(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount = mount_factory(demo_agent)
    search_ready(mount.path)
    target = session_files(demo_agent)[0]
    append(target, user_line("zz-new-1", "the quokka migration is done"))
    wait_for(lambda: len(cat_search(mount, "quokka")) == 1, "the appended entry")
    [[_, path, role, snippet]] = cat_search(mount, "quokka")
    assert path.endswith("/entries/zz-new-1.json") and role == "user"
    assert "quokka migration" in snippet
    assert orjson.loads(run("cat", mount.path / path))["id"] == "zz-new-1"


def test_truncated_replaced_and_deleted_files_leave_no_stale_hits(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    first, second = session_files(demo_agent)[:2]
    append(first, user_line("zz-trunc", "a wombat was here"))
    append(second, user_line("zz-gone", "an axolotl was here"))
    mount = mount_factory(demo_agent)
    search_ready(mount.path)
    assert len(cat_search(mount, "wombat")) == 1 and len(cat_search(mount, "axolotl")) == 1

    # Truncated back to what it was: the wombat line is gone.
    data = first.read_bytes()
    with open(first, "r+b") as out:
        out.truncate(data.index(b'{"type":"message","id":"zz-trunc"'))
    wait_for(lambda: cat_search(mount, "wombat") == [], "the truncated line to go")

    # Replaced (a new inode, as an atomic rewrite does) with a new word in it.
    replacement = first.with_suffix(".tmp")
    replacement.write_bytes(first.read_bytes() + user_line("zz-repl", "a numbat arrived"))
    os.replace(replacement, first)
    wait_for(lambda: len(cat_search(mount, "numbat")) == 1, "the replaced file's entry")

    second.unlink()  # deleted: its entries are no longer found
    wait_for(lambda: cat_search(mount, "axolotl") == [], "the deleted file's entries to go")
    assert second.stem not in run("cat", mount.path / "search" / "here")


# --- the cache dir ----------------------------------------------------------------------


def test_a_corrupt_or_deleted_cache_is_rebuilt(
    demo_agent: Path, mount_factory: MountFactory
) -> None:
    before = files_snapshot(demo_agent)
    cache = demo_agent.parent / "cache"
    db = search_db_path(cache, demo_agent)
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not an sqlite database, just garbage\n" * 100)
    mount = mount_factory(demo_agent, "--cache-dir", str(cache))
    search_ready(mount.path)
    assert len(cat_search(mount, "redirect loop")) == 2
    assert db.read_bytes()[:16] == b"SQLite format 3\0"

    shutil.rmtree(cache)  # deleted under the running mount: rebuilt, not written unlinked
    wait_for(db.exists, "the index to be rebuilt")
    search_ready(mount.path)
    assert len(cat_search(mount, "redirect loop")) == 2
    assert files_snapshot(demo_agent) == before


def test_a_cache_dir_on_a_full_disk_leaves_the_mount_working_and_says_why(
    demo_agent: Path, mount_factory: MountFactory, full_disk: Path
) -> None:
    before = files_snapshot(demo_agent)
    mount = mount_factory(demo_agent, "--cache-dir", str(full_disk / "cache"))
    wait_for(lambda: read_ctl(mount.path)["search"].startswith("unavailable"), "search unavailable")
    assert cat_search(mount, "redirect loop") == []  # no index: no hits, no error
    sessions = run("ls", mount.path / "sessions").split()
    assert len(sessions) == 3
    header = orjson.loads(run("cat", next(mount.path.glob("sessions/*/*/header.json"))))
    assert header["type"] == "session"
    assert mount.alive()
    assert files_snapshot(demo_agent) == before
