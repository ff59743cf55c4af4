"""Progress of the search index's first build: the root ``ctl`` line (`SearchProgress`)
while a build is held between two slices, and ``sessionfs search`` under a terminal
(a progress line on stderr, erased when done) and piped (nothing extra)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
from support.mount import REPO, isolated_env
from support.tty import run_with_terminal_stderr

from core.search_index import SearchIndex
from sessionfs.view.progress_text import eta_text, rate_text, size_text
from sessionfs.view.search_view import SearchProgress, SearchView

PROJECT = "--work-demo--"
SESSIONS = 450  # three slices of the first build (200 files each)


def make_corpus(root: Path, count: int = SESSIONS) -> Path:
    agent = root / "agent"
    project = agent / "sessions" / PROJECT
    project.mkdir(parents=True)
    for n in range(count):
        header = {"type": "session", "version": 3, "id": f"s{n}", "cwd": "/work/demo",
                  "timestamp": "2026-01-01T00:00:00.000Z"}  # fmt: skip
        content = [{"type": "text", "text": f"okapi number {n}"}]
        entry = {"type": "message", "id": f"u{n}", "parentId": None,
                 "timestamp": "2026-01-01T00:01:00.000Z",
                 "message": {"role": "user", "content": content}}  # fmt: skip
        name = f"2026-01-01T00-00-00-000Z_s{n:04d}.jsonl"
        (project / name).write_bytes(orjson.dumps(header) + b"\n" + orjson.dumps(entry) + b"\n")
    return agent


def test_eta_rate_and_size_texts() -> None:
    assert eta_text(10.0, 40, 100) == "~15 s left"
    assert eta_text(60.0, 10, 100) == "~9 min left"
    assert eta_text(3600.0, 10, 100) == "~9.0 h left"
    assert eta_text(0.0, 0, 100) is None and eta_text(5.0, 100, 100) is None
    assert size_text(35 * 1024 * 1024) == "35.0 MB"
    assert rate_text(8 * 1024 * 1024, 2.0) == "4.0 MB/s" and rate_text(1, 0) == "-"


def test_ctl_shows_the_first_build_as_it_goes(tmp_path: Path) -> None:
    agent = make_corpus(tmp_path)
    view = SearchView(tmp_path / "cache", agent)
    index: SearchIndex = view._index
    real_update = index.update
    held, release = threading.Event(), threading.Event()
    calls = 0

    def update_held_before_the_second_slice(*args: object, **kwargs: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first slice is done and counted
            held.set()
            assert release.wait(60)
        return real_update(*args, **kwargs)  # type: ignore[arg-type]

    index.update = update_held_before_the_second_slice  # type: ignore[method-assign]
    assert view.first_build_pending()
    builder = threading.Thread(target=view.refresh)
    builder.start()
    try:
        assert held.wait(60)
        (name, text), _error = view.progress.ctl_items()
        assert name == "search"
        assert re.fullmatch(r"building 200/450 sessions \(44%\), ~\d+ (s|min) left", text), text
    finally:
        release.set()
        builder.join(60)
    assert view.progress.ctl_items()[0][1].startswith(f"ready, {SESSIONS} files")
    assert not view.first_build_pending()
    view.close()


def search_command(agent: Path, cache: Path) -> list[str]:
    return [sys.executable, "-m", "sessionfs", "search", "okapi", "--no-agents",
            "--agent-dir", str(agent), "--cache-dir", str(cache), "--limit", "1000"]  # fmt: skip


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_search_shows_a_first_build_on_a_terminal_only(tmp_path: Path, terminal: bool) -> None:
    agent = make_corpus(tmp_path)
    command = search_command(agent, tmp_path / "cache")
    env = isolated_env()
    if terminal:
        result = run_with_terminal_stderr(command, env=env)
        returncode, stdout, stderr = result.returncode, result.stdout, result.terminal
        assert "\r\x1b[Ksessionfs search: index: building" in stderr
        assert stderr.endswith("\r\x1b[K")  # erased: what follows starts on a clean line
        again = run_with_terminal_stderr(command, env=env)  # the index is built now
        assert again.terminal == "" and again.stdout == stdout
    else:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120,
                              cwd=REPO)  # fmt: skip
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
        assert stderr == ""
    assert returncode == 0
    assert len(stdout.splitlines()) == SESSIONS


def test_a_build_not_started_yet_says_so() -> None:
    assert SearchProgress().ctl_items()[0] == ("search", "building, starting")


def test_an_update_trouble_says_since_when_and_which_kind_a_clean_pass_ends() -> None:
    """``search_<name>_last_error``: the time a trouble first happened (kept while the
    same trouble comes back pass after pass); a failed pass's trouble is over once a
    full pass gets through, a skipped file's stays."""
    progress = SearchProgress()
    progress.trouble("opencode.db: database is locked", clears=True)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: opencode.db: database is locked",
                        progress.last_error or "")  # fmt: skip
    progress.last_error = "2000-01-01T00:00:00Z: opencode.db: database is locked"
    progress.trouble("opencode.db: database is locked", clears=True)  # the next pass
    assert progress.last_error == "2000-01-01T00:00:00Z: opencode.db: database is locked"
    progress.passed()
    assert progress.last_error is None
    progress.trouble("1 file(s) skipped: a.jsonl.zst: not zstd", clears=False)
    progress.passed()
    assert (progress.last_error or "").endswith("1 file(s) skipped: a.jsonl.zst: not zstd")
