"""``agents/gemini/`` through a real mount with hostile files beside a good session: junk
and torn lines, a half-written older ``.json`` document, and a 200 MB chat file. Each
bad one says what is wrong (its ``header.json``, or ``EFBIG`` with the reason in the
root ``ctl``) and none of them costs the rest an ``EIO``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from support import gemini_cli as gc
from support.mount import COMMAND_TIMEOUT, MountFactory, run
from support.other_agents import home_env
from support.write_setup import read_ctl

pytestmark = pytest.mark.fuse

BIG_MB = 200
CACHE_MB = 32
BIG_TEXT = "a long tool output line, lorem ipsum dolor sit amet\n" * 400


def write_big_chat(path: Path) -> None:
    """A ``.jsonl`` chat of about `BIG_MB` MB (user/gemini turns of ~20 KB each)."""
    with open(path, "wb") as f:
        f.write(orjson.dumps(gc.header(0, session_id="big")) + b"\n")
        turn = 0
        while f.tell() < BIG_MB << 20:
            batch = [
                orjson.dumps(gc.user(f"u{turn + i}", f"{turn + i} {BIG_TEXT}", 1))
                for i in range(100)
            ]
            f.write(b"\n".join(batch) + b"\n")
            turn += len(batch)


def test_bad_gemini_files_are_named_and_cost_the_rest_nothing(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    chats = gc.gemini_home(tmp_path)
    good = [gc.header(0), gc.user("u1", "the good session", 1), gc.gemini("g1", "fine", 2)]
    gc.write_jsonl(chats / "session-good.jsonl", good)
    junk = [b"\x00\xff junk\n", b"[1, 2]\n", gc.user("u1", "after junk", 1), b'{"torn": ']
    gc.write_jsonl(chats / "session-junk.jsonl", junk)
    torn = gc.write_document(chats / "session-torn.json", [gc.user("u1", "half", 1)])
    torn.write_bytes(torn.read_bytes()[:-15])
    write_big_chat(chats / "session-big.jsonl")
    elsewhere = tmp_path / "no-home"  # the dir is found by --gemini-dir alone
    elsewhere.mkdir()
    mount = mount_factory(
        demo_agent,
        *("--agents", "gemini", "--gemini-dir", str(tmp_path / ".gemini")),
        *("--cache-mb", str(CACHE_MB)),
        env=home_env(elsewhere),
    )
    sessions = mount.path / "agents" / "gemini" / "sessions" / gc.PROJECT
    names = ["session-big", "session-good", "session-junk", "session-torn"]
    assert run("ls", sessions).split() == names

    big = sessions / "session-big"
    assert json.loads(run("cat", big / "header.json"))["id"] == "big"
    done = subprocess.run(
        ["cat", big / "context.json"], capture_output=True, timeout=COMMAND_TIMEOUT, check=False
    )
    assert done.returncode != 0 and b"File too large" in done.stderr
    reason = str(read_ctl(mount.path)["last_error"])  # the reason, in the root ctl
    assert reason.startswith(f"agents/gemini/sessions/{gc.PROJECT}/session-big/context.json")
    assert "the session file is 20" in reason and "MB" in reason

    torn_header = json.loads(run("cat", sessions / "session-torn" / "header.json"))
    assert torn_header["unreadable"].startswith("not JSON")
    assert json.loads(run("cat", sessions / "session-torn" / "stats.json"))["malformedLines"] == 1
    junk_stats = json.loads(run("cat", sessions / "session-junk" / "stats.json"))
    assert junk_stats["malformedLines"] == 2 and junk_stats["entries"] == 1
    assert "after junk" in run("cat", sessions / "session-junk" / "transcript.md")
    context = json.loads(run("cat", sessions / "session-good" / "context.json"))
    assert context["messages"][-1] == {"role": "model", "parts": [{"text": "fine"}]}

    for name in names[1:]:  # every file of the others reads; nothing anywhere is EIO
        for file in run("ls", sessions / name).split():
            path = sessions / name / file
            if path.is_file():
                path.read_bytes()
    grep = subprocess.run(
        ["grep", "-r", "-l", "the good session", mount.path / "agents" / "gemini"],
        capture_output=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert b"Input/output error" not in grep.stderr, grep.stderr
    assert b"session-good" in grep.stdout


def _search_hits(mount_path: Path, words: str, expect: str) -> list[str]:
    """``search/<words>``'s lines once one names ``expect`` (the first index build is
    waited for by the read itself; a few tries spare a slow pass)."""
    deadline = time.monotonic() + 60
    while True:
        hits = run("cat", mount_path / "search" / words).splitlines()
        if any(expect in hit for hit in hits) or time.monotonic() > deadline:
            return hits
        time.sleep(0.3)


def test_a_jsonl_whose_first_line_lists_messages_is_searched_as_records(
    tmp_path: Path, demo_agent: Path, mount_factory: MountFactory
) -> None:
    """A ``.jsonl`` whose first record holds a ``messages`` list is records (the mount
    reads it so: its name decides, not its first line): search finds the words of a
    later record, and every hit names an entry its ``entries/`` has, which opens."""
    chats = gc.gemini_home(tmp_path)
    listed = {**gc.header(0), "messages": [gc.user("u0", "listed first", 1)]}
    records = [listed, gc.user("u1", "the zanzibar question", 2), gc.gemini("g1", "ok", 3)]
    gc.write_jsonl(chats / "session-listed.jsonl", records)
    mount = mount_factory(
        demo_agent,
        *("--agents", "gemini", "--gemini-dir", str(tmp_path / ".gemini")),
        env=home_env(tmp_path),
    )
    session = f"agents/gemini/sessions/{gc.PROJECT}/session-listed"
    hits = _search_hits(mount.path, "zanzibar", f"{session}/entries/")
    paths = [hit.split("\t")[1] for hit in hits]
    assert f"{session}/entries/000002-user.json" in paths
    entries = set(run("ls", mount.path / session / "entries").split())
    for path in paths:
        assert path.startswith(f"{session}/entries/") and path.rsplit("/", 1)[1] in entries
        assert json.loads(run("cat", mount.path / path))
