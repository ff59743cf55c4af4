"""``agents/claude`` and ``agents/codex`` through a real mount with the defaults: the
agents' dirs found under a fake HOME, every file of a session dir read with ``cat``
and compared with what the spec says, sub-agents in both layouts, ``by-id``,
``recent``, ``transcripts/``, an archived ``.jsonl.zst``, and a growing file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.mount import REPO, Mount, MountFactory, run
from support.other_agents import (
    CLAUDE_PROJECT,
    CODEX_PROJECT,
    AgentTrees,
    home_env,
    load_demo_agents,
)
from support.write_setup import read_ctl

pytestmark = pytest.mark.fuse

DEMO_PROJECT = "-home-demo-webapp"
#: what reading shows, and ``ctl``, ``send``, ``send.log`` (the agent continues the
#: session: sessionfs writes nothing of it)
SESSION_FILES = [
    "branches",
    "context.json",
    "ctl",
    "entries",
    "header.json",
    "leaf",
    "path",
    "send",
    "send.log",
    "stats.json",
    "subagents",
    "title",
    "transcript.html",
    "transcript.md",
    "tree.svg",
    "tree.txt",
]


@pytest.fixture
def trees(agent_trees: AgentTrees) -> AgentTrees:
    return agent_trees


@pytest.fixture
def mounted(agents_mount: Mount) -> Mount:
    return agents_mount


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _claude(mount: Mount, project: str, stem: str) -> Path:
    return mount.path / "agents" / "claude" / "sessions" / project / stem


def test_agents_are_found_in_home_and_listed(mounted: Mount, trees: AgentTrees) -> None:
    assert "agents" in run("ls", mounted.path).split()
    assert run("ls", mounted.path / "agents").split() == ["claude", "codex"]
    for agent in ("claude", "codex"):
        names = run("ls", mounted.path / "agents" / agent).split()
        assert names == ["by-id", "recent", "sessions", "transcripts"]
    projects = run("ls", mounted.path / "agents" / "claude" / "sessions").split()
    assert sorted(projects) == sorted([CLAUDE_PROJECT, DEMO_PROJECT])
    session = _claude(mounted, DEMO_PROJECT, trees.claude_session.stem)
    assert run("ls", session).split() == SESSION_FILES


def test_claude_session_renderings(mounted: Mount, trees: AgentTrees) -> None:
    session = _claude(mounted, DEMO_PROJECT, trees.claude_session.stem)
    header = _json(session / "header.json")
    assert header["agent"] == "claude"
    assert header["id"] == trees.claude_session.stem
    assert header["cwd"] == "/home/demo/webapp"
    assert header["file"] == str(trees.claude_session)
    assert (session / "title").read_text() == "Fix the login redirect loop\n"

    lines = [json.loads(x) for x in trees.claude_session.read_text().splitlines()]
    chain = [x for x in lines if "uuid" in x]
    names = sorted(run("ls", session / "entries").split())
    expected = sorted(
        [f"{x['uuid']}.json" for x in chain]
        + [f"meta-{n}-{x['type']}.json" for n, x in enumerate(lines, 1) if "uuid" not in x]
    )
    assert names == expected
    first = chain[0]
    assert _json(session / "entries" / f"{first['uuid']}.json") == first

    # The resumed branch: the newer of the two user lines under the rewind point.
    leaf = os.readlink(session / "leaf")
    assert leaf == f"entries/{chain[-1]['uuid']}.json"
    path = run("ls", session / "path").split()
    assert path[-1].endswith(f"{chain[-1]['uuid']}.json")
    assert not any("Exempt /login from" in (session / "path" / p).read_text() for p in path)
    tree = (session / "tree.txt").read_text()
    assert tree.count("\n+ ") == 2  # two branches start under the rewind point

    context = _json(session / "context.json")
    roles = [m["role"] for m in context["messages"]]
    assert roles[:3] == ["user", "assistant", "user"]
    split = context["messages"][1]["content"]  # thinking, text, tool_use: one message
    assert [b["type"] for b in split] == ["thinking", "text", "tool_use"]
    assert context["messages"][2]["content"][0]["type"] == "tool_result"
    assert "Moved requireAuth" in json.dumps(context["messages"][-1])
    assert "Exempted /login" not in json.dumps(context)

    transcript = (session / "transcript.md").read_text()
    assert transcript.startswith("# Fix the login redirect loop\n")
    assert transcript.count("## assistant ·") == 4  # block lines merged per message.id
    assert "> The auth middleware probably guards /login." in transcript

    stats = _json(session / "stats.json")
    assert stats["usage"] == {"input": 8100, "output": 360, "cacheRead": 4400, "cacheWrite": 1100}
    assert stats["leafId"] == chain[-1]["uuid"]
    flat = mounted.path / "agents" / "claude" / "transcripts" / DEMO_PROJECT
    assert (flat / f"{trees.claude_session.stem}.md").read_text() == transcript


def test_claude_compaction_junk_and_flat_subagent(mounted: Mount, trees: AgentTrees) -> None:
    session = _claude(mounted, CLAUDE_PROJECT, trees.claude_compacted.stem)
    assert (session / "title").read_text() == "Release notes\n"
    assert _json(session / "stats.json")["malformedLines"] == 2
    context = _json(session / "context.json")
    text = json.dumps(context)
    assert "Summary: the user asked" in text and "JSON exporter" not in text
    path = [(session / "path" / p).read_text() for p in run("ls", session / "path").split()]
    assert "Summarise the release notes." in path[0]  # one path across the boundary
    assert "some-future-kind" in run("ls", session / "entries")
    sub = session / "subagents" / "agent-f1a7"
    assert "There is one exporter." in (sub / "transcript.md").read_text()


def test_claude_subagent_dir_has_its_meta(mounted: Mount, trees: AgentTrees) -> None:
    session = _claude(mounted, DEMO_PROJECT, trees.claude_session.stem)
    assert run("ls", session / "subagents").split() == ["agent-a7c3e91"]
    header = _json(session / "subagents" / "agent-a7c3e91" / "header.json")
    assert header["agentType"] == "Explore"
    assert header["toolUseId"] == "toolu_demo_02"
    transcripts = mounted.path / "agents" / "claude" / "transcripts" / DEMO_PROJECT
    assert (
        "src/app.ts:14"
        in (transcripts / trees.claude_session.stem / "agent-a7c3e91.md").read_text()
    )


def _codex(mount: Mount, stem: str, project: str = CODEX_PROJECT) -> Path:
    return mount.path / "agents" / "codex" / "sessions" / project / stem


def test_codex_session_renderings(mounted: Mount, trees: AgentTrees) -> None:
    stem = trees.codex_rollout.name.removesuffix(".jsonl")
    session = _codex(mounted, stem)
    header = _json(session / "header.json")
    assert header["agent"] == "codex" and header["cwd"] == "/home/me/tool"
    assert header["archived"] is False
    assert (session / "title").read_text() == "Config loader rename\n"
    names = run("ls", session / "entries").split()
    assert names[0] == "000001-session_meta.json"
    assert "000002-turn_context.json" in names
    assert os.readlink(session / "leaf") == f"entries/{names[-1]}"
    transcript = (session / "transcript.md").read_text()
    assert transcript.count("Renamed load_config to read_config") == 1  # no event_msg copy
    assert "src/config.py:3" in transcript
    stats = _json(session / "stats.json")
    assert stats["usage"]["input"] == 900 and stats["usage"]["cacheRead"] == 400
    assert stats["byType"]["event_msg-agent_message"] == 1
    context = _json(session / "context.json")
    assert context["model"] == "gpt-5-codex"
    # The sub-agent rollout is below its parent, not a session of the project.
    assert run("ls", _codex(mounted, "")).split() == sorted(
        [stem, trees.codex_archived.name.removesuffix(".jsonl.zst")]
    )
    sub_stem = trees.codex_subagent.name.removesuffix(".jsonl")
    assert run("ls", session / "subagents").split() == [sub_stem]
    assert "Three callers" in (session / "subagents" / sub_stem / "transcript.md").read_text()


def test_a_corrupt_zst_archive_takes_nothing_down(
    trees: AgentTrees, demo_agent: Path, mount_factory: MountFactory
) -> None:
    # Another agent's files are untrusted: an archived rollout that does not decompress
    # (it made `ls agents/codex/sessions` fail with EIO) is left out of the listing and
    # of the search index; everything else shows and is found.
    bad = trees.codex_archived.with_name(
        "rollout-2025-01-03T00-00-00-0199b000-0000-7000-8000-00000000a0ff.jsonl.zst"
    )
    bad.write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 100)  # a zstd magic, then junk
    mount = mount_factory(demo_agent, env=home_env(trees.home))
    sessions = mount.path / "agents" / "codex" / "sessions"
    stems = run("ls", sessions / CODEX_PROJECT).split()
    assert trees.codex_archived.name.removesuffix(".jsonl.zst") in stems
    assert not any(stem.endswith("a0ff") for stem in stems)
    _wait_for_search(mount)
    hits = run("cat", mount.path / "search" / "zstandard streams").splitlines()
    assert len(hits) == 1 and "agents/codex/sessions/" in hits[0]
    # the root ctl says which file the codex index skipped, and why
    skipped = read_ctl(mount.path)["search_codex_last_error"]
    assert "1 file(s) skipped" in skipped and bad.name in skipped, skipped
    assert read_ctl(mount.path)["search_claude_last_error"] == ""
    assert mount.alive()


def test_codex_archived_zst_and_2025_format(mounted: Mount, trees: AgentTrees) -> None:
    archived = _codex(mounted, trees.codex_archived.name.removesuffix(".jsonl.zst"))
    assert _json(archived / "header.json")["archived"] is True
    assert (archived / "title").read_text() == "Zstd archive\n"
    assert "zstandard streams" in (archived / "transcript.md").read_text()
    old_dirs = run("ls", mounted.path / "agents" / "codex" / "sessions").split()
    old = [p for p in old_dirs if p != CODEX_PROJECT]
    assert len(old) == 1
    stem = trees.codex_old_format.name.removesuffix(".jsonl")
    transcript = (_codex(mounted, stem, old[0]) / "transcript.md").read_text()
    assert "no envelope per line" in transcript


def test_by_id_and_recent(mounted: Mount, trees: AgentTrees) -> None:
    claude = mounted.path / "agents" / "claude"
    sid = trees.claude_session.stem
    assert os.readlink(claude / "by-id" / sid) == f"../sessions/{DEMO_PROJECT}/{sid}"
    assert (claude / "by-id" / sid / "title").read_text() == "Fix the login redirect loop\n"
    assert (claude / "by-id" / sid[:8] / "header.json").exists()  # a unique prefix
    os.utime(trees.claude_session)  # now the newest
    time.sleep(0.6)  # the listing's interval
    assert os.readlink(claude / "recent" / "1") == f"../sessions/{DEMO_PROJECT}/{sid}"
    codex_id = "0199b000-0000-7000-8000-00000000a001"
    assert (mounted.path / "agents" / "codex" / "by-id" / codex_id / "stats.json").exists()


def test_grep_across_the_three_kinds_of_transcripts(mounted: Mount) -> None:
    hits = run("grep", "-rl", "-e", "redirect", "-e", "load_config", mounted.path, check=False)
    found = {Path(h).relative_to(mounted.path).parts[0:2] for h in hits.splitlines()}
    assert ("transcripts", "--home-demo-webapp--") in found
    assert ("agents", "claude") in found and ("agents", "codex") in found


def test_an_appended_line_shows_within_three_seconds(mounted: Mount, trees: AgentTrees) -> None:
    session = _claude(mounted, DEMO_PROJECT, trees.claude_session.stem)
    assert "fresh question" not in (session / "transcript.md").read_text()
    demo = load_demo_agents()
    s = demo.ClaudeLines(trees.claude_session.stem, "/home/demo/webapp", time.time())
    last = json.loads(trees.claude_session.read_text().splitlines()[-2])["uuid"]
    s.user("A fresh question, appended while mounted.", parent=last)
    with open(trees.claude_session, "a") as f:
        f.write(json.dumps(s.lines[0]) + "\n")
    deadline = time.monotonic() + 3
    while "fresh question" not in (session / "transcript.md").read_text():
        assert time.monotonic() < deadline, "the appended line did not show within 3 s"
        time.sleep(0.1)
    assert f"{s.last}.json" in run("ls", session / "entries").split()


def test_no_agents_when_asked_or_when_their_dirs_are_missing(
    trees: AgentTrees, demo_agent: Path, mount_factory: MountFactory, tmp_path: Path
) -> None:
    off = mount_factory(demo_agent, "--no-agents", name="off", env=home_env(trees.home))
    assert "agents" not in run("ls", off.path).split()
    only = mount_factory(demo_agent, "--agents", "codex", name="only", env=home_env(trees.home))
    assert run("ls", only.path / "agents").split() == ["codex"]
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    none = mount_factory(demo_agent, name="none", env=home_env(empty_home))
    assert "agents" not in run("ls", none.path).split()
    moved = mount_factory(
        demo_agent,
        "--claude-dir",
        str(trees.claude),
        name="moved",
        env=home_env(empty_home),
    )
    assert run("ls", moved.path / "agents").split() == ["claude"]


def _wait_for_search(mount: Mount) -> None:
    deadline = time.monotonic() + 30
    while True:
        ctl = (mount.path / "ctl").read_text()
        ready = [line for line in ctl.splitlines() if "ready" in line]
        if len(ready) == 3:  # search:, search_claude:, search_codex:
            return
        assert time.monotonic() < deadline, ctl
        time.sleep(0.2)


def test_one_search_spans_every_agent(mounted: Mount, trees: AgentTrees, tmp_path: Path) -> None:
    _wait_for_search(mounted)
    ctl = (mounted.path / "ctl").read_text()
    assert "search_claude: ready" in ctl and "search_codex: ready" in ctl
    hits = [
        line.split("\t")
        for line in run("cat", mounted.path / "search" / "requireAuth").splitlines()
    ]
    paths = [hit[1] for hit in hits]
    assert any(p.startswith("sessions/--home-demo-webapp--/") for p in paths), paths
    claude = [p for p in paths if p.startswith("agents/claude/sessions/-home-demo-webapp/")]
    assert claude, paths
    for path in claude:
        assert "requireAuth" in (mounted.path / path).read_text()
    codex = run("cat", mounted.path / "search" / "load_config").splitlines()
    codex_paths = [line.split("\t")[1] for line in codex]
    assert codex_paths and all(
        p.startswith("agents/codex/sessions/--home-me-tool--/") for p in codex_paths
    )
    assert len([p for p in codex_paths if "Renamed" in (mounted.path / p).read_text()]) == 1
    # an archived, zstd-compressed rollout is searched too; its hit opens as any other
    archived = run("cat", mounted.path / "search" / "zstandard streams").splitlines()
    archived_stem = trees.codex_archived.name.removesuffix(".jsonl.zst")
    assert [line.split("\t")[1].split("/")[4] for line in archived] == [archived_stem]
    assert "zstandard streams" in (mounted.path / archived[0].split("\t")[1]).read_text()
    times = [
        line.split("\t")[0] for line in run("cat", mounted.path / "search" / "the").splitlines()
    ]
    assert times == sorted(times, reverse=True)  # one list, newest first
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionfs",
            "search",
            "requireAuth",
            "--agent-dir",
            str(mounted.agent_dir),
            "--cache-dir",
            str(tmp_path / "cli-cache"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=home_env(trees.home),
    ).stdout
    assert cli == run("cat", mounted.path / "search" / "requireAuth")


def test_the_root_ignore_covers_the_agents_duplicate_views(mounted: Mount) -> None:
    ignore = (mounted.path / ".ignore").read_text().splitlines()
    for name in ("entries/", "path/", "context.json", "tree.txt", "transcript.md", "branches/"):
        assert f"/agents/*/sessions/**/{name}" in ignore
