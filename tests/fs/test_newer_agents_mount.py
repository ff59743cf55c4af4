"""``agents/copilot`` and ``agents/cursor`` through a real mount: a session the real
GitHub Copilot CLI wrote offline (its ``context.json`` compared with what Copilot sent
the model next, its transcript, search, a junk line, writes refused), and Cursor chats
from fixtures in the documented format (a ``store.db`` and an agent transcript) beside
a corrupt store that takes nothing else down."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fake_model_server import FakeModelServer, ModelRequest, ToolCall
from support.mount import Mount, MountFactory, run
from support.newer_agent_files import (
    CURSOR_MESSAGES,
    add_opencode_session,
    add_opencode_text_part,
    chat_view,
    set_cursor_messages,
    write_cursor_store,
    write_cursor_transcript,
    write_opencode_db,
)
from support.real_agents import (
    CopilotAgent,
    OpencodeAgent,
)
from support.write_setup import read_ctl

from core.paths import encode_cwd

pytestmark = pytest.mark.fuse

TIMEOUT_S = 120


def _env(home: Path) -> dict[str, str]:
    drop = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "XDG_DATA_HOME")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "HOME": str(home)}


def _script(request: ModelRequest) -> object:
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "user" and "which files" in str(last.get("content")):
        return ToolCall("bash", {"command": "echo needle-in-output", "description": "ls"})
    return f"answer after {len(request.messages)} messages"


def _wait_for_search(mount: Mount, words: str, expect: str) -> list[str]:
    deadline = time.monotonic() + 30
    while True:
        hits = run("cat", mount.path / "search" / words).splitlines()
        if any(expect in hit for hit in hits) or time.monotonic() > deadline:
            return hits
        time.sleep(0.3)


def test_a_real_copilot_session_through_the_mount(
    tmp_path: Path,
    fake_model: FakeModelServer,
    demo_agent: Path,
    mount_factory: MountFactory,
    copilot_install: Path,
) -> None:
    copilot = CopilotAgent.at_home(tmp_path / "home", fake_model.url, "fake-model", copilot_install)
    fake_model.set_default_reply(_script)
    work = tmp_path / "home" / "work"
    copilot.run("which files are here", cwd=work, timeout=TIMEOUT_S).check()
    (events,) = copilot.sessions()
    session_id = events.parent.name

    mount = mount_factory(demo_agent, "--agents", "copilot", env=_env(tmp_path / "home"))
    assert run("ls", mount.path / "agents").split() == ["copilot"]
    project = encode_cwd(str(work))
    sessions = mount.path / "agents" / "copilot" / "sessions"
    assert run("ls", sessions).split() == [project]
    assert run("ls", sessions / project).split() == [session_id]
    session = sessions / project / session_id
    context = json.loads(run("cat", session / "context.json"))

    # What the mount shows is what Copilot sends when the session goes on.
    copilot.run("and now?", cwd=work, options=["--continue"], timeout=TIMEOUT_S).check()
    sent = [r for r in fake_model.requests if r.body.get("tools")][-1].messages
    assert chat_view(context["messages"]) == chat_view(sent[:-1])
    grown = json.loads(run("cat", session / "context.json"))["messages"]
    assert chat_view(grown[: len(sent)]) == chat_view(sent)

    transcript = run("cat", session / "transcript.md")
    assert "which files are here" in transcript and "needle-in-output" in transcript
    assert run("cat", session / "title").strip() == "which files are here"
    header = json.loads(run("cat", session / "header.json"))
    assert header["agent"] == "copilot" and header["copilotVersion"] == "1.0.102"
    assert run("ls", mount.path / "agents" / "copilot" / "by-id").split() == [session_id]
    transcripts = run("ls", mount.path / "agents" / "copilot" / "transcripts" / project)
    assert session_id in transcripts
    hits = _wait_for_search(mount, "needle-in-output", "agents/copilot/sessions/")
    assert any(f"agents/copilot/sessions/{project}/{session_id}/entries/" in h for h in hits)

    # Read-only: a write is refused and the file is untouched.
    before = events.read_bytes()
    done = subprocess.run(["touch", str(session / "new")], capture_output=True, text=True)
    assert done.returncode != 0 and "Read-only file system" in done.stderr
    assert events.read_bytes() == before

    # A junk line (the agent's file is untrusted) is counted, the rest still shows.
    with events.open("a") as f:
        f.write("{not json\n")
    deadline = time.monotonic() + 10
    while json.loads(run("cat", session / "stats.json")).get("malformedLines") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert "needle-in-output" in run("cat", session / "transcript.md")
    assert mount.alive()


def test_cursor_chats_and_a_corrupt_store(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    home = tmp_path / "home"
    chats = home / ".cursor" / "chats"
    chat = chats / hashlib.md5(b"/home/me/app").hexdigest() / "chat-1"
    writer = write_cursor_store(chat, CURSOR_MESSAGES, name="Count lines", cwd="/home/me/app")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # the CLI's next turn stays in the WAL
    bad = chats / hashlib.md5(b"/home/me/app").hexdigest() / "chat-bad" / "store.db"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"SQLite format 3\x00" + b"\xee" * 8192)
    (bad.parent / "meta.json").write_text(json.dumps({"cwd": "/home/me/app"}))
    write_cursor_transcript(
        home / ".cursor" / "projects" / "home-me-web" / "agent-transcripts" / "t-1.jsonl",
        [("user", "<user_query>find the haystack</user_query>"), ("assistant", "Found it.")],
    )
    mount = mount_factory(demo_agent, "--agents", "cursor", env=_env(home))
    sessions = mount.path / "agents" / "cursor" / "sessions"
    project = encode_cwd("/home/me/app")
    assert sorted(run("ls", sessions).split()) == sorted([project, "home-me-web"])
    assert sorted(run("ls", sessions / project).split()) == ["chat-1", "chat-bad"]
    context = json.loads(run("cat", sessions / project / "chat-1" / "context.json"))
    assert [m["role"] for m in context["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    transcript = run("cat", sessions / project / "chat-1" / "transcript.md")
    assert "wc -l notes.txt" in transcript and "It has 3 lines." in transcript
    assert run("cat", sessions / project / "chat-1" / "title").strip() == "Count lines"
    other = run("cat", sessions / "home-me-web" / "t-1" / "transcript.md")
    assert "find the haystack" in other

    # The chat goes on (a new root blob, in the WAL only): the mount shows the turn.
    store_before = (chat / "store.db").read_bytes()
    more = [{"role": "user", "content": "<user_query>and words?</user_query>"}]
    set_cursor_messages(writer, "chat-1", CURSOR_MESSAGES + more, name="Count lines")
    assert (chat / "store.db").read_bytes() == store_before
    _until(
        lambda: "and words?" in run("cat", sessions / project / "chat-1" / "transcript.md"),
        "the new turn",
    )
    writer.close()

    # The corrupt store: its files are absent (not EIO), the root ctl says why, and
    # nothing else is affected.
    done = subprocess.run(
        ["cat", str(sessions / project / "chat-bad" / "context.json")],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "Input/output error" not in done.stderr, done.stderr
    skip = read_ctl(mount.path)["agents_cursor_last_skip"]
    assert str(bad) in skip and "not a database" in skip, skip
    assert "It has 3 lines." in run("cat", sessions / project / "chat-1" / "transcript.md")
    hits = _wait_for_search(mount, "haystack", "agents/cursor/sessions/")
    assert any("agents/cursor/sessions/home-me-web/t-1/entries/000001-user" in h for h in hits)
    # The chat's store is searched too, its new turn included; a hit opens its entry.
    hits = _wait_for_search(mount, "words", f"agents/cursor/sessions/{project}/chat-1/")
    assert [h.split("\t")[1] for h in hits if "agents/cursor/" in h] == [
        f"agents/cursor/sessions/{project}/chat-1/entries/000006-user.json"
    ]
    # (the kernel may hold the chat's old entries/ listing for its cache timeout)
    opened = 'cat "$(grep agents/cursor/ search/words | cut -f2)"'
    _until(lambda: run("sh", "-c", opened, cwd=mount.path, check=False) != "", "the hit's entry")
    entry = run("sh", "-c", opened, cwd=mount.path)
    assert json.loads(entry)["content"] == "<user_query>and words?</user_query>"
    # The corrupt store is a skip the search's ctl line names.
    error = read_ctl(mount.path)["search_cursor_last_error"]
    assert "chat-bad" in error and "not a database" in error, error
    assert mount.alive()


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 15
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_opencode_sessions_in_search(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    """``search/`` finds opencode sessions (rows of ``opencode.db``), one added while
    the mount is up included; each hit's path opens its entry; ``sessionfs search``
    answers the same."""
    home = tmp_path / "home"
    writer = write_opencode_db(home / ".local" / "share" / "opencode" / "opencode.db")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # opencode's writes stay in the WAL
    mount = mount_factory(demo_agent, "--agents", "opencode", env=_env(home))
    sessions = "agents/opencode/sessions"
    app, web = encode_cwd("/home/me/app"), encode_cwd("/home/me/web")
    hits = _wait_for_search(mount, "count files", f"{sessions}/{app}/ses_a/")
    assert [h.split("\t")[1:3] for h in hits if "agents/opencode/" in h] == [
        [f"{sessions}/{app}/ses_a/entries/ses_a_prt_01.json", "user"]
    ]

    add_opencode_session(writer, "ses_b", "/home/me/web", "Later")
    add_opencode_text_part(writer, "ses_b", "prt_09", "the zanzibar plan", 9000)
    hits = _wait_for_search(mount, "zanzibar", f"{sessions}/{web}/ses_b/")
    assert [h.split("\t")[1] for h in hits] == [f"{sessions}/{web}/ses_b/entries/ses_b_prt_09.json"]
    opened = 'cat "$(cut -f2 search/zanzibar)"'
    _until(lambda: run("sh", "-c", opened, cwd=mount.path, check=False) != "", "the entry")
    entry = json.loads(run("sh", "-c", opened, cwd=mount.path))
    assert entry["data"]["text"] == "the zanzibar plan"
    assert read_ctl(mount.path)["search_opencode_last_error"] == ""
    writer.close()

    cli = subprocess.run(
        [
            *(sys.executable, "-m", "sessionfs", "search", "zanzibar", "--agents", "opencode"),
            *("--agent-dir", str(demo_agent), "--cache-dir", str(tmp_path / "cli-cache")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=_env(home),
    ).stdout
    assert cli == run("cat", mount.path / "search" / "zanzibar")
    assert mount.alive()


def test_a_real_opencode_database_through_the_mount(
    tmp_path: Path,
    fake_model: FakeModelServer,
    demo_agent: Path,
    mount_factory: MountFactory,
    opencode_install: Path,
) -> None:
    opencode = OpencodeAgent.at_home(
        tmp_path / "home", fake_model.url, "fake-model", opencode_install
    )
    fake_model.set_default_reply(_script)
    work = tmp_path / "home" / "work"
    opencode.run("which files are here", cwd=work, timeout=TIMEOUT_S).check()

    mount = mount_factory(demo_agent, "--agents", "opencode", env=_env(tmp_path / "home"))
    project = encode_cwd(str(work))
    sessions = mount.path / "agents" / "opencode" / "sessions"
    (session_id,) = run("ls", sessions / project).split()
    session = sessions / project / session_id
    context = json.loads(run("cat", session / "context.json"))
    assert "needle-in-output" in run("cat", session / "transcript.md")
    assert "needle-in-output" in run("cat", session / "transcript.html")
    transcripts = mount.path / "agents" / "opencode" / "transcripts"
    found = run("grep", "-rl", "needle-in-output", transcripts).split()
    assert found == [str(transcripts / project / f"{session_id}.md")]
    # Its tool output is searched; the hit opens the tool part that holds it.
    own = f"agents/opencode/sessions/{project}/{session_id}/entries/"
    hits = [h for h in _wait_for_search(mount, "needle-in-output", own) if own in h]
    assert [h.split("\t")[2] for h in hits] == ["toolCall"], hits
    assert "needle-in-output" in (mount.path / hits[0].split("\t")[1]).read_text()
    hits_before = hits

    # The agent goes on while the mount is up: its next request is what the mount
    # showed, and the mount shows the new turn (written to the WAL, not checkpointed).
    opencode.run("and now?", cwd=work, options=["--continue"], timeout=TIMEOUT_S).check()
    sent = [r for r in fake_model.requests if r.body.get("tools")][-1].messages
    assert chat_view(context["messages"]) == chat_view(sent[1:-1])
    _until(lambda: "and now?" in run("cat", session / "transcript.md"), "the new turn")
    grown = json.loads(run("cat", session / "context.json"))["messages"]
    assert chat_view(grown[: len(sent) - 1]) == chat_view(sent[1:])

    # A fork is a session of its own; writes are refused; the database is untouched.
    opencode.run(
        "forked", cwd=work, options=["--session", session_id, "--fork"], timeout=TIMEOUT_S
    ).check()
    _until(lambda: len(run("ls", sessions / project).split()) == 2, "the fork listed")
    title = run("cat", session / "title").strip()
    assert title and json.loads(run("cat", session / "header.json"))["version"] == "1.18.33"
    before = opencode.database().read_bytes()
    done = subprocess.run(["touch", str(session / "new")], capture_output=True, text=True)
    assert done.returncode != 0 and "Read-only file system" in done.stderr
    assert opencode.database().read_bytes() == before

    # Locked past the busy timeout: a session not read yet, and one read before whose
    # database changed since, both fail (not EIO) and ctl says why; both read again
    # once the lock is gone.
    fork_id = next(s for s in run("ls", sessions / project).split() if s != session_id)
    locker = sqlite3.connect(opencode.database())
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("UPDATE session SET time_updated = time_updated + 1")  # the WAL changes
    locker.commit()
    locker.execute("BEGIN EXCLUSIVE")  # and no reader gets in until it ends
    try:
        for name in (fork_id, session_id):
            time.sleep(1.5)  # past the kernel's attribute timeout for agents/ files
            done = subprocess.run(
                ["cat", str(sessions / project / name / "context.json")],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode != 0, (name, done.stdout[-200:])
            assert "Input/output error" not in done.stderr, done.stderr
            assert "locked" in read_ctl(mount.path)["agents_opencode_last_skip"]
        # The search indexer's pass meets the lock too: a skip ctl names, no rows lost.
        _until(
            lambda: "locked" in read_ctl(mount.path)["search_opencode_last_error"],
            "the search skip",
        )
    finally:
        locker.rollback()
        locker.close()
    assert "and now?" in run("cat", session / "transcript.md")
    assert "forked" in run("cat", sessions / project / fork_id / "transcript.md")
    hits = _wait_for_search(mount, "needle-in-output", own)
    assert [h.split("\t")[1] for h in hits if own in h] == [hits_before[0].split("\t")[1]]
    assert mount.alive()
