"""The mount's writes against the real oh-my-pi 18 writing the same session (`omp -p
--resume FILE`, offline against the fake model server), through a real mount with
real ``cp``, ``ln -sfn`` and ``cat``:

* while omp is in the middle of a turn it holds the session file open (``O_APPEND``):
  every write through the mount is ``EBUSY``, ``ctl`` names omp's pid, the file is
  untouched, and omp's own writes of that turn all land;
* once omp has exited, the mount's leaf move, append, label and title land inside
  omp's publish lock (no lock file is left), and the next real omp run continues from
  them: the model is sent what the mount appended, omp keeps every byte the mount
  wrote (it rewrites a file only when it finds a line it cannot take as it is, and it
  would drop that line) and reports no persistence error;
* omp kept running (``--mode rpc``) holds the file between turns: refused all that
  time; titles go both ways (omp reads the mount's slot, the mount shows omp's);
* omp's own full rewrite (its rename of a file without a slot) after the mount's
  writes succeeds and keeps every entry the mount wrote;
* ``send`` while an omp the mount did not start holds the file is ``EBUSY`` (it would
  start a second agent appending to the same file) and starts nothing;
* the sessions the mount creates (``new``, ``fork``) are ones omp resumes as they are;
* the limit: an omp that has loaded a session but not appended yet holds nothing the
  mount can see, so a write then is not refused (it is kept, beside omp's turn).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.agent_messages import file_objects
from support.fake_model_server import FakeModelServer, ModelRequest, message_text
from support.mount import MountFactory, run
from support.omp_files import SLOT_BYTES
from support.omp_rpc import OmpRpc
from support.pi_sessions import agent_template
from support.real_agents import AgentResult, OmpAgent, finish, kill
from support.waiting import eventually
from support.write_setup import read_ctl, session_dir

from core.check import check_file
from core.rewrite import writers_of_inode
from core.title_slot import split_title_slot
from sessionfs.fs.inotify import IN_CREATE, IN_DELETE, IN_MODIFY, Event, Inotify

pytestmark = pytest.mark.fuse

#: What omp prints when it cannot persist its session (`SessionWriteConflictError`,
#: `SessionLockError` and the persistence-failure notice all say one of these).
PERSISTENCE_TROUBLE = ("persist", "publish lock", "changed before rewrite", "was not modified")


def holds_for_writing(pid: int, file: Path) -> bool:
    """Whether process ``pid`` has ``file`` open for writing now (its /proc fd table)."""
    st = file.stat()
    return pid in writers_of_inode(st.st_dev, st.st_ino)


def shell(command: str, cwd: Path) -> tuple[int, str]:
    """A real shell command in ``cwd``: its exit status and stderr."""
    done = subprocess.run(
        ["sh", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    return done.returncode, done.stderr


def clean_run(result: AgentResult) -> AgentResult:
    """``result`` after checking omp exited 0 without a word about persistence trouble."""
    result.check()
    trouble = [w for w in PERSISTENCE_TROUBLE if w in result.stdout + result.stderr]
    assert not trouble, (trouble, result.stderr[-3000:])
    return result


def lock_files(file: Path) -> list[str]:
    return sorted(n for n in os.listdir(file.parent) if n.startswith(".") and ".lock" in n)


def lock_use(events: list[Event], file: Path) -> tuple[int, int]:
    """(how often omp's lock file beside ``file`` was created, how many changes to
    ``file`` were made while it did not exist), from the inotify events of their
    directory, in order. (The kernel merges back-to-back changes into one event.)"""
    lock = f".{file.name}.lock"
    held, taken, outside = False, 0, 0
    for event in events:
        if event.name == lock:
            taken += bool(event.mask & IN_CREATE)
            held = bool(event.mask & IN_CREATE) or (held and not event.mask & IN_DELETE)
        elif event.name == file.name and event.mask & IN_MODIFY:
            outside += not held
    return taken, outside


def conversation(request: ModelRequest) -> list[str]:
    return [message_text(m) for m in request.messages if m.get("role") in ("user", "assistant")]


def two_turns(omp_agent: OmpAgent, fake_model: FakeModelServer, work: Path) -> Path:
    """A session real omp wrote: two turns, so it has a user message to branch at."""
    fake_model.reply_with("first answer", "second answer")
    clean_run(omp_agent.run("first question", cwd=work))
    (session_file,) = omp_agent.sessions()
    clean_run(omp_agent.run("second question", session=session_file, cwd=work))
    return session_file


def entry_ids(session_file: Path, role: str) -> list[str]:
    return [
        e["id"]
        for e in file_objects(session_file)
        if e.get("type") == "message" and e["message"]["role"] == role
    ]


def branch_note_label_title(d: Path, session_file: Path, tmp_path: Path, title: str) -> None:
    """Through the mount, with ``ln`` and ``cp``: the leaf back to omp's first answer,
    a note (a user message) appended there, labelled, and the session retitled."""
    first_answer = entry_ids(session_file, "assistant")[0]
    note = tmp_path / "note.md"
    note.write_text("Remember the code word PAPAYA.\n")
    title_file = tmp_path / "title.txt"
    title_file.write_text(f"{title}\n")
    run("ln", "-sfn", f"entries/{first_answer}.json", "leaf", cwd=d)
    run("cp", note, d / "append/")
    appended = read_ctl(d)["leaf"]
    run("ln", "-s", f"../entries/{appended}.json", "labels/code-word", cwd=d)
    run("cp", title_file, d / "title")


def test_writes_during_an_omp_turn_are_ebusy_and_omps_turn_lands(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    session_file = two_turns(omp_agent, fake_model, work)
    mount = mount_factory(omp_agent.agent_dir)
    d = session_dir(mount, session_file)
    first_answer = entry_ids(session_file, "assistant")[0]
    (tmp_path / "msg.json").write_text(json.dumps({"role": "user", "content": "from the mount"}))
    (tmp_path / "title.txt").write_text("Renamed by the mount\n")
    fake_model.reply_with("third answer")
    with fake_model.hold():
        omp = omp_agent.start("third question", session=session_file, cwd=work)
        try:
            fake_model.wait_for_requests(3, timeout=120)  # omp waits for its model now
            eventually(lambda: holds_for_writing(omp.pid, session_file), "omp holding its file", 60)
            during = session_file.read_bytes()
            assert b"third question" in during  # omp appended its prompt before asking
            writes = {
                "append": f"cp {tmp_path / 'msg.json'} append/",
                "leaf move, then append": f"ln -sfn entries/{first_answer}.json leaf"
                f" && cp {tmp_path / 'msg.json'} append/",
                "title": f"cp {tmp_path / 'title.txt'} title",
                "label": f"ln -s ../entries/{first_answer}.json labels/mark",
            }
            for what, command in writes.items():
                status, stderr = shell(command, d)
                assert status != 0 and "Device or resource busy" in stderr, (what, stderr)
                error = read_ctl(d)["last_error"]
                assert f"held open for writing by pid {omp.pid}" in error, (what, error)
                assert session_file.read_bytes() == during, what
            assert lock_files(session_file) == []
        except BaseException:
            kill(omp)
            raise
    result = clean_run(finish(omp))
    assert "third answer" in result.stdout
    after = session_file.read_bytes()
    assert after.startswith(during)  # omp only appended, after all the refusals
    added = [json.loads(line) for line in after[len(during) :].splitlines()]
    assert [e["message"]["content"][0]["text"] for e in added if e["type"] == "message"] == [
        "third answer"
    ]
    assert b"from the mount" not in after and b"Renamed by the mount" not in after
    assert check_file(session_file).clean, check_file(session_file).problems
    assert lock_files(session_file) == []
    # The mount sees omp's whole turn; omp's lines end the leaf chosen through the
    # mount (the `ln -sfn` above): the leaf is omp's last entry again.
    eventually(
        lambda: "third answer" in (d / "transcript.md").read_text(), "omp's answer shown", 30
    )
    assert os.readlink(d / "leaf") == f"entries/{added[-1]['id']}.json"
    # It writes again now that omp is gone.
    assert shell(f"cp {tmp_path / 'msg.json'} append/", d) == (0, "")
    assert session_file.read_bytes().startswith(after)


def test_omp_continues_what_the_mount_wrote_after_it_exited(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    session_file = two_turns(omp_agent, fake_model, work)
    inode = session_file.stat().st_ino
    mount = mount_factory(omp_agent.agent_dir)
    d = session_dir(mount, session_file)
    watcher = Inotify()
    try:
        watcher.add_watch(session_file.parent, IN_CREATE | IN_DELETE | IN_MODIFY)
        branch_note_label_title(d, session_file, tmp_path, "Code words")
        events = watcher.read_events()
    finally:
        watcher.close()
    assert read_ctl(d)["last_error"] == ""
    # The append, the label, and the title's two steps (its `title_change` line, then
    # the slot in place): each made inside omp's publish lock.
    assert lock_use(events, session_file) == (4, 0), events
    assert lock_files(session_file) == []  # and it was released each time
    written = session_file.read_bytes()
    assert session_file.stat().st_ino == inode  # appends and an in-place slot, no rewrite
    slot, body = split_title_slot(written)
    assert slot is not None and (slot["title"], slot["source"], body) == (
        "Code words", "user", SLOT_BYTES
    )  # fmt: skip
    assert check_file(session_file).clean, check_file(session_file).problems

    fake_model.reply_with("It is PAPAYA.")
    result = clean_run(omp_agent.run("What is the code word?", session=session_file, cwd=work))
    assert "It is PAPAYA." in result.stdout
    (request,) = [r for r in fake_model.requests if r.mentions("What is the code word?")]
    texts = conversation(request)
    assert texts[0].endswith("first question")  # omp puts a system reminder before it
    assert texts[1:] == [
        "first answer",
        "Remember the code word PAPAYA.",
        "What is the code word?",
    ], texts  # the branch the mount chose, with what it appended, nothing else
    assert not request.mentions("second question")
    after = session_file.read_bytes()
    # omp kept every byte the mount wrote: it only appended (a line it could not take
    # as it is would have made it rewrite the file, dropping that line).
    assert session_file.stat().st_ino == inode and after.startswith(written)
    assert after[:SLOT_BYTES] == written[:SLOT_BYTES]  # omp read and kept the mount's title
    added = [json.loads(line) for line in after[len(written) :].splitlines()]
    replies = [e for e in added if e["type"] == "message"]
    assert [e["message"]["role"] for e in replies] == ["user", "assistant"]
    assert replies[0]["parentId"] == read_ctl_leaf_of_title(written)
    assert check_file(session_file).clean, check_file(session_file).problems
    assert lock_files(session_file) == []
    eventually(
        lambda: (
            run("cat", d / "title") == "Code words\n"
            and "It is PAPAYA." in (d / "transcript.md").read_text()
        ),
        "omp's turn shown under the mount's title",
        30,
    )


def read_ctl_leaf_of_title(written: bytes) -> str:
    """The id of the last line the mount wrote (its ``title_change``): omp continues
    from the last line of the file."""
    last = json.loads(written.rstrip(b"\n").rsplit(b"\n", 1)[1])
    assert last["type"] == "title_change"
    return str(last["id"])


def test_an_omp_kept_running_holds_its_file_between_turns_and_titles_go_both_ways(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    """``omp --mode rpc`` (an editor integration, or a long interactive session) keeps
    its file open from its first append until it exits, idle turns included: the mount
    refuses to write all that time. A title goes both ways: omp reads the one the mount
    wrote into the slot, and the mount shows the one omp renames the session to."""
    work = tmp_path / "work"
    session_file = two_turns(omp_agent, fake_model, work)
    mount = mount_factory(omp_agent.agent_dir)
    d = session_dir(mount, session_file)
    (tmp_path / "title.txt").write_text("Named by the mount\n")
    run("cp", tmp_path / "title.txt", d / "title")
    message = tmp_path / "msg.json"
    message.write_text(json.dumps({"role": "user", "content": "from the mount"}))
    omp = OmpRpc(omp_agent, session_file, work)
    try:
        assert omp.request("get_state")["data"]["sessionName"] == "Named by the mount"
        fake_model.reply_with("third answer")
        omp.prompt("third question")
        eventually(lambda: holds_for_writing(omp.pid, session_file), "omp holding its file", 60)
        idle = session_file.read_bytes()
        status, stderr = shell(f"cp {message} append/", d)
        assert status != 0 and "Device or resource busy" in stderr, stderr
        assert f"held open for writing by pid {omp.pid}" in read_ctl(d)["last_error"]
        assert session_file.read_bytes() == idle

        omp.request("set_session_name", name="Named by omp")
        renamed = session_file.read_bytes()
        slot, body = split_title_slot(renamed)
        assert slot is not None and (slot["title"], body) == ("Named by omp", SLOT_BYTES)
        assert renamed[SLOT_BYTES : len(idle)] == idle[SLOT_BYTES:]  # omp: in place, + a line
        (change,) = [json.loads(line) for line in renamed[len(idle) :].splitlines()]
        assert (change["type"], change["title"]) == ("title_change", "Named by omp")
        eventually(
            lambda: run("cat", d / "title") == "Named by omp\n", "omp's title in the mount", 30
        )
        assert os.readlink(d / "leaf") == f"entries/{change['id']}.json"
        assert holds_for_writing(omp.pid, session_file)  # still open, idle between turns
    finally:
        stderr = omp.close()
    trouble = [w for w in PERSISTENCE_TROUBLE if w in stderr]
    assert omp.process.returncode == 0 and not trouble, stderr[-3000:]
    closed = session_file.read_bytes()
    assert b"from the mount" not in closed
    assert shell(f"cp {message} append/", d) == (0, "")  # omp is gone: the mount writes
    assert session_file.read_bytes().startswith(closed)
    assert check_file(session_file).clean, check_file(session_file).problems


def test_a_write_before_omps_first_append_is_not_refused_and_kept_beside_its_turn(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    """The limit docs/mount.md states: an omp that has loaded the session but not
    appended to it yet holds no descriptor on it, so the mount cannot tell it is there
    and does not refuse. What it writes then is kept, byte for byte; omp continues
    from the entry it had last, so the write is a branch beside omp's turn."""
    work = tmp_path / "work"
    session_file = two_turns(omp_agent, fake_model, work)
    mount = mount_factory(omp_agent.agent_dir)
    d = session_dir(mount, session_file)
    message = tmp_path / "msg.json"
    message.write_text(json.dumps({"role": "user", "content": "from the mount"}))
    omp = OmpRpc(omp_agent, session_file, work)
    try:
        omp.request("get_state")  # loaded and answering
        assert not holds_for_writing(omp.pid, session_file)
        assert shell(f"cp {message} append/", d) == (0, "")
        kept = session_file.read_bytes()
        ours = json.loads(kept.rstrip(b"\n").rsplit(b"\n", 1)[1])
        fake_model.reply_with("third answer")
        omp.prompt("third question")
    finally:
        stderr = omp.close()
    trouble = [w for w in PERSISTENCE_TROUBLE if w in stderr]
    assert omp.process.returncode == 0 and not trouble, stderr[-3000:]
    (request,) = [r for r in fake_model.requests if r.mentions("third question")]
    assert not request.mentions("from the mount")  # omp's context: its own last entry on
    after = session_file.read_bytes()
    assert after.startswith(kept)  # nothing the mount wrote is lost
    added = [json.loads(line) for line in after[len(kept) :].splitlines()]
    omps_prompt = next(e for e in added if e["type"] == "message")
    assert omps_prompt["parentId"] == ours["parentId"]  # beside the mount's entry
    assert check_file(session_file).clean, check_file(session_file).problems


def test_omps_own_rewrite_after_the_mounts_writes_keeps_them(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    """omp rewrites a file whole when it renames one without a title slot (an older
    omp's, or pi's, in omp's agent dir): the rewrite checks the file's size against
    what omp loaded and wrote, and drops every line omp cannot take. After the mount
    appended, labelled and retitled the file (omp not running), omp resumes it, runs a
    turn, renames it: the rewrite succeeds and keeps every entry the mount wrote."""
    work = tmp_path / "work"
    slotted = two_turns(omp_agent, fake_model, work)
    session_file = slotted.with_name(f"old-{slotted.name}")
    session_file.write_bytes(slotted.read_bytes()[SLOT_BYTES:])  # the same, without slot
    slotted.unlink()
    omps = {e.get("id") for e in file_objects(session_file)}
    mount = mount_factory(omp_agent.agent_dir)
    d = session_dir(mount, session_file)
    branch_note_label_title(d, session_file, tmp_path, "Titled by the mount")
    # (No slot: the mount's title went into the header, by a rewrite of its own.)
    assert read_ctl(d)["last_error"] == "" and lock_files(session_file) == []
    ours = {e.get("id") for e in file_objects(session_file)} - omps
    assert len(ours) == 2  # the message and the label (the title went into the header)
    assert split_title_slot(session_file.read_bytes())[0] is None

    omp = OmpRpc(omp_agent, session_file, work)
    try:
        assert omp.request("get_state")["data"]["sessionName"] == "Titled by the mount"
        fake_model.reply_with("It is PAPAYA.")
        omp.prompt("What is the code word?")
        inode = session_file.stat().st_ino
        omp.request("set_session_name", name="Renamed by omp")
        assert session_file.stat().st_ino != inode  # omp rewrote the file whole
    finally:
        stderr = omp.close()
    trouble = [w for w in PERSISTENCE_TROUBLE if w in stderr]
    assert omp.process.returncode == 0 and not trouble, stderr[-3000:]
    (request,) = [r for r in fake_model.requests if r.mentions("What is the code word?")]
    assert request.mentions("Remember the code word PAPAYA.")
    rewritten = session_file.read_bytes()
    slot, _ = split_title_slot(rewritten)
    assert slot is not None and slot["title"] == "Renamed by omp"
    kept = {e.get("id") for e in file_objects(session_file)}
    assert ours <= kept, ours - kept  # omp's rewrite dropped nothing the mount wrote
    assert check_file(session_file).clean, check_file(session_file).problems
    eventually(
        lambda: run("cat", d / "title") == "Renamed by omp\n", "omp's title in the mount", 30
    )


def test_send_while_an_outside_omp_holds_the_file_is_ebusy(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    """``send`` starts an agent that appends to the session: while an omp the mount did
    not start holds the file open (idle between turns), a second agent on the file
    would put lines the first did not write into it (the first then refuses its own
    next rewrite). So ``send`` is ``EBUSY`` then, naming that omp, and starts nothing."""
    work = tmp_path / "work"
    session_file = two_turns(omp_agent, fake_model, work)
    mount = mount_factory(omp_agent.agent_dir, "--agent-cmd", agent_template(omp_agent))
    d = session_dir(mount, session_file)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("a second agent on the same file\n")
    omp = OmpRpc(omp_agent, session_file, work)
    try:
        omp.prompt("third question")
        eventually(lambda: holds_for_writing(omp.pid, session_file), "omp holding its file", 60)
        idle = session_file.read_bytes()
        asked = len(fake_model.requests)
        status, stderr = shell(f"cp {prompt} send", d)
        assert status != 0 and "Device or resource busy" in stderr, stderr
        assert f"held open for writing by pid {omp.pid}" in read_ctl(d)["last_error"]
        assert read_ctl(d)["send"] == "idle"
        assert len(fake_model.requests) == asked and session_file.read_bytes() == idle
    finally:
        stderr = omp.close()
    trouble = [w for w in PERSISTENCE_TROUBLE if w in stderr]
    assert omp.process.returncode == 0 and not trouble, stderr[-3000:]
    # omp is gone: send runs the agent on the session.
    fake_model.reply_with("the mount's agent answers")
    assert run("sh", "-c", f"cp {prompt} send && cat send", cwd=d).startswith("exit 0 after ")
    assert b"the mount's agent answers" in session_file.read_bytes()
    assert check_file(session_file).clean, check_file(session_file).problems


def test_omp_resumes_the_sessions_the_mount_creates_as_they_are(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    """A session made through the mount (root ``ctl`` ``new``, session ``ctl`` ``fork``)
    in omp's agent dir is one omp resumes without a rewrite (nothing to migrate or
    repair: it only appends), with the mount's title, and the fork's conversation."""
    work = tmp_path / "work"
    session_file = two_turns(omp_agent, fake_model, work)
    mount = mount_factory(omp_agent.agent_dir)
    run("sh", "-c", f"echo 'new {work} Started by the mount' > ctl", cwd=mount.path)
    fresh = Path(read_ctl(mount.path)["last_result"])
    run("sh", "-c", "echo fork > ctl", cwd=session_dir(mount, session_file))
    fork = Path(read_ctl(session_dir(mount, session_file))["last_result"])
    for made, title, copied in ((fresh, "Started by the mount", False), (fork, "", True)):
        header = json.loads((made / "header.json").read_text())
        (file,) = omp_agent.agent_dir.glob(f"sessions/*/*{header['id']}.jsonl")
        written, inode = file.read_bytes(), file.stat().st_ino
        assert split_title_slot(written)[0] is not None
        prompt = f"continue {made.name}"
        fake_model.reply_with(f"answer in {made.name}")
        omp = OmpRpc(omp_agent, file, work)
        try:
            assert (omp.request("get_state")["data"].get("sessionName") or "") == title
            omp.prompt(prompt)
        finally:
            stderr = omp.close()
        trouble = [w for w in PERSISTENCE_TROUBLE if w in stderr]
        assert omp.process.returncode == 0 and not trouble, stderr[-3000:]
        (request,) = [r for r in fake_model.requests if r.mentions(prompt)]
        texts = conversation(request)
        if copied:  # the fork: the whole conversation it copied, then the prompt
            assert texts[0].endswith("first question") and texts[1:] == [
                "first answer", "second question", "second answer", prompt
            ], texts  # fmt: skip
        else:
            assert len(texts) == 1 and texts[0].endswith(prompt), texts
        assert file.stat().st_ino == inode and file.read_bytes().startswith(written)
        assert check_file(file).clean, check_file(file).problems
        eventually(
            lambda d=made, n=made.name: f"answer in {n}" in (d / "transcript.md").read_text(),
            "omp's answer in the mount",
            30,
        )
