"""Editors and stream editors on a session's control files, on a real mount: the real
``sed -i``, ``perl -pi``, vim (without and with its swap and backup files, in copy and
rename mode), nano (driven through tmux), ``>>``. Each save of ``title`` is one title
write: afterwards the session file differs in its title only, every entry line is
byte for byte what it was, nothing the editor made is listed, and nothing was
written into the agent dir (`sessionfs.fs.scratch`)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from support.mount import COMMAND_TIMEOUT, Mount, MountFactory, run
from support.write_setup import errno_of, read_ctl

from core.check import check_file

pytestmark = pytest.mark.fuse

TITLE = "Fix the login redirect loop"


def tree_of(agent_dir: Path, skip: Path) -> dict[str, int]:
    """Every file under the agent dir but ``skip`` (the session file), with its size."""
    return {
        str(p.relative_to(agent_dir)): p.stat().st_size
        for p in agent_dir.rglob("*")
        if p != skip and not p.is_dir()
    }


class Session:
    """``recent/1`` of the demo mount (the webapp session, titled), with its file as
    it was before the test."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount
        self.dir = Path(os.path.realpath(mount.path / "recent" / "1"))
        self.file = Path(read_ctl(self.dir)["file"])
        self.lines = self.file.read_bytes().splitlines()
        self.tree = tree_of(mount.agent_dir, self.file)
        #: what the session dir lists of its own (title, ctl, entries/, ...)
        self.names = set(os.listdir(self.dir))
        assert "title" in self.names and "ctl" in self.names
        assert (self.dir / "title").read_text() == TITLE + "\n"

    def header(self) -> dict[str, object]:
        return orjson.loads(self.file.read_bytes().splitlines()[0])

    def assert_only_title_changed(self, title: str) -> None:
        """The file holds ``title`` and else exactly what it held; the mount shows it;
        no editor file is listed; the agent dir holds no new file; the file is clean."""
        lines = self.file.read_bytes().splitlines()
        assert lines[1:] == self.lines[1:]  # every entry, byte for byte
        before, after = orjson.loads(self.lines[0]), orjson.loads(lines[0])
        assert after.pop("title") == title
        assert after.pop("titleSource") == "user"
        before.pop("title", None), before.pop("titleSource", None)
        assert after == before
        assert (self.dir / "title").read_text() == title + "\n"
        assert set(os.listdir(self.dir)) == self.names
        assert tree_of(self.mount.agent_dir, self.file) == self.tree
        assert check_file(self.file).clean, check_file(self.file).problems
        status = read_ctl(self.dir)
        assert status["last_result"] == f"title: {title}"
        assert status["last_error"] == ""  # nothing the editor did after was refused


@pytest.fixture
def session(demo_mount: Mount) -> Session:
    return Session(demo_mount)


def test_sed_i(session: Session) -> None:
    run("sed", "-i", "s/$/ (edited)/", "title", cwd=session.dir)
    session.assert_only_title_changed(TITLE + " (edited)")


def test_perl_pi(session: Session) -> None:
    run("perl", "-pi", "-e", "s/login/sign-in/", "title", cwd=session.dir)
    session.assert_only_title_changed("Fix the sign-in redirect loop")


def test_append_appends_to_the_title(session: Session) -> None:
    run("sh", "-c", "printf ' v2' >> title", cwd=session.dir)
    session.assert_only_title_changed(TITLE + " v2")
    run("sh", "-c", "echo ' v3' >> title", cwd=session.dir)
    session.assert_only_title_changed(TITLE + " v2 v3")
    run("sh", "-c", "echo 'Replaced' > title", cwd=session.dir)
    session.assert_only_title_changed("Replaced")


def test_a_write_in_place_changes_what_it_writes(session: Session) -> None:
    """An editor that opens the file read-write, truncates and writes (VS Code does),
    and a write over the start that keeps the rest."""
    with open(session.dir / "title", "r+b") as f:
        f.write(b"Mend")  # over "Fix " and keeps the rest ("the login ...")
    session.assert_only_title_changed("Mendthe login redirect loop")
    with open(session.dir / "title", "r+b") as f:
        f.truncate(0)
        f.write(b"Truncated, then written\n")
    session.assert_only_title_changed("Truncated, then written")


def vim(directory: Path, *options: str, home: Path | None = None) -> None:
    """``vim -u NONE <options> -c 's/redirect/login/' -c wq title``, no terminal; with
    ``home``, a plain ``vim`` (no ``-u NONE``: the defaults a user without a vimrc has)."""
    start = ["vim"] if home is not None else ["vim", "-u", "NONE"]
    command = [*start, *options, "-c", "s/redirect/login/", "-c", "wq", "title"]
    env = {**os.environ, "HOME": str(home)} if home is not None else None
    result = subprocess.run(
        command, cwd=directory, stdin=subprocess.DEVNULL, capture_output=True,
        timeout=COMMAND_TIMEOUT, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result


VIM_MODES = {
    # -u NONE is vi-compatible: backupcopy=yes (title~ written as a copy, then title
    # overwritten); backupskip= because the default skips backups below /tmp
    "no swap file": ["-n"],
    "swap and backup copy": ["-c", "set directory=. backupskip="],
    # nocompatible: backupcopy=auto probes with a file named 4913, then renames
    # title to title~ and writes a new title
    "swap, rename mode": ["-c", "set nocompatible directory=. backupskip= backupcopy=auto"],
    "backupcopy=no": ["-c", "set nocompatible directory=. backupskip= backupcopy=no"],
}


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.parametrize("options", VIM_MODES.values(), ids=list(VIM_MODES))
def test_vim(session: Session, options: list[str], tmp_path: Path) -> None:
    listing = tmp_path / "listing"  # what the session dir held while vim ran
    vim(session.dir, *options, "-c", f"silent !ls -A > {listing}")
    session.assert_only_title_changed("Fix the login login loop")
    seen = set(listing.read_text().split())
    if "-n" in options:
        assert seen == session.names
    else:
        assert seen == session.names | {".title.swp"}  # the swap file, gone once vim quit


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
def test_plain_vim(session: Session, tmp_path: Path) -> None:
    """``vim title`` as a user without a vimrc runs it: vim's defaults (nocompatible,
    backupcopy=auto, its swap file beside the file)."""
    home = tmp_path / "home"
    home.mkdir()
    vim(session.dir, home=home)
    session.assert_only_title_changed("Fix the login login loop")


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_keeps_its_backup_in_memory_only(session: Session) -> None:
    """With ``backup`` on, vim leaves ``title~``: a file of the mount's memory, 0600,
    holding the old title, gone when removed (and at unmount)."""
    vim(session.dir, "-n", "-c", "set nocompatible backup backupskip= backupcopy=no")
    backup = session.dir / "title~"
    assert backup.read_text() == TITLE + "\n"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert tree_of(session.mount.agent_dir, session.file) == session.tree
    os.unlink(backup)
    session.assert_only_title_changed("Fix the login login loop")


@pytest.mark.skipif(
    shutil.which("nano") is None or shutil.which("tmux") is None,
    reason="nano or tmux is not installed (.ci/run installs both)",
)
def test_nano(session: Session, tmp_path: Path) -> None:
    socket = str(tmp_path / "tmux")  # a server of its own, ended below

    def tmux(*args: str) -> str:
        return run("tmux", "-S", socket, *args)

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while text not in (screen := tmux("capture-pane", "-p")):
            assert time.monotonic() < deadline, f"nano never showed {text!r}: {screen}"
            time.sleep(0.1)

    tmux("new-session", "-d", "-x", "100", "-y", "20", "-c", str(session.dir), "nano title")
    try:
        wait_for(TITLE)
        tmux("send-keys", "End", " (nano)")
        wait_for("(nano)")
        tmux("send-keys", "C-s")  # save, without asking for a name
        wait_for("Wrote")
        tmux("send-keys", "C-x")
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while subprocess.run(["tmux", "-S", socket, "has-session"], capture_output=True,
                             timeout=10).returncode == 0:  # fmt: skip
            assert time.monotonic() < deadline, "nano did not quit"
            time.sleep(0.1)  # nano quits, removing its lock file (if it keeps one)
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], check=False, timeout=10)
    session.assert_only_title_changed(TITLE + " (nano)")


def test_a_refused_save_says_why_and_changes_nothing(session: Session) -> None:
    result = subprocess.run(
        ["sed", "-i", "s/.*//", "title"], cwd=session.dir, capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT,
    )  # fmt: skip
    assert result.returncode != 0 and "Invalid argument" in result.stderr
    assert "session name is empty" in read_ctl(session.dir)["last_error"]
    assert session.file.read_bytes().splitlines() == session.lines
    assert set(os.listdir(session.dir)) == session.names  # sed removed its file


def test_sed_i_on_a_symlink_is_refused_saying_why(session: Session) -> None:
    """``leaf`` and ``labels/<name>`` are symlinks: what ``sed -i`` renames over them is
    the entry's JSON it read through the link, not a link target."""
    leaf = os.readlink(session.dir / "leaf")
    for path in ("leaf", "labels/plan"):
        result = subprocess.run(
            ["sed", "-i", "s/a/b/", path], cwd=session.dir, capture_output=True, text=True,
            timeout=COMMAND_TIMEOUT,
        )  # fmt: skip
        assert result.returncode != 0
        assert "is a symlink" in read_ctl(session.dir)["last_error"]
    assert os.readlink(session.dir / "leaf") == leaf
    assert set(os.listdir(session.dir)) == session.names
    assert "plan" in os.listdir(session.dir / "labels")
    assert session.file.read_bytes().splitlines() == session.lines


def test_a_file_renamed_over_leaf_or_to_a_label_names_an_entry(session: Session) -> None:
    d = session.dir
    first = sorted(os.listdir(d / "path"))[0].split("-", 1)[1]  # 0000-<id>.json
    (d / "new-leaf").write_text(f"entries/{first}\n")
    os.rename(d / "new-leaf", d / "leaf")
    assert os.readlink(d / "leaf") == f"entries/{first}"
    (d / "labels" / "tmp").write_text(first.removesuffix(".json"))
    os.rename(d / "labels" / "tmp", d / "labels" / "start")
    assert os.readlink(d / "labels" / "start") == f"../entries/{first}"
    assert read_ctl(d)["last_result"] == "label: start"
    assert set(os.listdir(d)) == session.names and "tmp" not in os.listdir(d / "labels")
    assert session.file.read_bytes().splitlines()[: len(session.lines)] == session.lines


def test_a_file_renamed_over_ctl_runs_its_commands(session: Session) -> None:
    (session.dir / "commands").write_text("flush\n")
    os.rename(session.dir / "commands", session.dir / "ctl")
    assert read_ctl(session.dir)["last_result"] == "flushed"
    assert set(os.listdir(session.dir)) == session.names


def test_scratch_files_are_private_and_bounded(session: Session) -> None:
    d = session.dir
    fd = os.open(d / "notes", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"kept in memory")
    os.fchmod(fd, 0o644)
    os.close(fd)
    assert stat.S_IMODE((d / "notes").stat().st_mode) == 0o600
    assert (d / "notes").read_bytes() == b"kept in memory"
    assert "notes" in os.listdir(d)
    os.unlink(d / "notes")
    assert set(os.listdir(d)) == session.names

    # one file over the bound: EFBIG, the reason in ctl
    result = subprocess.run(
        ["sh", "-c", "head -c 3000000 /dev/zero > huge"], cwd=d, capture_output=True,
        text=True, timeout=COMMAND_TIMEOUT,
    )  # fmt: skip
    assert result.returncode != 0 and "File too large" in result.stderr
    assert "held in memory, at most" in read_ctl(d)["last_error"]
    os.unlink(d / "huge")

    # more files than the bound: ENOSPC, the reason in ctl
    made = []
    code = 0
    for n in range(200):
        code = errno_of(lambda n=n: (d / f"f{n}").write_bytes(b"x"))
        if code:
            break
        made.append(d / f"f{n}")
    assert code == errno.ENOSPC and 0 < len(made) < 200
    assert "scratch files are held in memory already" in read_ctl(d)["last_error"]
    for path in made:
        os.unlink(path)
    assert set(os.listdir(d)) == session.names
    assert tree_of(session.mount.agent_dir, session.file) == session.tree
    assert session.file.read_bytes().splitlines() == session.lines
    assert session.mount.alive()


def test_scratch_files_are_gone_at_unmount(session: Session, mount_factory: MountFactory) -> None:
    (session.dir / "notes").write_text("held in memory only")
    assert "notes" in os.listdir(session.dir)
    session.mount.unmount()
    assert tree_of(session.mount.agent_dir, session.file) == session.tree
    again = mount_factory(session.mount.agent_dir, name="again")
    d = again.path / session.dir.relative_to(session.mount.path)
    assert set(os.listdir(d)) == session.names
