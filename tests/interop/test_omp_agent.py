"""The real omp 18 (oh-my-pi) against a fake model server, through a real mount.

omp writes its sessions the way it does today (a 256-byte title slot line first, an
``O_APPEND`` fd kept open while it runs, a lock file around each append); the mount
must list and render them, let ``sessionfs check`` call them clean, and write into them
so that omp afterwards continues from what was written: a branch made through the mount
is what omp sends the model next.

How omp sees a file is asked of omp itself: ``omp_sessions.ts`` imports omp's session
loader and listings (see its header). Each test gets its own HOME for omp and for the
mount's daemon (omp's project dir names are relative to HOME, and the mount must name
them as omp does).
"""

from __future__ import annotations

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
from support.real_agents import OmpAgent

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
