"""How ``send`` continues a Claude Code or Codex session (`sessionfs.fs.agent_branching`):
the argument lists, the templates, the environment -- no agent runs here."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from sessionfs.fs.agent_branching import BranchingCommand, branching_command, find_fork
from sessionfs.fs.agent_command import AgentCommandError
from sessionfs.view.refusal import WriteRejected

HOME = {"HOME": "/home/me"}


def _command(agent: str, template: str | None = None, root: str = "") -> BranchingCommand:
    default_root = {"claude": "/home/me/.claude", "codex": "/home/me/.codex"}[agent]
    made = branching_command(
        agent, Path(root or default_root), template, HOME, which=lambda name: f"/bin/{name}"
    )
    assert isinstance(made, BranchingCommand)
    return made


def test_claude_resumes_at_its_own_leaf_and_forks_anywhere_else() -> None:
    claude = _command("claude")
    argv, forks = claude.argv("S", None, "own", "-h")
    assert (argv, forks) == (["claude", "-p", "--resume", "S", "--", "-h"], False)
    assert claude.argv("S", "own", "own", "go")[0] == ["claude", "-p", "--resume", "S", "--", "go"]
    argv, forks = claude.argv("S", "u1", "own", "go")
    at = ["--resume-session-at", "u1", "--fork-session"]
    assert (argv, forks) == (["claude", "-p", "--resume", "S", *at, "--", "go"], True)


def test_codex_resumes_at_its_last_entry_and_refuses_earlier_ones() -> None:
    codex = _command("codex")
    argv, forks = codex.argv("T", None, "000009-x", "go")
    assert (argv, forks) == (["codex", "exec", "resume", "T", "--", "go"], False)
    with pytest.raises(WriteRejected) as refused:
        codex.argv("T", "000004-x", "000009-x", "go")
    assert refused.value.errno == errno.EOPNOTSUPP
    assert "only from its last entry (000009-x)" in refused.value.reason


def test_templates_per_agent_and_with_the_agent_placeholder() -> None:
    assert _command("claude", "nice -n 5 claude --model x").words == (
        "nice", "-n", "5", "claude", "--model", "x",
    )  # fmt: skip
    assert _command("codex", "nice {agent} --skip-git-repo-check").words == (
        "nice", "codex", "exec", "--skip-git-repo-check",
    )  # fmt: skip
    with pytest.raises(AgentCommandError):
        _command("claude", "claude 'unbalanced")
    with pytest.raises(AgentCommandError):
        _command("claude", "  ")


def test_the_default_must_be_on_path() -> None:
    missing = branching_command("claude", Path("/home/me/.claude"), None, HOME, lambda n: None)
    assert isinstance(missing, str) and "claude is not on PATH" in missing
    given = branching_command("claude", Path("/x"), "/opt/claude", HOME, lambda n: None)
    assert isinstance(given, BranchingCommand)  # a template is taken as given


def test_an_agent_dir_elsewhere_is_named_in_the_environment() -> None:
    assert _command("claude").environment(HOME) == HOME
    moved = _command("claude", root="/data/claude").environment(HOME)
    assert moved == {**HOME, "CLAUDE_CONFIG_DIR": "/data/claude"}
    assert _command("codex", root="/data/codex").environment({})["CODEX_HOME"] == "/data/codex"


def test_find_fork_takes_the_new_file_holding_the_entry(tmp_path: Path) -> None:
    (tmp_path / "old.jsonl").write_text('{"uuid":"u1"}\n')
    before = {"old.jsonl"}
    (tmp_path / "other.jsonl").write_text('{"uuid":"u9"}\n')
    assert find_fork(tmp_path, before, "u1") is None
    (tmp_path / "named.jsonl").write_text('{"uuid":"u0","parentUuid":"u1"}\n')
    assert find_fork(tmp_path, before, "u1") is None  # names it, but is not it
    (tmp_path / "fork.jsonl").write_text('{"uuid": "u0"}\n{"uuid": "u1"}\n')
    assert find_fork(tmp_path, before, "u1") == tmp_path / "fork.jsonl"


def test_one_agent_cmd_with_the_placeholder_serves_every_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionfs.fs.daemon import MountOptions, _agent_command, _other_agent_templates

    agent_dir = tmp_path / ".omp" / "agent"
    agent_dir.mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "omp").write_text("#!/bin/sh\n")
    (bin_dir / "omp").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    opts = MountOptions(tmp_path / "mnt", agent_dir, agent_cmd="nice {agent}")
    assert _other_agent_templates(opts) == {"claude": "nice {agent}", "codex": "nice {agent}"}
    given = MountOptions(
        tmp_path / "mnt", agent_dir, agent_cmd="nice {agent}", other_agent_cmds=(("codex", "cx"),)
    )
    assert _other_agent_templates(given)["codex"] == "cx"
    assert _other_agent_templates(MountOptions(tmp_path / "mnt", agent_dir, agent_cmd="pi")) == {}
    local = _agent_command(opts)  # {agent}: the agent dir's own agent, omp
    assert not isinstance(local, str)
    assert local.words == ("nice", "omp", "--resume", "{session}", "-p")


def test_the_background_daemon_gets_the_templates(tmp_path: Path) -> None:
    """``mount`` without ``--foreground`` starts the daemon with the options it parsed:
    the per-agent templates must reach it, and parse there to the same options."""
    from sessionfs.commands.cli import build_parser
    from sessionfs.fs.daemon import MountOptions, _send_args

    opts = MountOptions(
        tmp_path / "mnt",
        tmp_path,
        agent_cmd="nice {agent}",
        other_agent_cmds=(("claude", "claude --model x"), ("codex", "codex exec -c a=1")),
    )
    args = build_parser().parse_args(["mount", str(tmp_path / "mnt"), *_send_args(opts)])
    assert (args.claude_cmd, args.codex_cmd) == ("claude --model x", "codex exec -c a=1")
    assert args.agent_cmd == "nice {agent}"
