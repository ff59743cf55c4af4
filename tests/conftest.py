"""Shared test fixtures: where the real agent session files are, and tmp copies of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fixture_paths import FIXTURE_NAMES, fixture_path


@pytest.fixture(params=FIXTURE_NAMES)
def real_fixture(request: pytest.FixtureRequest) -> Path:
    """Path of one real fixture (read-only: never open it for writing)."""
    return fixture_path(request.param)


@pytest.fixture
def real_fixture_copy(real_fixture: Path, tmp_path: Path) -> Path:
    """A writable copy of a real fixture inside an agent-dir layout under tmp_path."""
    project = tmp_path / "agent" / "sessions" / "--work-demo--"
    project.mkdir(parents=True)
    target = project / real_fixture.name
    shutil.copyfile(real_fixture, target)
    return target
