"""A Codex rollout with lines of spaces between its items, searched through a real
mount: every hit's path is an entry ``entries/`` shows (Codex entries are named by line
number, and a line of spaces is one line however many spaces it holds)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.mount import MountFactory, run
from support.other_agents import AgentTrees, home_env

pytestmark = pytest.mark.fuse


def _spaced(rollout: Path) -> None:
    """Put a line of spaces (of tabs, of a carriage return) after every line."""
    blanks = [b"      ", b"\t\t", b" \r"]
    lines = rollout.read_bytes().splitlines(keepends=True)
    rollout.write_bytes(b"".join(line + blanks[i % 3] + b"\n" for i, line in enumerate(lines)))


def test_codex_hits_in_a_rollout_with_space_lines_cat(
    agent_trees: AgentTrees, demo_agent: Path, mount_factory: MountFactory
) -> None:
    _spaced(agent_trees.codex_rollout)
    mount = mount_factory(demo_agent, env=home_env(agent_trees.home))
    deadline = time.monotonic() + 60
    while "search_codex: ready" not in (ctl := (mount.path / "ctl").read_text()):
        assert time.monotonic() < deadline, ctl
        time.sleep(0.2)
    hits = run("cat", mount.path / "search" / "load_config").splitlines()
    paths = [hit.split("\t")[1] for hit in hits]
    codex = [p for p in paths if p.startswith("agents/codex/")]
    assert len(codex) >= 3, paths  # the call, its output, the answer
    stem = agent_trees.codex_rollout.name.removesuffix(".jsonl")
    for path in codex:
        entry = mount.path / path
        assert run("ls", entry.parent).split().count(entry.name) == 1, path
        assert "load_config" in run("cat", entry), path
    # Named by its line in the file: every line of spaces counts as one line.
    lines = agent_trees.codex_rollout.read_bytes().split(b"\n")
    number = next(
        n for n, line in enumerate(lines, 1) if b"Renamed" in line and b'"response_item"' in line
    )
    answer = [p for p in codex if "Renamed" in (mount.path / p).read_text()]
    assert len(answer) == 1 and f"/{stem}/" in answer[0]
    assert answer[0].endswith(f"/{number:06d}-response_item-message.json"), (number, answer)
