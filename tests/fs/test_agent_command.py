"""Which agent ``send`` runs (`sessionfs.fs.agent_command`): the template's words and
placeholders, and the default for an agent dir (its owner on PATH, else the first of
xcsh, omp, pi)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sessionfs.fs.agent_command import AgentCommand, AgentCommandError, default_agent_command


def on_path(*names: str) -> Callable[[str], str | None]:
    """A ``shutil.which`` that finds exactly ``names``."""
    return lambda name: f"/usr/bin/{name}" if name in names else None


def test_a_template_is_split_like_a_shell_and_the_prompt_is_one_last_argument() -> None:
    command = AgentCommand.parse("agent --dir '{cwd}/x y' --session={session} -p")
    argv = command.argv("/s/a b.jsonl", "/w d", "it's $(x)\nline 2")
    assert argv == [
        "agent",
        "--dir",
        "/w d/x y",
        "--session=/s/a b.jsonl",
        "-p",
        "it's $(x)\nline 2",
    ]


@pytest.mark.parametrize("template", ["", "   ", "agent 'unbalanced"])
def test_an_unusable_template_is_refused(template: str) -> None:
    with pytest.raises(AgentCommandError):
        AgentCommand.parse(template)


@pytest.mark.parametrize(
    ("agent_dir", "expected"),
    [
        ("/home/u/.omp/agent", "omp --resume {session} -p"),
        ("/home/u/.omp/profiles/work/agent", "omp --resume {session} -p"),
        ("/home/u/.pi/agent", "pi --session {session} -p"),
        ("/home/u/.xcsh/agent", "xcsh --session {session} -p"),
        ("/somewhere/else", "xcsh --session {session} -p"),  # no owner: xcsh first
    ],
)
def test_the_owner_of_the_agent_dir_runs_when_it_is_on_path(agent_dir: str, expected: str) -> None:
    command = default_agent_command(Path(agent_dir), on_path("xcsh", "omp", "pi"))
    assert str(command) == expected


def test_an_agent_dir_elsewhere_is_known_by_its_model_configuration(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text("{}")
    assert str(default_agent_command(tmp_path, on_path("omp", "pi"))) == "pi --session {session} -p"
    (tmp_path / "models.json").unlink()
    (tmp_path / "models.yml").write_text("{}")
    assert str(default_agent_command(tmp_path, on_path("omp", "pi"))).startswith("omp ")


def test_without_the_owner_the_first_agent_on_path_runs() -> None:
    command = default_agent_command(Path("/home/u/.omp/agent"), on_path("pi"))
    assert str(command) == "pi --session {session} -p"


def test_without_any_agent_the_reason_names_the_option() -> None:
    reason = default_agent_command(Path("/home/u/.pi/agent"), on_path())
    assert isinstance(reason, str)
    assert "none of xcsh, omp, pi is on PATH" in reason and "--agent-cmd" in reason


def test_a_default_agent_is_pointed_at_the_mounted_agent_dir(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text("{}")
    elsewhere = default_agent_command(tmp_path, on_path("pi"))
    assert isinstance(elsewhere, AgentCommand)
    daemon = {"PATH": "/bin", "PI_CODING_AGENT_DIR": "/another/dir"}
    assert elsewhere.environment(daemon) == {"PATH": "/bin", "PI_CODING_AGENT_DIR": str(tmp_path)}
    at_home = default_agent_command(Path.home() / ".pi" / "agent", on_path("pi"))
    assert isinstance(at_home, AgentCommand)
    assert at_home.environment(daemon) == {"PATH": "/bin"}  # pi's own default dir
    given = AgentCommand.parse("agent {session}")  # --agent-cmd: the daemon's as it is
    assert given.environment(daemon) == daemon
