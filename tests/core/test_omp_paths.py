"""Where oh-my-pi 18's agent dir is found: ``~/.omp/agent`` when xcsh's is absent,
``$PI_CONFIG_DIR`` in place of ``.omp``, ``$PI_CODING_AGENT_DIR`` first, profiles
(``$OMP_PROFILE``, else ``$PI_PROFILE``), and ``$XDG_DATA_HOME/omp`` (or
``omp/profiles/<name>``) holding sessions, blobs and history.db."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core import paths
from sessionfs.commands.cli import mounted_line


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_omps_dir_is_found_when_xcshs_is_absent(home: Path) -> None:
    env = {"HOME": str(home)}
    assert paths.default_agent_dir(env) == home / ".xcsh" / "agent"  # nothing there yet
    (home / ".omp" / "agent").mkdir(parents=True)
    assert paths.default_agent_dir(env) == home / ".omp" / "agent"
    assert paths.agent_name(home / ".omp" / "agent", env) == "oh-my-pi 18"
    (home / ".xcsh" / "agent").mkdir(parents=True)
    assert paths.default_agent_dir(env) == home / ".xcsh" / "agent"
    assert paths.agent_name(home / ".xcsh" / "agent", env) == "xcsh"
    explicit = {**env, "PI_CODING_AGENT_DIR": "/srv/agent", "OMP_PROFILE": "work"}
    assert paths.default_agent_dir(explicit) == Path("/srv/agent")
    assert paths.agent_name("/srv/agent", explicit) == ""


def test_pi_config_dir_replaces_dot_omp(home: Path) -> None:
    (home / ".mine" / "agent").mkdir(parents=True)
    env = {"HOME": str(home), "PI_CONFIG_DIR": ".mine"}
    assert paths.omp_agent_dir(env) == home / ".mine" / "agent"
    assert paths.default_agent_dir(env) == home / ".mine" / "agent"


@pytest.mark.parametrize(
    ("profile_env", "expected"),
    [
        ({"OMP_PROFILE": "work"}, "work"),
        ({"PI_PROFILE": "work"}, "work"),
        ({"OMP_PROFILE": "", "PI_PROFILE": "work"}, None),  # explicit default wins
        ({"OMP_PROFILE": "default"}, None),
        ({"OMP_PROFILE": "../x"}, None),
        ({"OMP_PROFILE": "Work"}, None),
    ],
)
def test_profiles(home: Path, profile_env: dict[str, str], expected: str | None) -> None:
    env = {"HOME": str(home), **profile_env}
    assert paths.omp_profile(env) == expected
    agent = paths.omp_agent_dir(env)
    if expected is None:
        assert agent == home / ".omp" / "agent"
    else:
        assert agent == home / ".omp" / "profiles" / expected / "agent"
        agent.mkdir(parents=True)
        assert paths.default_agent_dir(env) == agent


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="XDG")
def test_xdg_dirs_hold_omps_data(home: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "omp" / "sessions").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_DATA_HOME": str(data)}
    # No ~/.omp/agent at all: its sessions in the XDG dir are enough to find it.
    assert paths.default_agent_dir(env) == home / ".omp" / "agent"
    layout = paths.agent_layout(None, env)
    assert (layout.sessions, layout.blobs, layout.history_db) == (
        data / "omp" / "sessions",
        data / "omp" / "blobs",
        data / "omp" / "history.db",
    )
    profile_env = {**env, "OMP_PROFILE": "work"}
    profile_agent = home / ".omp" / "profiles" / "work" / "agent"
    assert paths.agent_layout(profile_agent, profile_env).sessions == profile_agent / "sessions"
    (data / "omp" / "profiles" / "work").mkdir(parents=True)
    assert paths.agent_layout(profile_agent, profile_env).sessions == (
        data / "omp" / "profiles" / "work" / "sessions"
    )
    # A dir named by path is never moved.
    assert paths.agent_layout(tmp_path / "elsewhere", env).sessions == (
        tmp_path / "elsewhere" / "sessions"
    )


def test_mount_says_whose_agent_dir_it_mounted(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", "PI_CONFIG_DIR", "OMP_PROFILE", "PI_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    line = mounted_line(home / ".omp" / "agent", Path("/mnt/x"))
    assert line == f"sessionfs: mounted oh-my-pi 18 agent dir {home}/.omp/agent at /mnt/x"
