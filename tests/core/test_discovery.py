"""Discovery: recent sessions, listings, id resolution, breadcrumbs, continue_recent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.session_helpers import assistant, user

import core
from core import MemorySessionStorage, SessionManager, paths


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


def make_session(
    directory: Path,
    *,
    mtime: float,
    title: str | None = None,
    prompt: str | None = "hello",
    extra: list[dict[str, Any]] | None = None,
) -> SessionManager:
    m = SessionManager.create("/work/demo", directory)
    if title is not None:
        m.set_session_name(title, "user")
    if prompt is not None:
        m.append_message(user(prompt))
    m.append_message(assistant("answer"))
    for body in extra or []:
        m.append_entry(body)
    m.close()
    assert m.session_file is not None
    os.utime(m.session_file, (mtime, mtime))
    return m


def test_recent_sessions_newest_first_with_names(agent: Path) -> None:
    directory = paths.session_dir_for_cwd("/work/demo", agent)
    titled = make_session(directory, mtime=1000, title="My title")
    prompted = make_session(directory, mtime=3000, prompt="  first line\x1b[31m red\nsecond line")
    long = make_session(directory, mtime=2000, prompt="p" * 100)
    nameless = make_session(directory, mtime=500, prompt=None)
    (directory / "notes.txt").write_text("ignored")
    (directory / "zzz-broken.jsonl").write_text("garbage\n")
    os.utime(directory / "zzz-broken.jsonl", (9999, 9999))
    recent = core.get_recent_sessions(directory)
    assert [r.path for r in recent] == [
        prompted.session_file,
        long.session_file,
        titled.session_file,
    ]
    assert recent[0].name == "first line [31m red"
    assert recent[1].display_name == "p" * 39 + "…" and len(recent[1].display_name) == 40
    assert recent[2].name == "My title"
    everything = core.get_recent_sessions(directory, limit=10)
    assert everything[-1].name == nameless.get_session_id()
    assert [r.mtime for r in everything] == sorted((r.mtime for r in everything), reverse=True)


def test_recent_sessions_read_only_the_first_4k(agent: Path) -> None:
    directory = paths.session_dir_for_cwd("/w", agent)
    m = SessionManager.create("/w", directory)
    m.append_custom_entry("padding", "x" * 5000)
    m.append_message(user("too late to be seen"))
    m.ensure_on_disk()
    m.close()
    [record] = core.get_recent_sessions(directory)
    assert record.name == m.get_session_id()


def test_find_most_recent_session(agent: Path, tmp_path: Path) -> None:
    directory = paths.session_dir_for_cwd("/work/demo", agent)
    assert core.find_most_recent_session(directory) is None  # missing dir
    older = make_session(directory, mtime=1000)
    newer = make_session(directory, mtime=2000)
    (directory / "newest-but-invalid.jsonl").write_text('{"type":"message"}\n')
    (directory / "other.json").write_text("{}")
    os.utime(directory / "newest-but-invalid.jsonl", (5000, 5000))
    os.utime(directory / "other.json", (6000, 6000))
    assert core.find_most_recent_session(directory) == newer.session_file
    assert older.session_file != newer.session_file
    assert core.find_most_recent_session(tmp_path / "nothing") is None


def test_list_sessions_and_list_all(agent: Path) -> None:
    demo = paths.session_dir_for_cwd("/work/demo", agent)
    a = make_session(demo, mtime=1000, title="Alpha", prompt="question one")
    b = make_session(
        demo,
        mtime=3000,
        prompt=None,
        extra=[
            {
                "type": "compaction",
                "summary": "s",
                "shortSummary": "older short",
                "tokensBefore": 1,
            },
            {
                "type": "compaction",
                "summary": "s",
                "shortSummary": "latest short",
                "tokensBefore": 1,
            },
        ],
    )
    other_project = agent / "sessions" / "-home-relative"
    c = make_session(other_project, mtime=2000, prompt="elsewhere")
    (demo / "junk.jsonl").write_bytes(b"\xff\xfe")
    os.symlink(demo / "missing-target", demo / "dangling.jsonl")

    infos = core.list_sessions("/work/demo", agent_dir=agent)
    assert [i.path for i in infos] == [b.session_file, a.session_file]
    alpha = infos[1]
    assert (alpha.id, alpha.cwd, alpha.title) == (a.get_session_id(), "/work/demo", "Alpha")
    assert alpha.first_message == "question one"
    assert alpha.message_count == 2
    assert "question one" in alpha.all_messages_text and "answer" in alpha.all_messages_text
    assert alpha.created.tzinfo is not None and alpha.modified.timestamp() == 1000
    assert infos[0].title == "latest short"
    assert infos[0].first_message == "(no messages)"
    assert core.list_sessions("/ignored", demo) == infos

    everything = core.list_all(agent)
    assert [i.path for i in everything] == [b.session_file, c.session_file, a.session_file]
    assert core.list_all(agent / "missing") == []


def test_resolve_session_by_id_file_name_and_id_part(agent: Path) -> None:
    demo = paths.session_dir_for_cwd("/work/demo", agent)
    local = make_session(demo, mtime=1000)
    remote = make_session(agent / "sessions" / "--elsewhere--", mtime=2000)
    assert local.session_file is not None and remote.session_file is not None
    local_id = local.get_session_id()
    remote_name = os.path.basename(remote.session_file)

    def resolve(arg: str) -> str | None:
        return core.resolve_session(arg, "/work/demo", agent_dir=agent)

    assert resolve(local_id[:13].upper()) == local.session_file
    assert resolve(remote.get_session_id()) == remote.session_file
    assert resolve(remote_name[:16]) in (local.session_file, remote.session_file)
    assert resolve(remote_name.rsplit("_", 1)[1][:20]) == remote.session_file
    assert resolve("no-such-session") is None
    assert resolve("") is None
    # the local dir wins over a newer match elsewhere
    assert resolve(os.path.basename(local.session_file)[:4]) == local.session_file


def test_breadcrumbs_round_trip(agent: Path, tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_text("x")
    assert core.write_terminal_breadcrumb("/work/a", str(target), agent, terminal="pts-3")
    crumb = agent / "terminal-sessions" / "pts-3"
    assert crumb.read_text() == f"/work/a\n{target}\n"
    assert core.read_terminal_breadcrumb("/work/a", agent, terminal="pts-3") == str(target)
    assert core.read_terminal_breadcrumb("/work/b", agent, terminal="pts-3") is None
    assert core.read_terminal_breadcrumb("/work/a", agent, terminal="pts-4") is None
    target.unlink()
    assert core.read_terminal_breadcrumb("/work/a", agent, terminal="pts-3") is None


def test_breadcrumb_write_is_best_effort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "terminal_id", lambda *a, **k: None)
    assert not core.write_terminal_breadcrumb("/w", "/f", tmp_path)
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    assert not core.write_terminal_breadcrumb("/w", "/f", blocker, terminal="t")


def test_continue_recent_prefers_breadcrumb_then_newest_then_new(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paths, "terminal_id", lambda *a, **k: "test-term")
    directory = paths.session_dir_for_cwd("/work/demo", agent)
    fresh = SessionManager.continue_recent("/work/demo", directory)
    assert fresh.entry_count() == 0 and fresh.session_file is not None
    assert not os.path.exists(fresh.session_file)  # deferred until an assistant message
    crumb = agent / "terminal-sessions" / "test-term"
    assert crumb.read_text().splitlines() == ["/work/demo", fresh.session_file]

    older = make_session(directory, mtime=1000)
    newer = make_session(directory, mtime=2000)
    # the breadcrumb (now pointing at `newer`, written by its create) is overridden:
    core.write_terminal_breadcrumb("/work/demo", str(older.session_file), agent)
    assert (
        SessionManager.continue_recent("/work/demo", directory).session_file == older.session_file
    )
    assert crumb.read_text().splitlines()[1] == older.session_file
    # a breadcrumb for another cwd does not count: newest file wins
    core.write_terminal_breadcrumb("/somewhere/else", str(older.session_file), agent)
    resumed = SessionManager.continue_recent("/work/demo", directory)
    assert resumed.session_file == newer.session_file
    assert resumed.get_leaf_id() == newer.get_leaf_id()


def test_discovery_works_on_memory_storage() -> None:
    storage = MemorySessionStorage()
    m = SessionManager.create("/w", "/agent/sessions/--w--", storage)
    m.append_message(user("in memory"))
    m.append_message(assistant("yes"))
    assert core.find_most_recent_session("/agent/sessions/--w--", storage=storage) == m.session_file
    [info] = core.list_all("/agent", storage=storage)
    assert info.first_message == "in memory"
    [recent] = core.get_recent_sessions("/agent/sessions/--w--", storage=storage)
    assert recent.name == "in memory"
