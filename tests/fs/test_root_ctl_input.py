"""Root ``ctl`` under hostile input, and the daemon's terminal.

Every bad line gets its own errno (never ``EIO``) and a reason in ``cat ctl``, creates
nothing and logs no traceback. Sessions the daemon creates leave no terminal
breadcrumb, whatever terminal the daemon was started from.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.mount import COMMAND_TIMEOUT, Mount, MountFactory, run
from support.write_setup import drop, errno_of, make_agent, session_dir

pytestmark = pytest.mark.fuse

LONG_COMPONENT = "/tmp/" + "x" * 300
# Short components, but the project directory name encodes the whole path.
LONG_PATH = "/" + "/".join(["abcdefghij"] * 30)

HOSTILE_LINES: list[tuple[str, bytes, int, str]] = [
    ("NUL in cwd", b"new /tmp/a\0b\n", errno.EINVAL, "NUL byte"),
    ("NUL in title", b"new /tmp/ok a \0 title\n", errno.EINVAL, "NUL byte"),
    ("300-byte component", f"new {LONG_COMPONENT}\n".encode(), errno.ENAMETOOLONG, "too long"),
    ("long path", f"new {LONG_PATH} title\n".encode(), errno.ENAMETOOLONG, "too long"),
    ("empty line", b"\n", errno.EINVAL, "no command (write one of: new <cwd>"),
    ("blank lines", b"  \n\t\n", errno.EINVAL, "no command"),
    ("unknown command", b"launch /tmp\n", errno.EINVAL, "unknown command 'launch'"),
    ("relative cwd", b"new relative/dir\n", errno.EINVAL, "absolute path"),
    ("no cwd", b"new\n", errno.EINVAL, "absolute path"),
    ("not UTF-8", b"new /tmp/\xff\xfe\n", errno.EINVAL, "not UTF-8"),
    ("bad line after a good one", b"new /tmp/fine\nnew rel\n", errno.EINVAL, "line 2"),
    ("1 MB of junk", bytes(range(256)) * 4096, errno.EFBIG, "at most"),
]


def ctl_status(mount: Mount) -> dict[str, str]:
    lines = (mount.path / "ctl").read_text().splitlines()
    return dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in lines)


def files_under(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*"))


def contents_under(directory: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in files_under(directory) if path.is_file()}


@pytest.fixture
def mount(tmp_path: Path, mount_factory: MountFactory) -> Mount:
    agent_dir, _file = make_agent(tmp_path)
    return mount_factory(agent_dir)


@pytest.mark.parametrize(
    ("data", "code", "reason"),
    [case[1:] for case in HOSTILE_LINES],
    ids=[case[0] for case in HOSTILE_LINES],
)
def test_hostile_root_ctl_input_gets_its_errno_and_reason(
    mount: Mount, data: bytes, code: int, reason: str
) -> None:
    before = files_under(mount.agent_dir)
    assert errno_of(lambda: drop(mount.path, "ctl", data)) == code
    assert reason in ctl_status(mount)["last_error"]
    assert files_under(mount.agent_dir) == before, "a refused line created something"
    assert mount.alive()
    assert "Traceback" not in mount.log.read_text(errors="replace")


def test_printf_with_a_nul_byte_fails_in_the_shell_and_the_mount_goes_on(mount: Mount) -> None:
    shell = subprocess.run(
        # bash, whose printf names the errno (dash's says "I/O error" for any failure)
        ["bash", "-c", r"printf 'new /tmp/a\0b\n' > ctl"],
        cwd=mount.path,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert shell.returncode != 0
    assert "Invalid argument" in shell.stderr
    assert "NUL byte" in run("cat", mount.path / "ctl")
    run("sh", "-c", "echo 'new /tmp/after the refusal' > ctl", cwd=mount.path)
    status = ctl_status(mount)
    assert status["last_error"] == ""
    assert Path(status["last_result"]).is_dir()


# -- the daemon's terminal ------------------------------------------------------------

TERMINAL_ENV = {
    "TMUX_PANE": "%7",
    "KITTY_WINDOW_ID": "3",
    "TERM_SESSION_ID": "w0t0p0",
    "WT_SESSION": "abc",
}


@pytest.fixture(params=["stdin a terminal", "stdin not a terminal"])
def daemon_stdin(request: pytest.FixtureRequest) -> Iterator[None]:
    """Processes started meanwhile get a pseudo-terminal as stdin, as a shell gives
    ``sessionfs mount --foreground``; or not (then only the variables name a terminal)."""
    if request.param == "stdin not a terminal":
        with open(os.devnull, "rb") as devnull:
            saved = os.dup(0)
            os.dup2(devnull.fileno(), 0)
        try:
            yield
        finally:
            os.dup2(saved, 0)
            os.close(saved)
        return
    leader, follower = os.openpty()
    saved = os.dup(0)
    os.dup2(follower, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, leader, follower):
            os.close(fd)


def test_sessions_made_through_the_mount_leave_no_terminal_breadcrumb(
    tmp_path: Path,
    mount_factory: MountFactory,
    monkeypatch: pytest.MonkeyPatch,
    daemon_stdin: None,
) -> None:
    agent_dir, file = make_agent(tmp_path)
    # make_agent ran in this process, which may have a terminal of its own
    crumbs = agent_dir / "terminal-sessions"
    crumbs_before = contents_under(crumbs)
    for key, value in TERMINAL_ENV.items():
        monkeypatch.setenv(key, value)  # the daemon inherits the test's environment
    mount = mount_factory(agent_dir)
    monkeypatch.undo()

    run("sh", "-c", f"echo 'new {tmp_path}/project titled' > ctl", cwd=mount.path)
    assert Path(ctl_status(mount)["last_result"]).is_dir()
    session = session_dir(mount, file)
    first = sorted(os.listdir(session / "entries"))[0].removesuffix(".json")
    run("sh", "-c", f"echo fork > ctl; echo 'extract {first}' > ctl", cwd=session)

    sessions = list((agent_dir / "sessions").rglob("*.jsonl"))
    assert len(sessions) == 4, sessions  # the demo one, new, fork, extract
    assert contents_under(crumbs) == crumbs_before
