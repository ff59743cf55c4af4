"""Another agent's store locked under a real mount: the first scan of
``agents/<agent>/`` runs in a worker thread, so every other request of the mount is
answered while it waits on the locks; the search pass's trouble says when it happened
and is over once a pass gets through; a locked database is left out of the search pass
(its rows kept), not the others."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.mount import Mount, MountFactory, run
from support.newer_agent_files import add_opencode_text_part, write_opencode_db
from support.other_agents import home_env
from support.write_setup import read_ctl

from core.paths import encode_cwd

pytestmark = pytest.mark.fuse

#: locked databases a scan meets: each costs it the reader's 2 s busy timeout
LOCKED_DATABASES = 8


def _env(home: Path) -> dict[str, str]:
    """``home`` as HOME, opencode's dir found there (``~/.local/share/opencode``)."""
    env = home_env(home)
    env.pop("XDG_DATA_HOME", None)
    return env


def _opencode_root(home: Path) -> Path:
    return home / ".local" / "share" / "opencode"


@contextmanager
def _locked(databases: list[Path]) -> Iterator[None]:
    """Each database held with an exclusive lock (no reader gets in) until the end."""
    lockers = []
    try:
        for db in databases:
            locker = sqlite3.connect(db)
            lockers.append(locker)
            locker.execute("PRAGMA locking_mode = EXCLUSIVE")
            locker.execute("UPDATE session SET time_updated = time_updated + 1")
            locker.commit()
            locker.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        for locker in lockers:
            locker.rollback()
            locker.close()


def _until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def _a_local_session_file(agent_dir: Path) -> str:
    """``sessions/<project>/<stem>/header.json`` of one of the agent dir's sessions."""
    session = min((agent_dir / "sessions").glob("*/*.jsonl"))
    return f"sessions/{session.parent.name}/{session.stem}/header.json"


def test_a_locked_agent_store_holds_up_no_other_request(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    home = tmp_path / "home"
    databases = []
    for n in range(LOCKED_DATABASES):
        db = _opencode_root(home) / ("opencode.db" if n == 0 else f"opencode-ch{n}.db")
        write_opencode_db(db, session_id=f"ses_{n}", directory="/home/me/app").close()
        databases.append(db)
    project = f"agents/opencode/sessions/{encode_cwd('/home/me/app')}"
    local = _a_local_session_file(demo_agent)
    with _locked(databases):
        mount = mount_factory(demo_agent, "--agents", "opencode", env=_env(home))
        # The agent's first scan meets every lock, a busy timeout each: a lookup under
        # agents/opencode/ waits for it...
        lookup = subprocess.Popen(
            ["ls", project], cwd=mount.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        time.sleep(0.5)  # (the lookup reaches the daemon first)
        # ...and the rest of the mount answers meanwhile, the lookup still waiting.
        assert '"id"' in run("cat", local, cwd=mount.path)
        assert run("ls", "sessions", cwd=mount.path).split()
        assert lookup.poll() is None, "the lookup came back before the scan could end"
    lookup.communicate(timeout=120)
    # Once the locks are gone, the sessions of every database are listed.
    want = [f"ses_{n}" for n in range(LOCKED_DATABASES)]
    _until(lambda: run("ls", project, cwd=mount.path, check=False).split() == want, "listed")
    assert mount.alive()


def _search_error(mount_path: Path) -> str:
    return read_ctl(mount_path)["search_opencode_last_error"]


def _found(mount_path: Path, words: str, within: str) -> bool:
    return within in run("cat", mount_path / "search" / words, check=False)


APP_SESSION = f"agents/opencode/sessions/{encode_cwd('/home/me/app')}/ses_a/"


def _indexed_mount(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> tuple[Mount, Path]:
    """The agent dir mounted with an ``opencode.db`` (`write_opencode_db`) under a
    HOME in ``tmp_path``, once its ``ses_a`` is in ``search/``; the database."""
    home = tmp_path / "home"
    db = _opencode_root(home) / "opencode.db"
    write_opencode_db(db).close()
    mount = mount_factory(demo_agent, "--agents", "opencode", env=_env(home))
    _until(lambda: _found(mount.path, "count files", APP_SESSION), "indexed")
    return mount, db


def test_a_search_error_says_when_and_is_over_once_a_pass_gets_through(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount, db = _indexed_mount(tmp_path, demo_agent, mount_factory)
    assert _search_error(mount.path) == ""
    with _locked([db]):
        _until(lambda: "locked" in _search_error(mount.path), "the pass's error")
        error = _search_error(mount.path)
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: ", error), error
    # The lock is gone: the next pass gets through, and ctl no longer reports it.
    _until(lambda: _search_error(mount.path) == "", "the error cleared")
    assert _found(mount.path, "count files", APP_SESSION)
    assert mount.alive()


def test_one_locked_database_leaves_the_others_searched(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    mount, locked = _indexed_mount(tmp_path, demo_agent, mount_factory)
    other = write_opencode_db(locked.with_name("opencode-beta.db"), "ses_b", "/home/me/web")
    web = f"agents/opencode/sessions/{encode_cwd('/home/me/web')}/ses_b/"
    with _locked([locked]):
        # A new turn in the other database is found while this one stays locked...
        add_opencode_text_part(other, "ses_b", "prt_09", "the zanzibar plan", 9000)
        _until(lambda: _found(mount.path, "zanzibar", web), "the other database searched")
        # ...and ctl says which database the pass left out, and why.
        _until(lambda: "opencode.db: " in _search_error(mount.path), "the skip named")
        error = _search_error(mount.path)
        assert "locked" in error and "opencode-beta.db" not in error, error
    other.close()
    # Tried again once the lock is gone: its sessions are all still found, none lost.
    _until(lambda: _search_error(mount.path) == "", "the skip over")
    assert _found(mount.path, "count files", APP_SESSION) and _found(mount.path, "zanzibar", web)
    assert mount.alive()
