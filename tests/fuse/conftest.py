"""Harness for the FUSE acceptance tests: a real mount in a tmp dir, driven with real
tools. The daemon runs in a subprocess; teardown always unmounts (``fusermount3 -u``,
then kill + ``-u -z`` as the last resort) and every command has a timeout, so a bug
makes a test fail instead of hanging the suite."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT = 60
MOUNT_TIMEOUT = 20


def fuse_available() -> bool:
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="FUSE is not available (/dev/fuse or fusermount3 missing)")
    for item in items:
        path = Path(str(item.fspath))
        if path.is_relative_to(here) and not path.name.startswith("test_units"):
            item.add_marker(pytest.mark.fuse)
            if not fuse_available():
                item.add_marker(skip)


def run(*cmd: str | Path, cwd: Path | None = None, check: bool = True) -> str:
    """Run a real tool with a timeout; its stdout as text."""
    result = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        capture_output=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{cmd} exited {result.returncode}: {result.stderr.decode(errors='replace')}"
        )
    return result.stdout.decode("utf-8", "surrogateescape")


def sessionfs(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionfs", *(str(a) for a in args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


@dataclass
class Mount:
    path: Path
    agent_dir: Path
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None and os.path.ismount(self.path)

    def unmount(self) -> None:
        if os.path.ismount(self.path):
            subprocess.run(["fusermount3", "-u", str(self.path)], timeout=COMMAND_TIMEOUT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if os.path.ismount(self.path):
            subprocess.run(["fusermount3", "-u", "-z", str(self.path)], timeout=COMMAND_TIMEOUT)


def start_mount(agent_dir: Path, mountpoint: Path, *extra: str) -> Mount:
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = mountpoint.parent / f"{mountpoint.name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sessionfs",
                "mount",
                str(mountpoint),
                "--foreground",
                "--agent-dir",
                str(agent_dir),
                *extra,
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    mount = Mount(mountpoint, agent_dir, process, log)
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not os.path.ismount(mountpoint):
        if process.poll() is not None or time.monotonic() > deadline:
            mount.unmount()
            raise AssertionError(f"mount did not come up: {log.read_text(errors='replace')}")
        time.sleep(0.05)
    return mount


@pytest.fixture
def mount_factory(tmp_path: Path) -> Iterator:
    mounts: list[Mount] = []

    def factory(agent_dir: Path, *extra: str, name: str = "mnt") -> Mount:
        mount = start_mount(agent_dir, tmp_path / name, *extra)
        mounts.append(mount)
        return mount

    yield factory
    for mount in mounts:
        mount.unmount()


def load_demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sessionfs_demo", REPO / "contrib" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
def demo_mount(demo_agent: Path, mount_factory) -> Mount:  # type: ignore[no-untyped-def]
    return mount_factory(demo_agent)
