"""Scripted branching of a real Claude Code session through the mount: three
alternatives from one entry (``ln -sfn entries/<uuid>.json leaf``, ``echo > send``,
``cat send``), run by the real Claude Code (`support.real_agents.ClaudeAgent`, the
pinned 2.1) against the fake Anthropic server, whose records show what each run sent.

What must hold (issue 30): each run was sent exactly the chosen prefix plus its
prompt; the original session file is byte-identical afterwards (sessionfs wrote nothing
and Claude Code was never asked to write into it); each fork is a session of its own
that ``claude --resume <id>`` continues; the forks are linked to their parent
(``header.json`` ``parentSession``, a line in both ``tree.txt`` files); the leaf chosen
survives a remount (kept in the cache dir, 0600); ``rm leaf`` gives the agent's own
leaf back, and ``send`` from there continues the original file itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from support.fake_anthropic_server import FakeAnthropicServer
from support.fake_model_server import ModelRequest
from support.mount import Mount, run, start_mount
from support.real_agents import ClaudeAgent, claude_executable

from sessionfs.view.cache_dir import agent_cache_dir

pytestmark = pytest.mark.fuse

Json = dict[str, Any]

FIRST, SECOND = "first question", "second question"
ALTERNATIVES = ("try it with a map", "try it with a list", "try it with a set")
REMINDER = "<system-reminder>"


def _answer(request: ModelRequest) -> str:
    return f"answer to {_said(request.messages)[-1]}"


def _said(messages: list[Json]) -> list[str]:
    """The conversation's texts in order: user and assistant text blocks, without what
    Claude Code adds from its harness (system messages, ``<system-reminder>`` blocks)."""
    found = []
    for message in messages:
        if message["role"] == "system":
            continue
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            said = block.get("text", "") if block.get("type") == "text" else ""
            if said.strip() and not said.lstrip().startswith(REMINDER):
                found.append(said.strip())
    return found


def _ctl(session: Path) -> dict[str, str]:
    lines = (session / "ctl").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if ": " in line)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _uuid_of_answer(session_file: Path, said: str) -> str:
    for raw in session_file.read_bytes().splitlines():
        line = json.loads(raw)
        if line.get("type") != "assistant":
            continue
        content = line["message"]["content"]
        if isinstance(content, list) and any(b.get("text") == said for b in content):
            return str(line["uuid"])
    raise AssertionError(f"no answer {said!r} in {session_file}")


def _mount(agent: ClaudeAgent, base: Path, cache: Path) -> Mount:
    options = (
        "--agents",
        "claude",
        "--claude-dir",
        str(agent.agent_dir),
        "--claude-cmd",
        str(claude_executable(agent.install)),
        "--cache-dir",
        str(cache),
    )
    return start_mount(base / "agent", base / "mnt", *options, env=agent.env())


def _requests_with(fake: FakeAnthropicServer, prompt: str) -> list[ModelRequest]:
    return [r for r, _ in fake.answered() if _said(r.messages)[-1:] == [prompt]]


def test_three_alternatives_from_one_entry(
    claude_agent: ClaudeAgent, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake = fake_anthropic
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "agent").mkdir()
    fake.set_default_reply(_answer)
    sid = claude_agent.turn(FIRST, work).session_id
    claude_agent.turn(SECOND, work, resume=sid)
    original = claude_agent.session_file(sid)
    before = _sha(original)
    at = _uuid_of_answer(original, f"answer to {FIRST}")
    prefix = [FIRST, f"answer to {FIRST}"]

    cache = tmp_path / "cache"
    mount = _mount(claude_agent, tmp_path, cache)
    try:
        session = mount.path / "agents" / "claude" / "sessions" / original.parent.name / sid
        own_leaf = os.readlink(session / "leaf")
        assert own_leaf != f"entries/{at}.json"
        for prompt in ALTERNATIVES:
            run("ln", "-sfn", f"entries/{at}.json", "leaf", cwd=session)
            assert os.readlink(session / "leaf") == f"entries/{at}.json"
            assert _said(json.loads((session / "context.json").read_text())["messages"]) == prefix
            (session / "send").write_text(prompt + "\n")
            status = (session / "send").read_text()
            assert status.startswith("exit 0"), (status, (session / "send.log").read_text())
            (request,) = _requests_with(fake, prompt)
            assert _said(request.messages) == [*prefix, prompt]  # exactly the prefix
            result = _ctl(session)["last_result"]
            assert result.startswith(f"send: forked at {at} into ")
            fork_id = result.rsplit(" ", 1)[1]
            assert fork_id in os.listdir(session.parent)  # listed at once
            fork_transcript = (session.parent / fork_id / "transcript.md").read_text()
            assert f"answer to {prompt}" in fork_transcript
        assert _sha(original) == before  # not a byte of the original changed

        forks = sorted(set(claude_agent.sessions()) - {original})
        assert len(forks) == 3
        tree = (session / "tree.txt").read_text()
        for fork in forks:
            fork_dir = session.parent / fork.stem
            header = json.loads((fork_dir / "header.json").read_text())
            assert header["parentSession"] == str(original)
            assert f"forked from {sid} at {at}" in (fork_dir / "tree.txt").read_text()
            assert f"fork {fork.stem} from {at}" in tree
            said = _said(json.loads((fork_dir / "context.json").read_text())["messages"])
            assert said[:2] == prefix and said[2] in ALTERNATIVES
            assert SECOND not in fork.read_text()  # only the history up to the entry

        # Each fork is a session Claude Code continues itself.
        for fork in forks:
            turn = claude_agent.turn("and then", work, resume=fork.stem)
            assert turn.session_id == fork.stem
            said = _said(_requests_with(fake, "and then")[-1].messages)
            assert said[:2] == prefix and said[2] in ALTERNATIVES and said[-1] == "and then"
        assert _sha(original) == before
    finally:
        mount.unmount()

    notes = agent_cache_dir(cache, claude_agent.agent_dir) / "notes.json"
    assert stat.S_IMODE(notes.stat().st_mode) == 0o600
    mount = _mount(claude_agent, tmp_path, cache)
    try:
        session = mount.path / "agents" / "claude" / "sessions" / original.parent.name / sid
        assert os.readlink(session / "leaf") == f"entries/{at}.json"  # kept over a remount
        assert (session / "tree.txt").read_text().count(" from ") == 3
        run("rm", session / "leaf")
        assert os.readlink(session / "leaf") == own_leaf  # the agent's own again
        (session / "send").write_text("go on\n")
        assert (session / "send").read_text().startswith("exit 0")
        assert _said(_requests_with(fake, "go on")[0].messages) == [
            *prefix,
            SECOND,
            f"answer to {SECOND}",
            "go on",
        ]
        assert _sha(original) != before  # continued in place, as claude --resume does
        assert "answer to go on" in (session / "transcript.md").read_text()  # at once
    finally:
        mount.unmount()
    assert "Traceback" not in mount.log.read_text(errors="replace")
