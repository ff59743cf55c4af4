"""Shared test fixtures: where the real agent session files are, and tmp copies of them;
and the one rule for FUSE tests: a module marked ``pytestmark = pytest.mark.fuse`` is
skipped where FUSE is not available (no /dev/fuse or fusermount3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.fixture_paths import FIXTURE_NAMES, fixture_path
from support.mount import fuse_available


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if fuse_available():
        return
    skip = pytest.mark.skip(reason="FUSE is not available (/dev/fuse or fusermount3 missing)")
    for item in items:
        if item.get_closest_marker("fuse") is not None:
            item.add_marker(skip)


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
