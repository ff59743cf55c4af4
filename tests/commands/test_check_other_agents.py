"""`sessionfs check` on Claude Code and Codex files: recognised, checked by their
agent's rules, never reported as a broken xcsh session and never rewritten by
``--fix``. (A real Claude Code file: ``tests/interop/test_claude_real_sessions.py``.)"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from support import claude_code as cc
from support import codex_cli as cx

from sessionfs.commands.check import add_check_parser, run_check


def check(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="sessionfs")
    add_check_parser(parser.add_subparsers(dest="command", required=True))
    return run_check(parser.parse_args(["check", *argv]))


def checked_json(capsys: pytest.CaptureFixture[str], *paths: Path, fix: bool = False) -> dict:
    code = check("--json", *(["--fix"] if fix else []), *map(str, paths))
    document = json.loads(capsys.readouterr().out)
    assert document["exit"] == code
    return dict(document)


def codex_rollout(path: Path, *tail: bytes) -> Path:
    lines: list = [
        cx.session_meta(),
        cx.turn_context("gpt-5", 1),
        cx.item(cx.message("user", "fix the bug"), 2),
        cx.item(cx.message("assistant", "fixed"), 3),
        cx.token_count(10, 0, 2, 4),
        *tail,
    ]
    return cx.write_jsonl(path, lines)


def claude_session(path: Path, *extra: dict | bytes) -> Path:
    lines: list = [
        {"type": "custom-title", "customTitle": "Bug", "sessionId": cc.SESSION_ID},
        {"type": "queue-operation", "operation": "enqueue", "sessionId": cc.SESSION_ID},
        cc.user("u1", None, "fix the bug", 1),
        cc.assistant("a1", "u1", "msg_1", cc.text("fixed"), 2),
        {"type": "last-prompt", "lastPrompt": "fix the bug", "leafUuid": "a1"},
        *extra,
    ]
    return cc.write_jsonl(path, lines)


def test_other_agents_files_are_theirs_and_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = codex_rollout(tmp_path / "rollout-2026-03-02T09-00-00-x.jsonl")
    claude = claude_session(tmp_path / f"{cc.SESSION_ID}.jsonl")
    document = checked_json(capsys, codex, claude)
    assert document["exit"] == 0
    by_agent = {f["agent"]: f for f in document["files"]}
    assert set(by_agent) == {"claude", "codex"}
    for report in by_agent.values():
        assert report["findings"] == [] and report["clean"] is True
    assert by_agent["claude"]["entries"] == 5

    assert check(str(codex), str(claude)) == 0
    said = capsys.readouterr().out
    assert "written by the Codex CLI, checked by its rules" in said
    assert "written by Claude Code, checked by its rules" in said
    assert "header-missing" not in said


def test_claude_rules_find_a_broken_chain_and_a_lost_leaf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claude = claude_session(
        tmp_path / "c.jsonl",
        cc.user("u2", "gone", "after a lost line", 3),
        {"type": "last-prompt", "lastPrompt": "x", "leafUuid": "nowhere"},
    )
    (report,) = checked_json(capsys, claude)["files"]
    assert report["agent"] == "claude"
    assert [(f["code"], f["line"]) for f in report["findings"]] == [
        ("orphan", 6),
        ("dangling-leaf", 7),
    ]
    assert not any(f["fixable"] for f in report["findings"])


def test_codex_rules_want_session_meta_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    headless = cx.write_jsonl(tmp_path / "r.jsonl", [cx.item(cx.message("user", "hi"), 1)])
    (report,) = checked_json(capsys, headless)["files"]
    assert report["agent"] == "codex"
    assert [f["code"] for f in report["findings"]] == ["meta-missing"]


def test_fix_never_rewrites_another_agents_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A torn last line in a Codex rollout (Codex may be writing it): reported, kept."""
    rollout = codex_rollout(tmp_path / "r.jsonl", b'{"timestamp": "t", "type": "event_m')
    before = rollout.read_bytes()
    document = checked_json(capsys, rollout, fix=True)
    (report,) = document["files"]
    assert [f["code"] for f in report["findings"]] == ["torn-last-line"]
    assert report["findings"][0]["fixable"] is False
    assert "never rewrites" in report["findings"][0]["message"]
    assert report["fixed"] == [] and document["exit"] == 1
    assert rollout.read_bytes() == before
