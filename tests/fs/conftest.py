"""Fixtures of the FUSE acceptance tests: the demo agent dir they browse, mounted with
``mount_factory`` (tests/conftest.py: real mounts in tmp dirs, unmounted in teardown)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mount import Mount, MountFactory, load_demo_module
from support.other_agents import AgentTrees, fake_home, home_env
from support.tmpfs import fill, tmpfs


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo agent dir, generated once per test run (tests copy it before use)."""
    agent_dir = tmp_path_factory.mktemp("demo-template") / "agent"
    load_demo_module().generate(agent_dir)
    return agent_dir


@pytest.fixture
def demo_agent(demo_template: Path, tmp_path: Path) -> Path:
    agent_dir = tmp_path / "agent"
    shutil.copytree(demo_template, agent_dir, copy_function=shutil.copy2)
    return agent_dir


@pytest.fixture
def demo_mount(demo_agent: Path, mount_factory: MountFactory) -> Mount:
    return mount_factory(demo_agent)


@pytest.fixture
def agent_trees(tmp_path: Path) -> AgentTrees:
    """Claude Code's and Codex's dirs under a fake HOME (`support.other_agents`)."""
    return fake_home(tmp_path)


@pytest.fixture
def agents_mount(agent_trees: AgentTrees, demo_agent: Path, mount_factory: MountFactory) -> Mount:
    """The demo agent dir mounted with ``agent_trees``' HOME (``agents/claude``, ``/codex``)."""
    return mount_factory(demo_agent, env=home_env(agent_trees.home))


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A tiny tmpfs filled to the last byte: every write under it fails with ENOSPC
    (needs root; skipped otherwise). Unmounted in teardown."""
    with tmpfs(tmp_path / "full", "64k") as target:
        fill(target)
        yield target
