"""Acceptance: a rendering read right after another process appended to its session
file is one whole document -- never the new rendering cut at the size the kernel had
cached for the file (the attribute timeout) -- for every agent and every rendering
whose size changes as a session grows.

Each round: ``stat`` the file (the kernel now holds its size), another process appends
an entry to the session file, then a real ``cat``, started after the append and after
the daemon's freshness interval, must return the whole rendering that shows it. And a
reader that opened the rendering before the append keeps reading its own version whole
while the new one is read beside it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support import claude_code as cc
from support.agent_messages import user_entry
from support.mount import Mount, MountFactory
from support.other_agents import CODEX_PROJECT, START, AgentTrees, home_env, load_demo_agents
from support.pi_sessions import branched_session

from sessionfs.view.loaded_session import FRESH_INTERVAL, LoadedSession, open_browse
from sessionfs.view.session_ref import SessionRef

pytestmark = pytest.mark.fuse

#: The renderings in a session dir whose size changes as the session grows.
GROWING = ("context.json", "stats.json", "tree.txt", "transcript.md", "transcript.html")
#: Rounds per file: cheap, and every one of them must come back whole.
ROUNDS = 4


def cat(path: Path) -> bytes:
    return subprocess.run(["cat", str(path)], capture_output=True, check=True, timeout=30).stdout


def whole_and_new(name: str, data: bytes, entry_id: str, text: str) -> bool:
    """Whether ``data`` is a complete rendering ``name`` that shows the entry appended
    last (``entry_id``, whose message is ``text``)."""
    if name.endswith(".json"):
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            return False
        if name == "stats.json":
            return bool(document.get("leafId") == entry_id)
        return text.encode() in data
    if name == "transcript.html":
        return data.rstrip().endswith(b"</html>") and text.encode() in data
    if name == "tree.txt":
        return data.endswith(b"\n") and entry_id.encode() in data
    return data.endswith(b"\n") and text.encode() in data  # transcript.md


def assert_whole_after_appends(
    session: Path,
    transcript: Path,
    names: tuple[str, ...],
    append: Callable[[int], tuple[str, str]],
    expected: Callable[[str], bytes] | None = None,
) -> None:
    """Every round for the renderings ``names`` in the session dir ``session`` and its
    ``transcripts/`` file: each read whole and new (and, with ``expected``, exactly the
    engine's rendering)."""
    files = [(name, session / name) for name in names] + [("transcript.md", transcript)]
    failures = []
    number = 0
    for _round in range(ROUNDS):
        for name, path in files:
            os.stat(path)  # the kernel caches the size of the rendering as it is now
            entry_id, text = append(number)
            number += 1
            time.sleep(FRESH_INTERVAL + 0.05)  # any open from now on renders the append
            data = cat(path)
            want = expected(name) if expected is not None else None
            if not whole_and_new(name, data, entry_id, text) or want not in (None, data):
                failures.append(f"{path}: {len(data)} bytes, ending {data[-60:]!r}")
    assert not failures, "\n".join(failures)


def rendering_of(file: Path, what: str) -> bytes:
    """What an xcsh session file renders as ``what``, made by the engine from the
    file as it is now."""
    st = os.stat(file)
    ref = SessionRef(file.parent.name, file.stem, file, {}, st.st_mtime_ns, st.st_size)
    return LoadedSession.parsed(ref, open_browse(file)).rendered(what)


def test_xcsh_renderings_read_right_after_an_append_are_whole(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent = tmp_path / "agent"
    file, ids = branched_session(agent, tmp_path / "work")
    mount = mount_factory(agent)
    session = mount.path / "sessions" / file.parent.name / file.stem
    transcript = mount.path / "transcripts" / file.parent.name / f"{file.stem}.md"
    parent = [ids["u3"]]

    def append(number: int) -> tuple[str, str]:
        entry_id, text = f"fe{number:06d}", f"appended-{number} " + "z" * (40 * number)
        with open(file, "ab") as out:  # this process, not the daemon: another writer
            out.write(orjson.dumps(user_entry(entry_id, parent[0], text)) + b"\n")
        parent[0] = entry_id
        return entry_id, text

    assert_whole_after_appends(
        session, transcript, GROWING, append, lambda what: rendering_of(file, what)
    )


def claude_mount(tmp_path: Path, mount_factory: MountFactory) -> tuple[Mount, Path, Path]:
    """A mount whose only sessions are one Claude Code session (``--claude-dir``):
    the mount, the session file, and its dir under ``agents/claude/sessions``."""
    claude = tmp_path / "claude"
    file = claude / "projects" / "-home-me-app" / f"{cc.SESSION_ID}.jsonl"
    cc.write_jsonl(file, [cc.user("u0", None, "hello", 0)])
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "agent" / "sessions").mkdir(parents=True)
    mount = mount_factory(tmp_path / "agent", "--claude-dir", str(claude), env=home_env(home))
    sessions = mount.path / "agents" / "claude" / "sessions"
    (project,) = os.listdir(sessions)
    (stem,) = os.listdir(sessions / project)
    return mount, file, sessions / project / stem


def test_claude_code_renderings_read_right_after_an_append_are_whole(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, file, session = claude_mount(tmp_path, mount_factory)
    project, stem = session.parent.name, session.name
    transcript = mount.path / "agents" / "claude" / "transcripts" / project / f"{stem}.md"
    parent = ["u0"]

    def append(number: int) -> tuple[str, str]:
        uuid, text = f"a{number:06d}", f"answered-{number} " + "y" * (40 * number)
        line = cc.assistant(uuid, parent[0], f"msg_{number}", cc.text(text), number + 1)
        with open(file, "ab") as out:  # as Claude Code does: one line at a time
            out.write(orjson.dumps(line) + b"\n")
        parent[0] = uuid
        return uuid, text

    assert_whole_after_appends(session, transcript, GROWING, append)


def test_codex_renderings_read_right_after_an_append_are_whole(
    agent_trees: AgentTrees, agents_mount: Mount
) -> None:
    rollout = agent_trees.codex_rollout
    stem = rollout.name.removesuffix(".jsonl")
    agent = agents_mount.path / "agents" / "codex"
    session = agent / "sessions" / CODEX_PROJECT / stem
    transcript = agent / "transcripts" / CODEX_PROJECT / f"{stem}.md"
    demo = load_demo_agents()

    def append(number: int) -> tuple[str, str]:
        text = f"codex-said-{number} " + "c" * (40 * number)
        lines = demo.CodexLines(START + 1000 + number)
        lines.message("assistant", text)
        with open(rollout, "ab") as out:  # as Codex does: the message's lines at once
            out.write(b"".join(orjson.dumps(line) + b"\n" for line in lines.lines))
        return "", text  # its entries' ids are the mount's own: checked by their text

    shown_by_text = ("context.json", "transcript.md", "transcript.html")
    assert_whole_after_appends(session, transcript, shown_by_text, append)


def test_a_reader_still_reading_keeps_its_version_while_a_new_one_is_read(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """Two opens of one rendering, before and after an append, read side by side (a
    pager kept open while ``cat`` runs): each reads its own version whole, never pages
    the other one's read brought into the kernel's cache."""
    agent = tmp_path / "agent"
    file, ids = branched_session(agent, tmp_path / "work")
    with open(file, "ab") as out:  # big enough that a first read leaves most of it unread
        out.write(orjson.dumps(user_entry("big00000", ids["u3"], "w" * 3_000_000)) + b"\n")
    mount = mount_factory(agent)
    page = mount.path / "sessions" / file.parent.name / file.stem / "transcript.html"
    old = rendering_of(file, "transcript.html")
    with open(page, "rb", buffering=0) as pager:
        start = pager.read(4096)
        with open(file, "ab") as out:
            out.write(orjson.dumps(user_entry("new00000", "big00000", "the new turn")) + b"\n")
        time.sleep(FRESH_INTERVAL + 0.05)
        new = cat(page)
        rest = b"".join(iter(lambda: pager.read(65536), b""))
    assert new == rendering_of(file, "transcript.html") and b"the new turn" in new
    assert start + rest == old
