"""The real omp 18 (oh-my-pi) against a fake model server, through a real mount.

omp writes its sessions the way it does today (a 256-byte title slot line first, an
``O_APPEND`` fd kept open while it runs, a lock file around each append); the mount
must list and render them, let ``sessionfs check`` call them clean, and write into them
so that omp afterwards shows and continues from what was written: a title (what omp's
own loader, session list and recent-sessions list show; the slot byte for byte as omp
serialises it), a branch (what omp sends the model next), a session made with ``ctl
new`` (which omp resumes). While omp holds its file open, an append through the mount
is refused with EBUSY naming omp's pid, and omp's own run goes on unharmed.

How omp sees a file is asked of omp itself: ``omp_sessions.ts`` imports omp's session
loader and listings (see its header). Each test gets its own HOME for omp and for the
mount's daemon (omp's project dir names are relative to HOME, and the mount must name
them as omp does).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.agent_files import entries_of, header_of, last_assistant_text, message_entry
from support.fake_model_server import FakeModelServer, ModelRequest, message_text
from support.mount import Mount, MountFactory, run
from support.real_agents import OmpAgent, finish, kill
from support.write_setup import drop, errno_of, read_ctl

pytestmark = pytest.mark.fuse

Json = dict[str, Any]
SCRIPT = Path(__file__).with_name("omp_sessions.ts")
SLOT_BYTES = 256


# --------------------------------------------------------------------------- helpers


def omp_sees(agent: OmpAgent, command: str, *args: str | Path) -> Any:
    """What omp's own modules say (``load`` / ``list`` / ``recent`` / ``slot``)."""
    result = agent.bun_script(SCRIPT, command, *(str(a) for a in args)).check()
    return json.loads(result.stdout)


def turn_request(fake_model: FakeModelServer, prompt: str) -> ModelRequest:
    """The one model request of the turn that sent ``prompt`` last."""
    (request,) = [r for r in fake_model.requests if r.texts() and prompt in r.texts()[-1]]
    return request


def sessionfs_check(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionfs", "check", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def session_dir(mount: Mount, file: Path) -> Path:
    """The file's session dir in the mount, found by its id as a user would."""
    return Path(os.path.realpath(mount.path / "by-id" / header_of(file)["id"]))


@pytest.fixture
def omp_home(omp_agent: OmpAgent, monkeypatch: pytest.MonkeyPatch) -> OmpAgent:
    """omp, with the mount's daemon (started later in the test) sharing its HOME."""
    monkeypatch.setenv("HOME", str(omp_agent.home))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return omp_agent


def omp_session(
    agent: OmpAgent, fake_model: FakeModelServer, *turns: tuple[str, str]
) -> tuple[Path, Path]:
    """omp's first turn ("first question" -> "first answer") in ``~/app``, then each of
    ``turns`` (prompt, scripted reply) with ``--resume``: (project dir, session file)."""
    project = agent.home / "app"
    fake_model.reply_with("first answer")
    agent.run("first question", cwd=project).check()
    (file,) = agent.sessions()
    for prompt, reply in turns:
        fake_model.reply_with(reply)
        agent.run(prompt, session=file, cwd=project).check()
    return project, file


# --------------------------------------------------------------------------- list, render, check


def test_omp_sessions_list_render_and_check_clean(
    omp_home: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory
) -> None:
    _project, file = omp_session(omp_home, fake_model, ("second question", "second answer"))
    mount = mount_factory(omp_home.agent_dir)

    # The project dir lists the session under its file name.
    projects = run("ls", mount.path / "sessions").split()
    assert file.parent.name in projects
    listed = run("ls", mount.path / "sessions" / file.parent.name).split()
    assert listed == [file.name[: -len(".jsonl")]]
    d = session_dir(mount, file)
    assert d.parent.name == file.parent.name and d.name == file.name[: -len(".jsonl")]

    header = json.loads(run("cat", d / "header.json"))
    (omp_loaded,) = omp_sees(omp_home, "load", file)
    assert header["id"] == omp_loaded["id"]
    # Every entry shows, the omp-only ones (session_exit customs) included.
    assert sorted(run("ls", d / "entries").split()) == sorted(
        f"{e['id']}.json" for e in entries_of(file)
    )

    context = json.loads(run("cat", d / "context.json"))
    said = [(m["role"], message_text(m)) for m in context["messages"]]
    assert ("user", "first question") in said and ("assistant", "second answer") in said
    assert said.index(("user", "first question")) < said.index(("assistant", "second answer"))
    transcript = run("cat", d / "transcript.md")
    for text in ("first question", "first answer", "second question", "second answer"):
        assert text in transcript
    assert "second answer" in run(
        "cat", mount.path / "transcripts" / file.parent.name / f"{d.name}.md"
    )

    checked = sessionfs_check(file)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "1 clean" in checked.stdout


# --------------------------------------------------------------------------- title


def test_title_written_through_the_mount_is_what_omp_shows(
    omp_home: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory
) -> None:
    project, file = omp_session(omp_home, fake_model)
    mount = mount_factory(omp_home.agent_dir)
    d = session_dir(mount, file)

    run("sh", "-c", "echo 'A first title' > title", cwd=d)
    # omp's welcome screen indexes the title it finds into history.db (session_titles)
    # and prefers the index from then on: a later title must update that row too.
    recent = omp_sees(omp_home, "recent", file.parent)
    assert [r["name"] for r in recent if r["path"] == str(file)] == ["A first title"]

    before = file.read_bytes()
    # Longer than the slot holds, multi-byte: omp's own cut decides what is kept.
    title = "Ünïcødé 🚀 " + " ".join(["a long title that does not fit in the slot"] * 6)
    (d / "title").write_text(title + "\n")
    after = file.read_bytes()

    # Only the slot changed in place; everything after it is byte for byte the same,
    # and what follows is one title_change line.
    assert after[SLOT_BYTES : len(before)] == before[SLOT_BYTES:]
    slot = json.loads(after[:SLOT_BYTES])
    assert slot["source"] == "user"
    expected_slot = omp_sees(omp_home, "slot", title, "user", slot["updatedAt"])
    assert after[:SLOT_BYTES] == expected_slot.encode()
    added = after[len(before) :].splitlines(keepends=True)
    assert len(added) == 1 and added[0].endswith(b"\n")
    change = json.loads(added[0])
    assert change["type"] == "title_change" and change["title"] == title
    assert change["previousTitle"] == "A first title" and change["source"] == "user"

    # What omp shows: the title --resume loads, its session list, its recent list.
    kept = slot["title"]
    assert title.startswith(kept) and len(kept.encode()) < len(title.encode())
    (loaded,) = omp_sees(omp_home, "load", file)
    assert (loaded["title"], loaded["titleSource"]) == (kept, "user")
    assert loaded["malformedRecords"] == 0 and not loaded["invalidHeader"]
    assert loaded["types"][-1] == "title_change"
    listed = omp_sees(omp_home, "list", file.parent)
    assert [s["title"] for s in listed if s["path"] == str(file)] == [kept]
    recent = omp_sees(omp_home, "recent", file.parent)
    assert [r["name"] for r in recent if r["path"] == str(file)] == [title]
    # The mount's title file shows that title (in full: what the user wrote, as the
    # title_change entry and omp's recent list hold it).
    assert run("cat", d / "title").startswith(kept)

    # omp continues the session and keeps the user's title.
    fake_model.reply_with("answer after the title")
    omp_home.run("a question after the title", session=file, cwd=project).check()
    (loaded,) = omp_sees(omp_home, "load", file)
    assert (loaded["title"], loaded["titleSource"]) == (kept, "user")
    assert last_assistant_text(file) == "answer after the title"
    assert sessionfs_check(file).returncode == 0


# --------------------------------------------------------------------------- branch


def test_branch_made_through_the_mount_is_what_omp_continues_from(
    omp_home: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory
) -> None:
    leave_behind = ("a question to leave behind", "the answer to leave behind")
    project, file = omp_session(omp_home, fake_model, leave_behind)
    mount = mount_factory(omp_home.agent_dir)
    d = session_dir(mount, file)

    branch_point = message_entry(file, "assistant", "first answer")["id"]
    run("ln", "-sfn", f"entries/{branch_point}.json", d / "leaf")
    note = project / "note.md"
    note.write_text("a question on the new branch\n")
    run("cp", note, d / "append" / "note.md")
    appended = message_entry(file, "user", "a question on the new branch")
    assert appended["parentId"] == branch_point
    assert os.readlink(d / "leaf") == f"entries/{appended['id']}.json"

    fake_model.reply_with("an answer on the new branch")
    omp_home.run("go on from here", session=file, cwd=project).check()
    texts = turn_request(fake_model, "go on from here").texts()
    joined = "\n".join(texts)
    for kept in ("first question", "first answer", "a question on the new branch"):
        assert kept in joined, (kept, texts)
    for left in ("a question to leave behind", "the answer to leave behind"):
        assert left not in joined, (left, texts)
    assert last_assistant_text(file) == "an answer on the new branch"
    reply = message_entry(file, "assistant", "an answer on the new branch")
    assert sessionfs_check(file).returncode == 0
    # The mount follows omp's append: the leaf is omp's last entry, on the new branch.
    path_ids = [name.split("-", 1)[1][: -len(".json")] for name in run("ls", d / "path").split()]
    assert appended["id"] in path_ids and reply["id"] in path_ids


# --------------------------------------------------------------------------- omp running


def assert_refused_while_omp_runs(d: Path, file: Path, note: Path, target: str, pid: int) -> None:
    """An append (with cp, and with one write) and a label through the mount are EBUSY,
    ctl names omp's pid, and nothing reaches the file."""
    size = file.stat().st_size
    copied = subprocess.run(
        ["cp", str(note), str(d / "append" / "note.md")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert copied.returncode != 0
    assert "busy" in copied.stderr.lower(), copied.stderr
    assert errno_of(lambda: drop(d / "append", "x.md", b"again\n")) == errno.EBUSY
    assert str(pid) in read_ctl(d)["last_error"]
    label = errno_of(lambda: os.symlink(f"../entries/{target}.json", d / "labels" / "mine"))
    assert label == errno.EBUSY
    assert file.stat().st_size == size


def test_append_while_omp_runs_is_ebusy_and_omp_finishes(
    omp_home: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory
) -> None:
    project, file = omp_session(omp_home, fake_model)
    mount = mount_factory(omp_home.agent_dir)
    d = session_dir(mount, file)
    target = message_entry(file, "assistant", "first answer")["id"]
    fake_model.clear_requests()

    note = project / "note.md"
    note.write_text("appended while omp runs\n")
    fake_model.reply_with("the slow answer")
    with fake_model.hold():  # omp waits for its model until the block ends
        omp = omp_home.start("a slow question", session=file, cwd=project)
        try:
            # Its request arrived: omp is mid-turn, its session file open for appending.
            fake_model.wait_for_requests(1, timeout=120)
            assert_refused_while_omp_runs(d, file, note, target, omp.pid)
        except BaseException:
            kill(omp)  # a failed test leaves no omp behind
            raise
    result = finish(omp)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "the slow answer" in result.stdout

    # omp's file is whole and valid: its own turn in it, nothing of ours.
    assert last_assistant_text(file) == "the slow answer"
    assert b"appended while omp runs" not in file.read_bytes()
    (loaded,) = omp_sees(omp_home, "load", file)
    assert loaded["malformedRecords"] == 0 and not loaded["invalidHeader"]
    checked = sessionfs_check(file)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # Once omp has exited, the same append goes through.
    run("cp", note, d / "append" / "note.md")
    assert message_entry(file, "user", "appended while omp runs")


# --------------------------------------------------------------------------- ctl new


def test_ctl_new_in_omps_agent_dir_makes_a_session_omp_resumes(
    omp_home: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory
) -> None:
    # The agent dir already holds omp's sessions (with slots): new ones get a slot too.
    omp_session(omp_home, fake_model)
    mount = mount_factory(omp_home.agent_dir)
    project = omp_home.home / "made-by-ctl"
    project.mkdir()

    run("sh", "-c", f"echo 'new {project} Made through the mount' > ctl", cwd=mount.path)
    new_dir = Path(read_ctl(mount.path)["last_result"])
    assert new_dir.is_dir()
    file = Path(read_ctl(new_dir)["file"])
    assert file.is_file() and file.is_relative_to(omp_home.agent_dir / "sessions")
    first_line = file.read_bytes().split(b"\n", 1)[0] + b"\n"
    assert len(first_line) == SLOT_BYTES and json.loads(first_line)["type"] == "title"
    (loaded,) = omp_sees(omp_home, "load", file)
    assert loaded["title"] == "Made through the mount" and not loaded["invalidHeader"]
    assert file in [Path(s["path"]) for s in omp_sees(omp_home, "list", file.parent)]

    # `omp --continue` in that cwd picks it up (it is where omp looks, and the newest).
    fake_model.reply_with("answer in the new session")
    omp_home.run("hello new session", cwd=project, options=("--continue",)).check()
    assert [f for f in omp_home.sessions() if f.parent == file.parent] == [file]
    assert last_assistant_text(file) == "answer in the new session"
    turn_request(fake_model, "hello new session")
    (loaded,) = omp_sees(omp_home, "load", file)
    assert loaded["title"] == "Made through the mount"
    assert sessionfs_check(file).returncode == 0
