"""Where the test data lives: the one definition every test directory imports.

The real agent session files are part of the repository (``tests/fixtures/``), so a
missing one is a broken checkout and fails the test that needs it; nothing is skipped.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Real v1 session files recorded by the agents (read-only; see fixtures/README.md).
FIXTURES_DIR = REPO / "tests" / "fixtures"
FIXTURE_NAMES = ("pi-v1-before-compaction.jsonl", "pi-v1-large-session.jsonl")


def fixture_path(name: str) -> Path:
    """Path of the real fixture ``name``; AssertionError (a failure) when it is missing."""
    path = FIXTURES_DIR / name
    assert path.is_file(), f"real fixture {name} missing from {FIXTURES_DIR}"
    return path


def fixture_files() -> list[Path]:
    """Every real fixture, in a stable order."""
    return [fixture_path(name) for name in FIXTURE_NAMES]
