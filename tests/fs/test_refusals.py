"""Every refused write answers its errno and says why in a ``ctl``: in the session's
``ctl`` for a write in a session dir, in the root ``ctl`` elsewhere (the manual's
promise "the reason is in ctl"). Driven with real tools on a real mount."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest
from support.mount import COMMAND_TIMEOUT, Mount, MountFactory
from support.write_setup import errno_of, make_agent, read_ctl, session_dir

pytestmark = pytest.mark.fuse


@pytest.fixture
def mounted(tmp_path: Path, mount_factory: MountFactory) -> tuple[Mount, Path]:
    agent, file = make_agent(tmp_path)
    mount = mount_factory(agent)
    return mount, session_dir(mount, file)


def tool(*cmd: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )


def in_mount(mount: Mount, path: Path) -> str:
    return str(path.relative_to(mount.path))


def test_mkdir_in_a_session_dir(mounted: tuple[Mount, Path]) -> None:
    mount, d = mounted
    result = tool("mkdir", d / "notes")
    assert result.returncode != 0 and "Operation not permitted" in result.stderr
    assert errno_of(lambda: os.mkdir(d / "notes")) == errno.EPERM
    reason = f"mkdir {in_mount(mount, d / 'notes')}: no directories here"
    assert read_ctl(d)["last_error"] == reason
    assert read_ctl(mount.path)["last_error"] == ""  # not the root's business


def test_hard_link_in_a_session_dir(mounted: tuple[Mount, Path]) -> None:
    mount, d = mounted
    result = tool("ln", d / "title", d / "title2")
    assert result.returncode != 0 and "Operation not permitted" in result.stderr
    assert errno_of(lambda: os.link(d / "title", d / "title2")) == errno.EPERM
    reason = f"ln {in_mount(mount, d / 'title2')}: no hard links in the mount (use ln -s)"
    assert read_ctl(d)["last_error"] == reason


def test_rename_across_dirs(mounted: tuple[Mount, Path]) -> None:
    mount, d = mounted
    assert errno_of(lambda: os.rename(d / "leaf", d / "labels" / "moved")) == errno.EXDEV
    reason = f"mv {in_mount(mount, d / 'leaf')}: renames stay in one directory"
    assert read_ctl(d)["last_error"] == reason
    # ``mv`` itself then falls back to copy + delete, which is refused as well
    result = tool("mv", d / "leaf", d / "labels" / "moved")
    assert result.returncode != 0
    assert (d / "leaf").is_symlink() and not (d / "labels" / "moved").exists()


def test_a_later_write_clears_the_reason(mounted: tuple[Mount, Path]) -> None:
    _mount, d = mounted
    assert errno_of(lambda: os.mkdir(d / "notes")) == errno.EPERM
    (d / "title").write_text("renamed\n")
    status = read_ctl(d)
    assert status["last_error"] == "" and status["last_result"] == "title: renamed"


def test_refusals_outside_sessions_go_to_the_root_ctl(mounted: tuple[Mount, Path]) -> None:
    mount, d = mounted
    assert errno_of(lambda: os.mkdir(mount.path / "notes")) == errno.EPERM
    assert read_ctl(mount.path)["last_error"] == "mkdir notes: no directories here"
    project = d.parent
    assert errno_of(lambda: os.symlink("x", project / "link")) == errno.EPERM
    reason = f"ln -s {in_mount(mount, project / 'link')}: no symlinks here"
    assert read_ctl(mount.path)["last_error"] == reason
    assert read_ctl(d)["last_error"] == ""
