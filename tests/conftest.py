"""Shared test fixtures: where the real agent session files are, and tmp copies of them;
real mounts (`mount_factory`); the real upstream agents (pi, omp, Claude Code) configured
against a fake model server; and the one rule for FUSE tests: a module marked ``pytestmark =
pytest.mark.fuse`` is skipped where FUSE is not available (no /dev/fuse or
fusermount3)."""

from __future__ import annotations

import platform
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.fake_anthropic_server import FakeAnthropicServer
from support.fake_model_server import DEFAULT_MODEL, FakeModelServer
from support.fake_responses_server import FakeResponsesServer
from support.fixture_paths import FIXTURE_NAMES, fixture_path
from support.mount import Mount, MountFactory, fuse_available, start_mount
from support.real_agents import (
    AgentUnavailable,
    ClaudeAgent,
    CodexAgent,
    InstallFailed,
    OmpAgent,
    PiAgent,
    install_claude,
    install_codex,
    install_copilot,
    install_gemini,
    install_omp,
    install_opencode,
    install_pi,
    install_qwen,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if fuse_available():
        return
    skip = pytest.mark.skip(reason="FUSE is not available (/dev/fuse or fusermount3 missing)")
    for item in items:
        if item.get_closest_marker("fuse") is not None:
            item.add_marker(skip)


@pytest.fixture
def mount_factory(tmp_path: Path) -> Iterator[MountFactory]:
    """Real mounts in tmp dirs (`support.mount`), all unmounted in teardown."""
    mounts: list[Mount] = []

    def factory(
        agent_dir: Path, *extra: str, name: str = "mnt", env: dict[str, str] | None = None
    ) -> Mount:
        mount = start_mount(agent_dir, tmp_path / name, *extra, env=env)
        mounts.append(mount)
        return mount

    yield factory
    errors = []
    for mount in mounts:  # every one, even when one fails to stop
        try:
            mount.unmount()
        except Exception as exc:  # (a daemon that did not exit in time)
            errors.append(exc)
    if errors:
        raise errors[0]


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


# --------------------------------------------------------------------------- real agents


def _installed(install: Callable[[], Path]) -> Path:
    """Install (once per cache dir) or skip: a skip only when the machine cannot run the
    agent at all (no node/npm, no registry); any other install failure fails. CI
    installs both agents before the tests (``.ci/run``), so there nothing skips."""
    try:
        return install()
    except AgentUnavailable as error:
        pytest.skip(str(error))
    except InstallFailed as error:
        pytest.fail(str(error))


@pytest.fixture(scope="session")
def pi_install() -> Path:
    """The cache dir holding the pinned pi (``$SESSIONFS_PI_CACHE``)."""
    return _installed(install_pi)


@pytest.fixture(scope="session")
def omp_install() -> Path:
    """The cache dir holding the pinned Bun and omp (``$SESSIONFS_OMP_CACHE``)."""
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("omp runs on the npm build of Bun for linux-x64 only")
    return _installed(install_omp)


@pytest.fixture(scope="session")
def gemini_install() -> Path:
    """The cache dir holding the pinned Gemini CLI (``$SESSIONFS_GEMINI_CACHE``)."""
    return _installed(install_gemini)


@pytest.fixture(scope="session")
def qwen_install() -> Path:
    """The cache dir holding the pinned Qwen Code (``$SESSIONFS_QWEN_CACHE``)."""
    return _installed(install_qwen)


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    """A fake OpenAI-compatible model server on 127.0.0.1, recording every request."""
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def pi_agent(pi_install: Path, fake_model: FakeModelServer, tmp_path: Path) -> PiAgent:
    """pi with its own HOME under tmp_path, agent dir ``~/.pi/agent``, talking to
    ``fake_model``."""
    return PiAgent.at_home(tmp_path / "pi-home", fake_model.url, DEFAULT_MODEL, pi_install)


@pytest.fixture
def omp_agent(omp_install: Path, fake_model: FakeModelServer, tmp_path: Path) -> OmpAgent:
    """omp with its own HOME under tmp_path, agent dir ``~/.omp/agent``, talking to
    ``fake_model``."""
    return OmpAgent.at_home(tmp_path / "omp-home", fake_model.url, DEFAULT_MODEL, omp_install)


@pytest.fixture(scope="session")
def codex_install() -> Path:
    """The cache dir holding the pinned Codex CLI (``$SESSIONFS_CODEX_CACHE``)."""
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("the tests install Codex's native binary for linux-x64 only")
    return _installed(install_codex)


@pytest.fixture(scope="session")
def copilot_install() -> Path:
    """The cache dir holding the pinned GitHub Copilot CLI."""
    return _installed(install_copilot)


@pytest.fixture(scope="session")
def opencode_install() -> Path:
    """The cache dir holding the pinned opencode."""
    return _installed(install_opencode)


@pytest.fixture
def fake_responses() -> Iterator[FakeResponsesServer]:
    """A fake OpenAI Responses API server on 127.0.0.1, recording every request."""
    with FakeResponsesServer() as server:
        yield server


@pytest.fixture
def codex_agent(
    codex_install: Path, fake_responses: FakeResponsesServer, tmp_path: Path
) -> CodexAgent:
    """Codex with its own HOME under tmp_path, ``CODEX_HOME`` ``~/.codex``, talking
    to ``fake_responses``."""
    home = tmp_path / "codex-home"
    return CodexAgent.at_home(home, fake_responses.url, DEFAULT_MODEL, codex_install)


@pytest.fixture(scope="session")
def claude_install() -> Path:
    """The cache dir holding the pinned Claude Code (``$SESSIONFS_CLAUDE_CACHE``)."""
    return _installed(install_claude)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    """A fake Anthropic Messages server on 127.0.0.1, recording every request."""
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def claude_agent(
    claude_install: Path, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> ClaudeAgent:
    """Claude Code with its own HOME under tmp_path (sessions in ``~/.claude``),
    talking to ``fake_anthropic`` with the CLI's default model."""
    return ClaudeAgent.at_home(
        tmp_path / "claude-home", fake_anthropic.base_url, "", claude_install
    )


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A dir other users can enter, for the mountpoint (tmp_path is root's only)."""
    path = Path(tempfile.mkdtemp(prefix="sessionfs-allow-other-"))
    path.chmod(0o755)
    closed = [p for p in path.parents if not p.stat().st_mode & 0o001]
    if closed:  # a private $TMPDIR: other users could not even reach the mount
        shutil.rmtree(path)
        pytest.skip(f"other users cannot enter {closed[0]} (the temp dir's parent)")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
