"""``send`` with the real upstream agents against the fake model server: the mount
moves the leaf, ``send`` runs ``pi --session <file> -p`` (pi 0.73) or ``omp --resume
<file> -p`` (omp 18, on a file omp wrote itself, with its title slot), and what the
agent sent the model is exactly the chosen branch. Also, with pi: a second send while
pi waits for its model is ``EBUSY``; an emptied leaf starts a new root; an unmount
during a slow run loses nothing and leaves no pi behind; a read-only mount refuses
``send``."""

from __future__ import annotations

import errno
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from support.agent_messages import file_objects
from support.fake_model_server import FakeModelServer, ModelRequest, message_text
from support.mount import Mount, MountFactory, run, sessionfs
from support.pi_sessions import agent_template, branched_session
from support.real_agents import OmpAgent, PiAgent
from support.write_setup import errno_of, read_ctl, session_dir

pytestmark = pytest.mark.fuse


def mount_pi(
    pi_agent: PiAgent, mount_factory: MountFactory, tmp_path: Path, *extra: str
) -> tuple[Mount, Path, Path, dict[str, str]]:
    session_file, ids = branched_session(pi_agent.agent_dir, tmp_path / "work")
    mount = mount_factory(pi_agent.agent_dir, "--agent-cmd", agent_template(pi_agent), *extra)
    return mount, session_dir(mount, session_file), session_file, ids


def turn_request(fake_model: FakeModelServer, prompt: str) -> ModelRequest:
    (request,) = [r for r in fake_model.requests if r.mentions(prompt)]
    return request


def conversation(request: ModelRequest) -> list[str]:
    """The user and assistant texts the model was sent (pi's system prompt left out)."""
    return [message_text(m) for m in request.messages if m.get("role") in ("user", "assistant")]


def send_and_wait(directory: Path, prompt: str) -> str:
    return run("sh", "-c", f"printf '%s\\n' {shlex.quote(prompt)} > send; cat send", cwd=directory)


def test_pi_continues_the_branch_the_leaf_points_at(
    pi_agent: PiAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    _, directory, session_file, ids = mount_pi(pi_agent, mount_factory, tmp_path)
    fake_model.reply_with("pi on the first branch")
    run("ln", "-sfn", f"entries/{ids['a2']}.json", "leaf", cwd=directory)
    status = send_and_wait(directory, "continue the first branch")
    assert status.startswith("exit 0 after "), (status, (directory / "send.log").read_text())
    request = turn_request(fake_model, "continue the first branch")
    assert conversation(request) == [
        "first question",
        "first answer",
        "second question",
        "second answer",
        "continue the first branch",
    ]
    texts = request.texts()
    assert not any("other branch" in t for t in texts)
    entries = file_objects(session_file)[1:]
    branch = next(e for e in entries if e.get("customType") == "sessionfs.branch")
    assert branch["parentId"] == ids["a2"] and branch["data"] == {"leaf": ids["a2"]}
    assert "pi on the first branch" in (directory / "transcript.md").read_text()
    assert read_ctl(directory)["send_last"] == status.strip()
    assert sessionfs("check", session_file).returncode == 0


def test_pi_send_while_a_slow_run_is_active_is_ebusy(
    pi_agent: PiAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    _, directory, session_file, _ = mount_pi(pi_agent, mount_factory, tmp_path)
    with fake_model.hold():
        run("sh", "-c", "echo 'a slow question' > send", cwd=directory)
        fake_model.wait_for_requests(1)
        assert errno_of(lambda: (directory / "send").write_text("another")) == errno.EBUSY
        assert read_ctl(directory)["send"].startswith("running pid ")
        assert "an agent is running" in read_ctl(directory)["last_error"]
    assert (directory / "send").read_text().startswith("exit 0 after ")
    assert not any(r.mentions("another") for r in fake_model.requests)
    assert sessionfs("check", session_file).returncode == 0


def test_pi_send_after_rm_leaf_starts_a_new_root(
    pi_agent: PiAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    _, directory, session_file, _ = mount_pi(pi_agent, mount_factory, tmp_path)
    run("rm", "leaf", cwd=directory)
    assert send_and_wait(directory, "a fresh start").startswith("exit 0 after ")
    assert conversation(turn_request(fake_model, "a fresh start")) == ["a fresh start"]
    branch = next(
        e for e in file_objects(session_file) if e.get("customType") == "sessionfs.branch"
    )
    assert branch["parentId"] is None
    assert sessionfs("check", session_file).returncode == 0


def test_unmount_during_a_slow_pi_run_loses_nothing_and_leaves_no_pi(
    pi_agent: PiAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    mount, directory, session_file, _ = mount_pi(
        pi_agent, mount_factory, tmp_path, "--send-grace", "1"
    )
    before = session_file.read_bytes()
    with fake_model.hold():
        run("sh", "-c", "echo 'never answered' > send", cwd=directory)
        pid = int(read_ctl(directory)["send"].split()[2])
        fake_model.wait_for_requests(1)
        started = time.monotonic()
        subprocess.run(["fusermount3", "-u", str(mount.path)], check=True, timeout=30)
        mount.process.wait(timeout=30)
        took = time.monotonic() - started
    assert took < 15
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # pi and anything it started are gone
    after = session_file.read_bytes()
    assert after.startswith(before)  # every line that was there is there
    assert sessionfs("check", session_file).returncode == 0


def test_send_on_a_read_only_mount_is_erofs(
    pi_agent: PiAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    _, directory, session_file, _ = mount_pi(pi_agent, mount_factory, tmp_path, "--read-only")
    before = session_file.read_bytes()
    assert errno_of(lambda: (directory / "send").write_text("hello")) == errno.EROFS
    assert fake_model.requests == []
    assert session_file.read_bytes() == before


def test_omp_continues_the_branch_the_leaf_points_at(
    omp_agent: OmpAgent, fake_model: FakeModelServer, mount_factory: MountFactory, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    fake_model.reply_with("first answer", "second answer")
    omp_agent.run("first question", cwd=work).check()
    (session_file,) = omp_agent.sessions()
    omp_agent.run("second question", session=session_file, cwd=work).check()
    mount = mount_factory(omp_agent.agent_dir, "--agent-cmd", agent_template(omp_agent))
    directory = session_dir(mount, session_file)
    answers = [
        e["id"]
        for e in file_objects(session_file)
        if e.get("type") == "message" and e["message"]["role"] == "assistant"
    ]
    run("ln", "-sfn", f"entries/{answers[0]}.json", "leaf", cwd=directory)
    fake_model.reply_with("omp on the first branch")
    status = send_and_wait(directory, "back at the first answer")
    assert status.startswith("exit 0 after "), (status, (directory / "send.log").read_text())
    request = turn_request(fake_model, "back at the first answer")
    first, answer, prompt = conversation(request)  # the chosen branch, nothing else
    assert first.endswith("first question")  # omp puts a system reminder before it
    assert (answer, prompt) == ("first answer", "back at the first answer")
    assert not request.mentions("second question") and not request.mentions("second answer")
    assert "omp on the first branch" in (directory / "transcript.md").read_text()
    assert sessionfs("check", session_file).returncode == 0
