"""Spec section 13, the layout half: the newer agents' project dir names, agent dir
resolution (PI_CODING_AGENT_DIR, PI_CONFIG_DIR, XDG), the global blob store, and where
new sessions go. Every test passes its own HOME / TMPDIR / XDG_* in `env`; the real
$HOME is never read or written."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.agent_messages import assistant, user
from support.session_helpers import session_with_one_exchange

from core import SessionManager, list_sessions, paths
from core.session_files import default_blob_store
from core.storage import FileSessionStorage


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def env(tmp_path: Path, home: Path) -> dict[str, str]:
    temp = tmp_path / "tmproot"
    temp.mkdir()
    return {"HOME": str(home), "TMPDIR": str(temp) + "/"}


# --------------------------------------------------------------------------- dir names


def test_home_relative_names(home: Path, env: dict[str, str]) -> None:
    (home / "proj" / "sub").mkdir(parents=True)
    assert paths.encode_cwd_newer(str(home), env) == "-"
    assert paths.encode_cwd_newer(str(home / "proj"), env) == "-proj"
    assert paths.encode_cwd_newer(str(home / "proj" / "sub"), env) == "-proj-sub"
    assert paths.encode_cwd_newer(str(home / "a:b"), env) == "-a-b"


def test_temp_relative_names(env: dict[str, str]) -> None:
    temp = Path(env["TMPDIR"])
    assert paths.encode_cwd_newer(str(temp), env) == "-tmp"
    assert paths.encode_cwd_newer(str(temp / "x" / "y"), env) == "-tmp-x-y"


def test_outside_home_and_temp_has_no_newer_name(env: dict[str, str]) -> None:
    assert paths.encode_cwd_newer("/work/pi", env) is None
    assert paths.project_dir_names("/work/pi", env) == ["--work-pi--"]


def test_symlinks_are_resolved_like_the_agents(home: Path, env: dict[str, str]) -> None:
    real = home / "real"
    real.mkdir()
    link = Path(env["TMPDIR"]) / "link"
    link.symlink_to(real)
    assert paths.encode_cwd_newer(str(link), env) == "-real"
    # Old agents named the dir after the cwd as given: that name is looked under too.
    assert paths.project_dir_names(str(link), env) == [
        "-real",
        paths.encode_cwd(str(real)),
        paths.encode_cwd(str(link)),
    ]


def test_dir_name_kinds() -> None:
    assert paths.is_legacy_dir_name("--work-pi--")
    assert paths.is_newer_dir_name("-") and paths.is_newer_dir_name("-tmp-x")
    assert not paths.is_newer_dir_name("--work-pi--")
    assert not paths.is_legacy_dir_name("-proj")


# --------------------------------------------------------------------------- agent dir


def test_default_agent_dir_rules(home: Path) -> None:
    assert paths.default_agent_dir({"HOME": str(home)}) == home / ".xcsh" / "agent"
    assert paths.default_agent_dir({"HOME": str(home), "PI_CONFIG_DIR": ".omp"}) == (
        home / ".omp" / "agent"
    )
    explicit = {"HOME": str(home), "PI_CONFIG_DIR": ".omp", "PI_CODING_AGENT_DIR": "/srv/a"}
    assert paths.default_agent_dir(explicit) == Path("/srv/a")


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="XDG is Linux/macOS")
def test_xdg_split_for_the_default_agent_dir(tmp_path: Path, home: Path) -> None:
    data, state = tmp_path / "data", tmp_path / "state"
    (data / "xcsh").mkdir(parents=True)
    (state / "xcsh").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_DATA_HOME": str(data), "XDG_STATE_HOME": str(state)}
    layout = paths.agent_layout(None, env)
    assert layout.agent_dir == home / ".xcsh" / "agent"
    assert layout.sessions == data / "xcsh" / "sessions"
    assert layout.blobs == data / "xcsh" / "blobs"
    assert layout.history_db == data / "xcsh" / "history.db"
    assert layout.terminal_sessions == state / "xcsh" / "terminal-sessions"
    # Naming the default dir explicitly is the same dir: same split.
    assert paths.agent_layout(home / ".xcsh" / "agent", env) == layout
    # A profile (any other agent dir) keeps everything inside itself.
    other = paths.agent_layout(tmp_path / "profile", env)
    assert other.sessions == tmp_path / "profile" / "sessions"
    assert other.terminal_sessions == tmp_path / "profile" / "terminal-sessions"


def test_xdg_missing_or_unreadable_falls_back_to_the_agent_dir(tmp_path: Path, home: Path) -> None:
    agent = home / ".xcsh" / "agent"
    missing = {"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "nowhere")}
    assert paths.agent_layout(None, missing).sessions == agent / "sessions"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    broken = {"HOME": str(home), "XDG_DATA_HOME": str(not_a_dir), "XDG_STATE_HOME": ""}
    assert paths.agent_layout(None, broken) == paths.agent_layout(agent, {"HOME": str(home)})
    locked = tmp_path / "locked"
    (locked / "xcsh").mkdir(parents=True)
    locked.chmod(0)
    try:
        if os.access(locked, os.X_OK):
            pytest.skip("root ignores directory permissions")
        unreadable = {"HOME": str(home), "XDG_DATA_HOME": str(locked)}
        assert paths.agent_layout(None, unreadable).blobs == agent / "blobs"
    finally:
        locked.chmod(0o700)


def test_xdg_data_without_state(tmp_path: Path, home: Path) -> None:
    (tmp_path / "data" / "xcsh").mkdir(parents=True)
    env = {"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data")}
    layout = paths.agent_layout(None, env)
    if sys.platform.startswith(("linux", "darwin")):
        assert layout.sessions == tmp_path / "data" / "xcsh" / "sessions"
    assert layout.terminal_sessions == home / ".xcsh" / "agent" / "terminal-sessions"


# --------------------------------------------------------------------------- session files


def test_sessions_root_of_main_and_sub_agent_files(tmp_path: Path) -> None:
    root = tmp_path / "agent" / "sessions"
    main = root / "-proj" / "2026_abc.jsonl"
    assert paths.sessions_root_of_file(main) == root
    assert paths.sessions_root_of_file(root / "-proj" / "2026_abc" / "0-Task.jsonl") == root
    nested = root / "-proj" / "2026_abc" / "0-Task" / "1-Sub.jsonl"
    assert paths.sessions_root_of_file(nested) == root
    assert paths.agent_dir_for_session_file(nested) == tmp_path / "agent"
    assert paths.sessions_root_of_file(tmp_path / "loose.jsonl") is None


def test_blob_store_is_the_agents_global_one_for_sub_agent_files(tmp_path: Path) -> None:
    sub = tmp_path / "agent" / "sessions" / "-proj" / "stem" / "0-Task.jsonl"
    store = default_blob_store(str(sub), FileSessionStorage())
    assert store is not None and store.directory == tmp_path / "agent" / "blobs"


def test_blob_store_outside_an_agent_dir_is_the_default_agents(tmp_path: Path, home: Path) -> None:
    env = {"HOME": str(home)}
    assert paths.blobs_dir_for_session_file(tmp_path / "x.jsonl", env) == (
        home / ".xcsh" / "agent" / "blobs"
    )


def test_sub_agent_image_resolves_from_the_global_store(tmp_path: Path) -> None:
    import base64

    picture = bytes(range(256)) * 8
    block = {"type": "image", "data": base64.b64encode(picture).decode(), "mimeType": "image/png"}
    task_file = tmp_path / "agent" / "sessions" / "-proj" / "stem" / "0-Task.jsonl"
    task_file.parent.mkdir(parents=True)
    with SessionManager.open(task_file) as manager:
        message = user("see")
        message["content"].append(block)
        manager.append_message(message)
        manager.append_message(assistant("seen"))
    assert b"blob:sha256:" in task_file.read_bytes()
    assert len(list((tmp_path / "agent" / "blobs").iterdir())) == 1
    assert not (task_file.parent / "blobs").exists()
    reread = SessionManager.open(task_file, browse=True)
    assert reread.get_entries()[0]["message"]["content"][1]["data"] == block["data"]


# --------------------------------------------------------------------------- creating / finding


def test_create_uses_the_dir_where_the_cwds_sessions_are(
    tmp_path: Path, home: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent"
    cwd = home / "proj"
    cwd.mkdir()
    root = agent / "sessions"
    legacy = root / paths.encode_cwd(str(cwd))
    # Nothing there and no newer names in use: the seed's form.
    assert paths.session_dir_for_cwd(str(cwd), agent, env) == legacy
    # Another project already uses a newer name: the newer name.
    (root / "-other").mkdir(parents=True)
    assert paths.session_dir_for_cwd(str(cwd), agent, env) == root / "-proj"
    # The cwd's sessions are already under the old name: stay there.
    legacy.mkdir()
    assert paths.session_dir_for_cwd(str(cwd), agent, env) == legacy
    # Both names exist (bad input): the newer name, where the agents merge to.
    (root / "-proj").mkdir()
    assert paths.session_dir_for_cwd(str(cwd), agent, env) == root / "-proj"


def test_list_sessions_and_continue_recent_look_under_both_names(
    tmp_path: Path, home: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    cwd = home / "proj"
    cwd.mkdir()
    old = session_with_one_exchange(
        agent / "sessions" / paths.encode_cwd(str(cwd)), "old name", cwd="/unused"
    )
    new = session_with_one_exchange(agent / "sessions" / "-proj", "new name", cwd="/unused")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    found = list_sessions(str(cwd), agent_dir=agent)
    assert [s.path for s in found] == [str(new), str(old)]
    with SessionManager.continue_recent(str(cwd)) as resumed:
        assert resumed.get_session_file() == str(new)
    os.utime(new, (900_000_000, 900_000_000))
    with SessionManager.continue_recent(str(cwd)) as resumed:
        assert resumed.get_session_file() == str(old)
