"""Shared test fixtures: where the real agent session files are, and tmp copies of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Real v1 session files recorded by the agents; read-only, beside the repo in CI.
FIXTURES_DIR = REPO.parent / "shared" / "fixtures"
FIXTURE_NAMES = ("pi-v1-before-compaction.jsonl", "pi-v1-large-session.jsonl")


def fixture_path(name: str) -> Path:
    path = FIXTURES_DIR / name
    if not path.is_file():
        pytest.skip(f"real fixture {name} not found beside the repo ({FIXTURES_DIR})")
    return path


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
