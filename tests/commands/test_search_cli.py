"""sessionfs/commands/search.py: `sessionfs search WORDS... [--agent-dir] [--cache-dir]
[--limit]`, run as a user runs it (the real command in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from support.mount import REPO, isolated_env

from sessionfs.view.search_view import search_db_path

PROJECT = "--work-demo--"
STEM = "2026-01-01T00-00-00-000Z_sess-1"


def line(entry: dict) -> bytes:
    return orjson.dumps(entry) + b"\n"


def user(entry_id: str, text: str, minute: int) -> bytes:
    return line(
        {
            "type": "message",
            "id": entry_id,
            "parentId": None,
            "timestamp": f"2026-01-01T00:{minute:02d}:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        }
    )


HEADER = line(
    {
        "type": "session",
        "version": 3,
        "id": "sess-1",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/work/demo",
    }
)


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    project = tmp_path / "agent" / "sessions" / PROJECT
    project.mkdir(parents=True)
    (project / f"{STEM}.jsonl").write_bytes(
        HEADER + user("u1", "fix the flaky parser", 1) + user("u2", "parser tests pass now", 2)
    )
    # A sub-agent's file in the session's artifacts dir.
    (project / STEM).mkdir()
    (project / STEM / "task-7.jsonl").write_bytes(HEADER + user("s1", "sub agent parser audit", 3))
    return tmp_path / "agent"


def search(
    agent_dir: Path, *words: str, cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    cache = cache or agent_dir.parent / "cache"
    options = ["--agent-dir", str(agent_dir), "--cache-dir", str(cache)]
    return subprocess.run(
        [sys.executable, "-m", "sessionfs", "search", *words, *options],
        cwd=REPO,
        env=isolated_env(),  # never the machine user's Claude Code or Codex sessions
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_prints_hits_newest_first_with_their_paths_in_the_mount(agent_dir: Path) -> None:
    result = search(agent_dir, "parser")
    assert result.returncode == 0, result.stderr
    rows = [row.split("\t") for row in result.stdout.splitlines()]
    base = f"sessions/{PROJECT}/{STEM}"
    assert rows == [
        [
            "2026-01-01T00:03:00.000Z",
            f"{base}/subagents/task-7/entries/s1.json",
            "user",
            "sub agent parser audit",
        ],
        ["2026-01-01T00:02:00.000Z", f"{base}/entries/u2.json", "user", "parser tests pass now"],
        ["2026-01-01T00:01:00.000Z", f"{base}/entries/u1.json", "user", "fix the flaky parser"],
    ]
    assert search(agent_dir, "parser", "--limit", "1").stdout.count("\n") == 1


def test_each_run_indexes_what_was_appended_since(agent_dir: Path) -> None:
    assert search(agent_dir, "parser").returncode == 0
    assert search(agent_dir, "okapi").returncode == 1  # nothing matched: exit 1, no output
    with open(agent_dir / "sessions" / PROJECT / f"{STEM}.jsonl", "ab") as out:
        out.write(user("u3", "an okapi appeared", 4))
    result = search(agent_dir, "okapi")
    assert result.returncode == 0
    assert result.stdout.split("\t")[1].endswith("/entries/u3.json")


def test_hostile_queries_exit_cleanly(agent_dir: Path) -> None:
    for words in (["!!!", "...", "???"], ["x" * 10_000], ['"unclosed', "AND", "NEAR("]):
        result = search(agent_dir, *words)
        assert result.returncode == 1 and result.stdout == ""
        assert "Traceback" not in result.stderr
    long_but_matching = search(agent_dir, "flaky " + "~" * 10_000)
    assert long_but_matching.returncode == 0 and "u1.json" in long_but_matching.stdout


def test_a_garbage_cache_is_rebuilt_and_bad_arguments_are_one_line(agent_dir: Path) -> None:
    db = search_db_path(agent_dir.parent / "cache", agent_dir)
    db.parent.mkdir(parents=True)
    db.write_bytes(b"garbage" * 1000)
    assert search(agent_dir, "flaky").returncode == 0
    missing = search(agent_dir.parent / "nowhere", "flaky")
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr
    unwritable = agent_dir.parent / "a-file"
    unwritable.write_text("not a dir")
    result = search(agent_dir, "flaky", cache=unwritable)
    assert result.returncode == 2 and "search index unavailable" in result.stderr
