"""sessionfs/commands/history.py: `sessionfs history [search WORDS...]`."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from core.history import HistoryStorage, unescape_history_field
from sessionfs.commands.history import add_history_parser, run_history


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sessionfs")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_history_parser(subparsers)
    return parser.parse_args(argv)


def run(*argv: str) -> tuple[int, list[str]]:
    out = io.StringIO()
    args = parse(*argv)
    assert args.func is run_history
    status = run_history(args, out=out)
    return status, out.getvalue().splitlines()


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    with HistoryStorage(agent / "history.db") as storage:
        for prompt in ("fix the parser", "add parser tests", "multi\nline\tprompt", "deploy"):
            storage.add(prompt, "/work/demo")
        storage.flush()
    return agent


def test_recent_prints_newest_first_one_line_each(agent_dir: Path) -> None:
    status, lines = run("history", "--agent-dir", str(agent_dir))
    assert status == 0
    assert [line.split("\t")[2] for line in lines] == [
        "deploy",
        "multi\\nline\\tprompt",
        "add parser tests",
        "fix the parser",
    ]
    assert all(line.split("\t")[1] == "/work/demo" for line in lines)
    assert unescape_history_field(lines[1].split("\t")[2]) == "multi\nline\tprompt"


def test_limit_before_or_after_search(agent_dir: Path) -> None:
    assert len(run("history", "--agent-dir", str(agent_dir), "--limit", "2")[1]) == 2
    status, lines = run("history", "--agent-dir", str(agent_dir), "search", "pars", "--limit", "1")
    assert status == 0 and [line.split("\t")[2] for line in lines] == ["add parser tests"]
    status, lines = run("history", "--limit", "1", "search", "pars", "--agent-dir", str(agent_dir))
    assert status == 0 and len(lines) == 1


def test_search_requires_every_word(agent_dir: Path) -> None:
    status, lines = run("history", "--agent-dir", str(agent_dir), "search", "parser", "fix")
    assert status == 0
    assert [line.split("\t")[2] for line in lines] == ["fix the parser"]


def test_no_match_exits_1(agent_dir: Path) -> None:
    assert run("history", "--agent-dir", str(agent_dir), "search", "zzz") == (1, [])


def test_missing_agent_dir_exits_2(tmp_path: Path, capsys) -> None:
    assert run("history", "--agent-dir", str(tmp_path / "nope"))[0] == 2
    assert "does not exist" in capsys.readouterr().err


def test_no_history_yet_exits_1_without_creating_a_database(tmp_path: Path, capsys) -> None:
    assert run("history", "--agent-dir", str(tmp_path))[0] == 1
    assert "no prompt history" in capsys.readouterr().err
    assert not (tmp_path / "history.db").exists()


def test_not_a_database_exits_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "history.db").write_bytes(b"garbage" * 200)
    assert run("history", "--agent-dir", str(tmp_path))[0] == 2
    assert "history" in capsys.readouterr().err


def test_agent_dir_defaults_to_environment(agent_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent_dir))
    status, lines = run("history", "search", "deploy")
    assert status == 0 and len(lines) == 1


@pytest.mark.parametrize("bad", ["-1", "1001", "many"])
def test_bad_limit_is_a_usage_error(bad: str) -> None:
    with pytest.raises(SystemExit) as exc:
        parse("history", "--limit", bad)
    assert exc.value.code == 2
