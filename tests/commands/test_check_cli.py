"""`sessionfs check` on the command line: paths, exit codes, --json, --fix, progress."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from core.check import STALE_TEMP_SECONDS
from core.jsonl import dumps_line, load_entries_from_file, parse_jsonl_lenient
from core.migrate import migrate_session_entries
from sessionfs.commands.check import add_check_parser, run_check

REPO = Path(__file__).resolve().parents[2]
HEADER = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-01-01T00:00:00.000Z"}
V1_HEADER = {"type": "session", "id": "old", "timestamp": "2025-01-01T00:00:00.000Z"}


def message(entry_id: str, parent: str | None) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    }


def write(path: Path, *lines: dict[str, Any] | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(dumps_line(x) if isinstance(x, dict) else x for x in lines))
    return path


def run(*argv: str) -> int:
    """The command exactly as the CLI would run it, through a tiny argparse."""
    parser = argparse.ArgumentParser(prog="sessionfs")
    add_check_parser(parser.add_subparsers(dest="command", required=True))
    return run_check(parser.parse_args(["check", *argv]))


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    """An agent dir with one clean session in one project."""
    agent_dir = tmp_path / "agent"
    write(agent_dir / "sessions" / "--work-a--" / "clean.jsonl", HEADER, message("aaaaaaaa", None))
    return agent_dir


def add_broken(agent_dir: Path) -> Path:
    v1 = {"type": "message", "timestamp": "t", "message": {"role": "user", "content": "x"}}
    return write(agent_dir / "sessions" / "--work-b--" / "old.jsonl", V1_HEADER, v1, b'{"tor')


def test_clean_agent_dir_exits_0(agent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--agent-dir", str(agent)) == 0
    out = capsys.readouterr().out
    assert out.strip() == "checked 1 file(s): 1 clean, 0 with problems"


def test_problems_exit_1_grouped_per_file(agent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = add_broken(agent)
    assert run("--agent-dir", str(agent)) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{broken}: v1, 1 entries"
    assert "migration-pending" in out and "torn-last-line" in out and "line 3:" in out
    assert "clean.jsonl" not in out  # clean files are only counted
    assert "checked 2 file(s): 1 clean, 1 with problems" in out


def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("--agent-dir", str(tmp_path / "missing")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no agent directory" in err and "Traceback" not in err

    assert run("--agent-dir", str(tmp_path)) == 2  # an agent dir without sessions/
    assert "no sessions directory" in capsys.readouterr().err

    (tmp_path / "sessions").mkdir()
    assert run("--agent-dir", str(tmp_path), str(tmp_path / "nope.jsonl")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope.jsonl" in err


def test_default_agent_dir_comes_from_the_environment(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    assert run() == 0
    add_broken(agent)
    assert run() == 1


def test_paths_may_be_files_or_directories(
    agent: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = add_broken(agent)
    clean = agent / "sessions" / "--work-a--" / "clean.jsonl"
    elsewhere = write(tmp_path / "loose" / "deep" / "x.jsonl", HEADER)
    capsys.readouterr()
    assert run("--json", str(clean), str(tmp_path / "loose")) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert [f["path"] for f in document["files"]] == sorted([str(clean), str(elsewhere)])
    assert run("--json", str(broken.parent)) == 1
    assert [f["path"] for f in orjson.loads(capsys.readouterr().out)["files"]] == [str(broken)]


def test_json_shape(agent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = add_broken(agent)
    assert run("--agent-dir", str(agent), "--json") == 1
    document = orjson.loads(capsys.readouterr().out)
    assert set(document) == {"exit", "summary", "files"}
    assert document["exit"] == 1
    assert document["summary"] == {"checked": 2, "clean": 1, "with_problems": 1, "findings": 2}
    by_path = {f["path"]: f for f in document["files"]}
    report = by_path[str(broken)]
    assert (report["version"], report["migration_pending"], report["clean"]) == (1, True, False)
    assert [(f["code"], f["line"], f["fixable"]) for f in report["findings"]] == [
        ("migration-pending", 1, True),
        ("torn-last-line", 3, True),
    ]
    assert report["remaining"] is None and report["fixed"] == []


def test_fix_then_second_run_is_clean(agent: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = add_broken(agent)
    expected = parse_jsonl_lenient(broken.read_bytes())
    migrate_session_entries(expected)
    temp = broken.parent / f".{broken.name}.deadbeef0000.tmp"
    temp.write_bytes(b"half a rewrite")
    old = time.time() - STALE_TEMP_SECONDS - 5
    os.utime(temp, (old, old))

    assert run("--agent-dir", str(agent), "--fix") == 0
    out = capsys.readouterr().out
    assert "fixed:   migrated v1 -> v3" in out
    assert "fixed:   dropped the torn last line 3" in out
    assert f"fixed:   removed stale temp file {temp.name}" in out
    assert "3 repair(s) done, 0 refused" in out
    assert not temp.exists()
    assert load_entries_from_file(broken) == expected

    assert run("--agent-dir", str(agent), "--fix", "--json") == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["summary"]["fixed"] == 0 and document["summary"]["findings"] == 0
    assert run("--agent-dir", str(agent)) == 0


def test_fix_that_cannot_repair_everything_exits_1(
    agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(agent / "sessions" / "--work-a--" / "bad.jsonl", HEADER, b"{oops\n")
    assert run("--agent-dir", str(agent), "--fix") == 1
    out = capsys.readouterr().out
    assert "malformed-line" in out and "left:    1 problem(s) need a human" in out
    assert bad.read_bytes().endswith(b"{oops\n")


def test_many_findings_of_one_kind_are_capped_in_human_output(
    agent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(agent / "sessions" / "--work-a--" / "bad.jsonl", HEADER, *([b"{oops\n"] * 25))
    assert run("--agent-dir", str(agent)) == 1
    out = capsys.readouterr().out
    assert out.count("malformed-line") == 21  # 20 shown + the "... and 5 more" line
    assert "... and 5 more malformed-line" in out


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(
    agent: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    add_broken(agent)
    assert run("--agent-dir", str(agent)) == 1
    assert capsys.readouterr().err == ""  # stderr is not a terminal under pytest

    tty = FakeTty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert run("--agent-dir", str(agent), "--json") == 1
    assert "checking [" in tty.getvalue() and "2/2 old.jsonl" in tty.getvalue()
    assert tty.getvalue().endswith("\r\x1b[K")  # the bar is wiped at the end
    assert orjson.loads(capsys.readouterr().out)["exit"] == 1  # stdout stays pure JSON


def _python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_module_imports_standalone() -> None:
    result = _python("-c", "import sessionfs.commands.check")
    assert result.returncode == 0, result.stderr


def test_python_m_sessionfs_check(agent: Path, real_fixture: Path) -> None:
    project = agent / "sessions" / "--work-real--"
    project.mkdir()
    copy = Path(shutil.copyfile(real_fixture, project / real_fixture.name))
    expected = parse_jsonl_lenient(copy.read_bytes())
    migrate_session_entries(expected)

    result = _python("-m", "sessionfs", "check", "--agent-dir", str(agent), "--json")
    assert result.returncode == 1, result.stderr
    report = {f["path"]: f for f in orjson.loads(result.stdout)["files"]}[str(copy)]
    assert [f["code"] for f in report["findings"]] == ["migration-pending"]

    result = _python("-m", "sessionfs", "check", "--agent-dir", str(agent), "--fix")
    assert result.returncode == 0, result.stdout + result.stderr
    assert load_entries_from_file(copy) == expected

    result = _python("-m", "sessionfs", "check", "--agent-dir", str(agent), "--fix")
    assert result.returncode == 0 and "0 repair(s) done" in result.stdout

    result = _python("-m", "sessionfs", "check", "--agent-dir", str(agent / "nope"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
