"""``leaf`` and ``send`` under ``agents/`` on a real mount of hand-made Claude Code and
Codex trees (`support.other_agents`): the leaf the mount holds and everything that
follows it, the refusals and their reasons -- and never a byte of the agents' files
changed. The real agents run in ``test_claude_branching`` and ``test_codex_branching``."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import orjson
import pytest
from support import claude_code as cc
from support.file_snapshot import fingerprint
from support.mount import Mount, MountFactory, run
from support.other_agents import CLAUDE_PROJECT, AgentTrees, fake_home, home_env
from support.write_setup import drop, errno_of

pytestmark = pytest.mark.fuse

ANSWER = "The release adds a JSON exporter."


@pytest.fixture
def trees(tmp_path: Path) -> AgentTrees:
    return fake_home(tmp_path)


def _mount(factory: MountFactory, demo_agent: Path, trees: AgentTrees, cache: Path) -> Mount:
    options = ("--claude-cmd", "/bin/true", "--codex-cmd", "/bin/true", "--cache-dir", str(cache))
    return factory(demo_agent, *options, env=home_env(trees.home), name=f"mnt{len(str(cache))}")


def _entry_saying(session: Path, said: str) -> str:
    for name in sorted(os.listdir(session / "entries")):
        if said in (session / "entries" / name).read_text():
            return name
    raise AssertionError(said)


def test_leaf_moves_and_everything_follows_it(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory, trees: AgentTrees
) -> None:
    before = fingerprint(trees.claude)
    mount = _mount(mount_factory, demo_agent, trees, tmp_path / "cache")
    stem = trees.claude_compacted.stem
    session = mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / stem
    transcript = mount.path / "agents" / "claude" / "transcripts" / CLAUDE_PROJECT / f"{stem}.md"
    assert "Continuing after the compaction" in transcript.read_text()  # rendered, cached
    own = os.readlink(session / "leaf")
    answer = _entry_saying(session, ANSWER)
    run("ln", "-sfn", f"entries/{answer}", "leaf", cwd=session)
    assert os.readlink(session / "leaf") == f"entries/{answer}"
    assert sorted(os.listdir(session / "path"))[-1].endswith(answer)
    marked = [line for line in (session / "tree.txt").read_text().splitlines() if line[0] == "*"]
    assert marked[-1].startswith(f"* {answer.removesuffix('.json')} assistant")
    assert json.loads((session / "stats.json").read_text())["leafId"] == answer[:-5]
    for shown in (session / "transcript.md", session / "transcript.html", transcript):
        text = shown.read_text()
        assert ANSWER in text and "Continuing after the compaction" not in text
    assert ANSWER in (session / "context.json").read_text()
    ctl = (session / "ctl").read_text()
    assert f"leaf: {answer[:-5]}" in ctl and f"agent_leaf: {own[8:-5]}" in ctl

    meta = next(n for n in os.listdir(session / "entries") if n.startswith("meta-"))
    refused = errno_of(lambda: os.symlink(f"entries/{meta}", session / "leaf.new"))
    assert refused == 0  # GNU ln's temporary link; the rename is what moves the leaf
    assert errno_of(lambda: os.rename(session / "leaf.new", session / "leaf")) == errno.EINVAL
    assert "is a metadata line" in (session / "ctl").read_text()
    os.unlink(session / "leaf.new")
    assert errno_of(lambda: (session / "ctl").write_text("branch x\n")) == errno.EROFS

    # send: the session's cwd (/home/me/app) is not on this machine: refused at open,
    # so the shell reports it at the redirection and no prompt is taken
    assert errno_of(lambda: os.open(session / "send", os.O_WRONLY | os.O_TRUNC)) == errno.ENOENT
    assert "cwd '/home/me/app' is not a directory" in (session / "ctl").read_text()
    assert (session / "send").read_text() == "no run yet\n"

    os.unlink(session / "leaf")
    assert os.readlink(session / "leaf") == own
    assert "Continuing after the compaction" in transcript.read_text()
    mount.unmount()
    assert fingerprint(trees.claude) == before


def test_a_chosen_leaf_outlives_a_remount_not_the_agent_continuing(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory, trees: AgentTrees
) -> None:
    cache = tmp_path / "cache"
    stem = trees.claude_compacted.stem
    mount = _mount(mount_factory, demo_agent, trees, cache)
    session = mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / stem
    answer = _entry_saying(session, ANSWER)
    run("ln", "-sfn", f"entries/{answer}", "leaf", cwd=session)
    mount.unmount()

    mount = _mount(mount_factory, demo_agent, trees, cache)
    session = mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / stem
    transcript = mount.path / "agents" / "claude" / "transcripts" / CLAUDE_PROJECT / f"{stem}.md"
    assert os.readlink(session / "leaf") == f"entries/{answer}"
    assert "Continuing after the compaction" not in transcript.read_text()
    mount.unmount()

    with trees.claude_compacted.open("a") as agent_continues:
        agent_continues.write(json.dumps({"type": "last-prompt", "lastPrompt": "more"}) + "\n")
    mount = _mount(mount_factory, demo_agent, trees, cache)
    session = mount.path / "agents" / "claude" / "sessions" / CLAUDE_PROJECT / stem
    assert os.readlink(session / "leaf") != f"entries/{answer}"  # the agent's own again


def test_send_of_a_sub_agent_and_of_a_codex_earlier_leaf_are_refused(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory, trees: AgentTrees
) -> None:
    mount = _mount(mount_factory, demo_agent, trees, tmp_path / "cache")
    claude = mount.path / "agents" / "claude" / "sessions"
    sub = Path(run("find", claude, "-path", "*/subagents/*/send").splitlines()[0])
    assert errno_of(lambda: drop(sub.parent, "send", b"hi\n")) == errno.EOPNOTSUPP
    codex = Path(os.path.realpath(mount.path / "agents" / "codex" / "recent" / "1"))
    first = sorted(os.listdir(codex / "entries"))[1]
    run("ln", "-sfn", f"entries/{first}", "leaf", cwd=codex)
    assert errno_of(lambda: os.open(codex / "send", os.O_WRONLY)) == errno.EOPNOTSUPP
    assert "only from its last entry" in (codex / "ctl").read_text()


def test_runs_under_agents_are_one_at_a_time_timed_and_stopped_at_unmount(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory, trees: AgentTrees
) -> None:
    """``send`` under ``agents/`` shares the xcsh rules: ``EBUSY`` while another
    process holds the session file open for writing, one run per session (a second
    send and a leaf move are ``EBUSY``), ``--send-timeout``, and no agent outliving
    the mount. The agent here is a stand-in that sleeps (``sh -c`` takes the
    arguments the mount appends as its own ``$0``, ``$1``, ...)."""
    work = tmp_path / "work"
    work.mkdir()
    session_file = trees.claude / "projects" / "-work" / "5e55-branch.jsonl"
    session_file.parent.mkdir()
    lines = [
        cc.user("u1", None, "hello", 1, cwd=str(work), sessionId="5e55-branch"),
        cc.assistant("a1", "u1", "msg_1", cc.text("hi"), 2, cwd=str(work)),
    ]
    cc.write_jsonl(session_file, lines)
    pids = tmp_path / "pids"
    sleeper = f"sh -c 'echo $$ >> {pids}; exec sleep 60'"
    options = ("--claude-cmd", sleeper, "--send-timeout", "2", "--send-grace", "0.2")
    mount = mount_factory(demo_agent, *options, env=home_env(trees.home))
    session = mount.path / "agents" / "claude" / "sessions" / "-work" / "5e55-branch"
    run("ln", "-sfn", "entries/u1.json", "leaf", cwd=session)
    with session_file.open("ab"):  # the agent itself, say, in a terminal
        assert errno_of(lambda: drop(session, "send", b"go\n")) == errno.EBUSY
    assert "two writers of one conversation" in (session / "ctl").read_text()
    drop(session, "send", b"go\n")
    assert errno_of(lambda: drop(session, "send", b"again\n")) == errno.EBUSY
    refused = subprocess.run(["ln", "-sfn", "entries/a1.json", "leaf"], cwd=session, check=False)
    assert refused.returncode != 0
    assert (session / "send").read_text().startswith("timed out after 2 s")
    drop(session, "send", b"once more\n")
    mount.unmount()
    for pid in pids.read_text().split():
        assert not Path(f"/proc/{pid}").exists()  # stopped with the mount
    assert session_file.read_bytes() == b"".join(orjson.dumps(line) + b"\n" for line in lines)
