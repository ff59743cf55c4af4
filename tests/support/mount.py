"""A real mount in a tmp dir, driven with real tools: the harness of the FUSE tests
and of the mount benchmarks (``bench/common.py`` uses `wait_for_mount` and
`stop_mount`). The daemon runs in a subprocess; stopping always unmounts
(``fusermount3 -u``, then kill + ``-u -z`` as the last resort) and every command has a
timeout, so a bug makes a test fail instead of hanging the suite. Each mount also has
a guard (`guard_mount`), a process of its own session that unmounts it when the test
process goes without its teardown (killed by a timeout or the OOM killer): no mount
outlives the run that made it."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from core.formats.agent_format import AgentFormat
from core.formats.registry import AGENT_FORMATS

if TYPE_CHECKING:  # the benchmarks import this module without pytest
    import pytest

REPO = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT = 60
MOUNT_TIMEOUT = 20


#: A mount's guard (`guard_mount`), as ``sh -c``: wait until the test process lets go
#: of the pipe on stdin (its teardown closes it; the kernel closes it when the process
#: dies any way), then unmount the mount point if it is still mounted, live or stale,
#: and stop its daemon if that still runs (``$2``, checked to be the process mounted
#: there, as a pid may be reused); ``$3`` is ``fusermount3``'s path.
_GUARD_SCRIPT = r"""
cat >/dev/null
if grep -qF -- " $1 fuse" /proc/self/mounts; then
    "$3" -u -- "$1" 2>/dev/null || "$3" -u -z -- "$1" 2>/dev/null
fi
if [ -n "$2" ] && tr '\0' '\n' <"/proc/$2/cmdline" 2>/dev/null | grep -qxF -- "$1"; then
    kill "$2" 2>/dev/null
fi
exit 0
"""


class MountGuard:
    """`guard_mount`'s guard: `release` once the test has unmounted (or to unmount)."""

    def __init__(self, process: subprocess.Popen[bytes], pipe: int) -> None:
        self.process, self._pipe = process, pipe

    def release(self) -> None:
        """Let the guard go: it unmounts what is still mounted, then exits (waited
        for, so that a later mount on the same path is never its business)."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        self.process.wait(timeout=COMMAND_TIMEOUT)


def guard_mount(mountpoint: Path, daemon_pid: int | None = None) -> MountGuard:
    """A guard of the mount at ``mountpoint`` (its daemon ``daemon_pid`` when known):
    in a session of its own, so that a kill of the test's process group spares it."""
    # Its own PATH and shell, whatever a test made of its own (one leaves nothing but
    # fusermount3 on PATH); fusermount3 where the test's PATH finds it.
    fusermount = shutil.which("fusermount3") or "fusermount3"
    read, write = os.pipe()  # (not inherited by any other child: PEP 446)
    try:
        arguments = [str(mountpoint), str(daemon_pid or ""), fusermount]
        process = subprocess.Popen(
            ["/bin/sh", "-c", _GUARD_SCRIPT, "mount-guard", *arguments],
            stdin=read,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.defpath},
            start_new_session=True,
        )
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    return MountGuard(process, write)


class MountDidNotComeUp(RuntimeError):
    """The daemon exited, or the mount point did not become a mount in time."""


def fuse_available() -> bool:
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


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


def sessionfs(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionfs", *(str(a) for a in args)],
        cwd=REPO,
        env=isolated_env(env),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )


@contextmanager
def background_mount(
    agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, subprocess.CompletedProcess[str]]]:
    """``sessionfs mount`` as a user runs it (the daemon detaches once the mount is
    ready) on ``tmp_path/bg``, its log file under ``tmp_path/state``; yields the mount
    point and the command's result. Still mounted at the end: unmounted lazily."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the daemon's log file
    mountpoint = tmp_path / "bg"
    mountpoint.mkdir()
    guard = guard_mount(mountpoint)
    try:
        yield mountpoint, sessionfs("mount", mountpoint, "--agent-dir", agent_dir)
    finally:
        try:
            if is_mounted(mountpoint):
                subprocess.run(
                    ["fusermount3", "-u", "-z", str(mountpoint)], timeout=COMMAND_TIMEOUT
                )
        finally:
            guard.release()


def mount_command(mountpoint: Path, agent_dir: Path, *extra: str) -> list[str]:
    """``sessionfs mount`` in the foreground, as the tests and benchmarks run it."""
    return [
        sys.executable,
        "-m",
        "sessionfs",
        "mount",
        str(mountpoint),
        "--foreground",
        "--agent-dir",
        str(agent_dir),
        *extra,
    ]


def wait_for_mount(
    path: Path, process: subprocess.Popen[bytes], timeout: float = MOUNT_TIMEOUT
) -> None:
    """Return once ``path`` is a mount; `MountDidNotComeUp` if the daemon exits first
    or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not os.path.ismount(path):
        if process.poll() is not None or time.monotonic() > deadline:
            raise MountDidNotComeUp(f"mount at {path} did not come up (exit {process.poll()})")
        time.sleep(0.02)


def stop_mount(path: Path, process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """Unmount ``path`` and reap its daemon, whatever state they are in (a killed
    daemon leaves a stale mount, which ``os.path.ismount`` does not see: its stat fails)."""
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", str(path)], check=False, timeout=COMMAND_TIMEOUT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
    if is_mounted(path):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], check=False, timeout=COMMAND_TIMEOUT)


def is_mounted(path: Path) -> bool:
    """A live mount or a stale one (its daemon gone): either needs a ``fusermount3 -u``."""
    from sessionfs.fs.daemon import is_stale_mount  # the daemon's own test, loaded late

    return os.path.ismount(path) or is_stale_mount(path)


@dataclass
class Mount:
    path: Path
    agent_dir: Path
    process: subprocess.Popen[bytes]
    log: Path
    guard: MountGuard

    def alive(self) -> bool:
        return self.process.poll() is None and os.path.ismount(self.path)

    def unmount(self) -> None:
        try:
            stop_mount(self.path, self.process)
        finally:
            self.guard.release()


#: The ``mount_factory`` fixture: ``factory(agent_dir, *options, name="mnt") -> Mount``.
MountFactory = Callable[..., Mount]


def isolated_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The daemon's environment: ``env`` when given (a test's fake HOME), else this
    process's with every other agent's dir (Claude Code's, Codex's, Gemini CLI's, Qwen
    Code's, ...: the registry's variables) and the local archive's (in the data dir)
    pointed where no dir can be (below ``/dev/null``), so no test shows, or reads, the
    sessions of the machine's user."""
    if env is not None:
        return env
    nowhere = Path(os.devnull)
    isolated = {**os.environ}
    isolated.pop("QWEN_RUNTIME_DIR", None)  # Qwen Code's sessions: before $QWEN_HOME
    for agent in _agents_found_by_variable():
        isolated[agent.env_var] = str(nowhere / agent.name)
    isolated["XDG_DATA_HOME"] = str(nowhere / "data")  # the local archive
    return isolated


def _agents_found_by_variable() -> list[AgentFormat]:
    """The registered agents whose dir an environment variable can move."""
    return [agent for agent in AGENT_FORMATS.values() if agent.env_var]


def start_mount(
    agent_dir: Path, mountpoint: Path, *extra: str, env: dict[str, str] | None = None
) -> Mount:
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = mountpoint.parent / f"{mountpoint.name}.log"
    if env is None and not {"--agents", "--no-agents"} & set(extra):
        # Without a fake HOME only the agents whose dirs `isolated_env` points nowhere:
        # the machine's ~/.cursor (found by HOME alone) never shows.
        shown = ",".join(agent.name for agent in _agents_found_by_variable())
        extra = (*extra, "--agents", shown)
    if "--cache-dir" not in extra:
        # Never the user's real cache dir: each test's caches die with its tmp dir.
        extra = (*extra, "--cache-dir", str(mountpoint.parent / f"{mountpoint.name}.cache"))
    with open(log, "wb") as out:
        process = subprocess.Popen(
            mount_command(mountpoint, agent_dir, *extra),
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=isolated_env(env),
        )
    try:
        guard = guard_mount(mountpoint, process.pid)
    except BaseException:  # (no guard: the daemon must not outlive this either)
        process.kill()
        stop_mount(mountpoint, process)
        raise
    mount = Mount(mountpoint, agent_dir, process, log, guard)
    try:
        wait_for_mount(mountpoint, process)
    except MountDidNotComeUp:
        mount.unmount()
        raise AssertionError(f"mount did not come up: {log.read_text(errors='replace')}") from None
    return mount


def load_demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sessionfs_demo", REPO / "contrib" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
