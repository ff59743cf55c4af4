"""Fixtures for the write tests: a tmp agent dir and a session file inside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agent_messages import make_session


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "agent"
    (directory / "sessions").mkdir(parents=True)
    return directory


@pytest.fixture
def session_path(agent_dir: Path) -> Path:
    return make_session(agent_dir)
