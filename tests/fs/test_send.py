"""``send`` through a real mount: a prompt written to a session's ``send`` runs the agent
(here `support.fake_agent`, which continues the file from its last entry as the real
agents do) from the mount's leaf; ``cat send`` waits for the run and shows its status.
Everything is checked on disk: the entries the agent appended, the branch point the
mount recorded, what the agent saw as its context (``send.log``)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import trio
from support import quick_agent
from support.agent_messages import file_objects
from support.fake_agent import FAKE_AGENT, command
from support.mount import (
    Mount,
    MountFactory,
    background_mount,
    run,
    sessionfs,
    start_mount,
)
from support.write_setup import PROJECT, errno_of, make_agent, read_ctl, session_dir

from core.check import check_file
from sessionfs.fs.nodes.base import DirNode, FileNode, MountContext, OpenFile
from sessionfs.fs.ops import SessionFsOperations
from sessionfs.view.refusal import WriteRejected

pytestmark = pytest.mark.fuse

#: make_agent's session: u1 -> a1 -> u2 -> a2, and u3 under a1 (the leaf, last line)
FIRST_BRANCH = ["first question", "first answer", "second question", "second answer"]


def mount_with_agent(
    tmp_path: Path,
    mount_factory: MountFactory,
    *agent_options: str,
    extra: tuple[str, ...] = (),
    name: str = "mnt",
) -> tuple[Mount, Path, Path]:
    """A mount whose ``send`` runs the fake agent; (mount, session dir, session file)."""
    agent_dir, session_file = make_agent(tmp_path / f"{name}-agent")
    mount = mount_factory(agent_dir, "--agent-cmd", command(*agent_options), *extra, name=name)
    return mount, session_dir(mount, session_file), session_file


def write_send(directory: Path, prompt: bytes) -> None:
    """open, write, close ``send`` (close() starts the run and may fail)."""
    fd = os.open(directory / "send", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, prompt)
    finally:
        os.close(fd)


def agent_report(directory: Path) -> dict[str, Any]:
    """The fake agent's JSON line from ``send.log``: its context, cwd and pid."""
    lines = (directory / "send.log").read_text().splitlines()
    return dict(json.loads(lines[-1]))


def entries_after(session_file: Path, count: int) -> list[dict[str, Any]]:
    return file_objects(session_file)[1 + count :]


def texts(entry: dict[str, Any]) -> str:
    return str(entry["message"]["content"][0]["text"])


def message_texts(session_file: Path) -> list[str]:
    """The text of every message entry in the file, in file order."""
    return [texts(e) for e in file_objects(session_file)[1:] if e["type"] == "message"]


def start_run(directory: Path, session_file: Path, prompt: str) -> int:
    """Send ``prompt`` and wait until the agent has appended it; the agent's pid."""
    write_send(directory, prompt.encode())
    pid = int(read_ctl(directory)["send"].split()[2])
    wait_for(lambda: prompt in message_texts(session_file))
    return pid


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition: Callable[[], bool], timeout: float = 20) -> float:
    """Poll until ``condition()`` holds; the monotonic time it first did."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return time.monotonic()


def check_errors(session_file: Path) -> list[str]:
    report = check_file(session_file)
    return [f.message for f in report.problems if f.severity == "error"]


def test_echo_then_cat_runs_the_agent_and_waits_for_it(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory, "--sleep", "0.5")
    before = len(file_objects(session_file)) - 1
    status = run("sh", "-c", 'echo "try X" > send; cat send', cwd=directory)
    assert status.startswith("exit 0 after ") and status.endswith(" s\n"), status
    added = entries_after(session_file, before)
    # the leaf was the last line already: no branch point, the agent's two messages
    assert [e["message"]["role"] for e in added] == ["user", "assistant"]
    assert texts(added[0]) == "try X"  # echo's newline is not part of the prompt
    assert texts(added[1]) == "answer to try X"
    assert agent_report(directory)["context"] == ["first question", "first answer", "other branch"]
    ctl = read_ctl(directory)
    assert ctl["send"] == "idle"
    assert ctl["send_last"] == status.strip()
    assert ctl["leaf"] == added[1]["id"]  # what the agent appended shows in the mount
    assert (directory / "send").read_text() == status  # a second read: the same, not stale
    assert os.stat(directory / "send").st_size == len(status)


def test_send_runs_from_the_leaf_the_user_chose(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory)
    a2 = file_objects(session_file)[4]
    before = len(file_objects(session_file)) - 1
    run("ln", "-sfn", f"entries/{a2['id']}.json", "leaf", cwd=directory)
    run("sh", "-c", "echo 'go on' > send; cat send", cwd=directory)
    added = entries_after(session_file, before)
    branch, prompt, answer = added
    assert branch["type"] == "custom" and branch["customType"] == "sessionfs.branch"
    assert branch["parentId"] == a2["id"] and branch["data"] == {"leaf": a2["id"]}
    assert prompt["parentId"] == branch["id"] and answer["parentId"] == prompt["id"]
    # the agent continued the chosen branch and nothing of the other one
    assert agent_report(directory)["context"] == FIRST_BRANCH
    assert check_errors(session_file) == []


def test_once_cat_send_returns_the_transcript_shows_the_run(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    """The README's loop: back to one entry, send, wait, copy the transcript. The fake
    agent is done in well under the mount's freshness window (0.2 s), so only a look at
    the file when the run ends can show its answer in the very next read."""
    agent_dir, session_file = make_agent(tmp_path / "agent")
    mount = mount_factory(agent_dir, "--agent-cmd", quick_agent.command())
    directory = session_dir(mount, session_file)
    start = file_objects(session_file)[4]["id"]
    script = (
        "for n in 1 2 3 4 5 6; do"
        f" ln -sfn entries/{start}.json leaf;"
        ' echo "idea $n" > send; cat send > /dev/null;'
        ' grep -c "answer to idea $n" transcript.md || echo "idea $n: not shown";'
        " done"
    )
    shown = run("bash", "-c", script, cwd=directory)
    assert shown.split() == ["1"] * 6, shown
    assert check_errors(session_file) == []


def test_send_after_rm_leaf_starts_a_new_root(tmp_path: Path, mount_factory: MountFactory) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory)
    before = len(file_objects(session_file)) - 1
    run("rm", "leaf", cwd=directory)
    run("sh", "-c", "echo 'fresh start' > send; cat send", cwd=directory)
    branch, prompt, _ = entries_after(session_file, before)
    assert branch["parentId"] is None and branch["data"] == {"leaf": None}
    assert prompt["parentId"] == branch["id"]
    assert agent_report(directory)["context"] == []
    assert read_ctl(directory)["leaf"] != ""


def test_ctl_branch_then_send(tmp_path: Path, mount_factory: MountFactory) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory)
    a1 = file_objects(session_file)[2]
    run("sh", "-c", f"echo 'branch {a1['id']}' > ctl", cwd=directory)
    run("sh", "-c", "echo 'from a1' > send; cat send", cwd=directory)
    assert agent_report(directory)["context"] == ["first question", "first answer"]


def test_every_write_to_the_session_is_ebusy_while_the_agent_runs(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory, "--sleep", "3")
    u1 = file_objects(session_file)[1]["id"]
    write_send(directory, b"slow one\n")
    ctl = read_ctl(directory)
    assert ctl["send"].startswith("running pid "), ctl
    pid = int(ctl["send"].split()[2])
    assert process_exists(pid)
    refused = {
        "send": errno_of(lambda: write_send(directory, b"another")),
        "append": errno_of(
            lambda: (directory / "append" / "a.json").write_text('{"role":"user","content":"x"}')
        ),
        "title": errno_of(lambda: (directory / "title").write_text("t")),
        "ctl": errno_of(lambda: (directory / "ctl").write_text("flush\n")),
        "leaf": errno_of(lambda: os.symlink(f"entries/{u1}.json", directory / "leaf.tmp")),
        "rm leaf": errno_of(lambda: os.unlink(directory / "leaf")),
        "label": errno_of(lambda: os.symlink(f"../entries/{u1}.json", directory / "labels" / "x")),
    }
    assert refused == dict.fromkeys(refused, errno.EBUSY)
    assert "an agent is running on this session" in read_ctl(directory)["last_error"]
    # Reading is never blocked: renderings, ctl, a non-blocking read of send. The agent
    # (a new Python process) appends the prompt once it has started, which on a loaded
    # machine can be after all of the above: wait for that on disk, then for the mount
    # to show it (a read serves what it checked up to 0.2 s ago; 2 s leaves room for a
    # loaded machine). The agent then sleeps 3 s more, and the non-blocking read of
    # send below proves it was still running.
    wait_for(lambda: "slow one" in message_texts(session_file))
    wait_for(lambda: "slow one" in (directory / "transcript.md").read_text(), 2)
    fd = os.open(directory / "send", os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert os.read(fd, 4096).decode().startswith(f"running pid {pid} since ")
    finally:
        os.close(fd)
    assert (directory / "send").read_text().startswith("exit 0 after ")  # waits for it
    assert not process_exists(pid)
    assert read_ctl(directory)["send"] == "idle"
    assert message_texts(session_file)[-2:] == ["slow one", "answer to slow one"]  # no mix


def test_a_reader_waits_without_holding_up_other_requests(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory, "--sleep", "4")
    (directory / "transcript.md").read_text()  # rendered once: what follows is a read
    write_send(directory, b"wait for me")
    readers = [
        subprocess.Popen(["cat", str(directory / "send")], stdout=subprocess.PIPE)
        for _ in range(20)  # more than the mount lets wait (16): the rest get EAGAIN
    ]
    on_disk = wait_for(lambda: b"wait for me" in session_file.read_bytes())
    shown = wait_for(lambda: "wait for me" in (directory / "transcript.md").read_text())
    assert shown - on_disk < 1.5  # the agent's append shows while readers wait
    assert read_ctl(directory)["send"].startswith("running pid ")
    outputs = [reader.communicate(timeout=30)[0].decode() for reader in readers]
    assert sum(out.startswith("exit 0 after ") for out in outputs) == 16
    assert [reader.returncode for reader in readers].count(1) == 4  # EAGAIN, not waiting


def test_bad_prompts_are_refused_with_the_reason_in_ctl(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory)
    size = session_file.stat().st_size
    cases = {
        b"\n": (errno.EINVAL, "the prompt is empty"),
        b"\xff\xfe": (errno.EINVAL, "not UTF-8"),
        b"a\0b": (errno.EINVAL, "NUL"),
        b"x" * (1024 * 1024 + 1): (errno.EFBIG, "at most 1048576 bytes"),
        b"y" * (200 * 1024): (errno.E2BIG, "one argument"),
    }
    for data, (code, reason) in cases.items():
        assert errno_of(lambda data=data: write_send(directory, data)) == code
        assert reason in read_ctl(directory)["last_error"]
    assert session_file.stat().st_size == size  # nothing ran, nothing was written
    assert (directory / "send").read_text() == "no run yet\n"


def test_status_lines_of_failed_and_timed_out_runs(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    _, directory, _ = mount_with_agent(tmp_path, mount_factory, "--exit", "3")
    status = run("sh", "-c", "echo hi > send; cat send", cwd=directory)
    assert status.startswith("failed: exit 3 after "), status

    _, slow_dir, slow_file = mount_with_agent(
        tmp_path, mount_factory, "--sleep", "60", extra=("--send-timeout", "1"), name="slow"
    )
    status = run("sh", "-c", "echo hi > send; cat send", cwd=slow_dir)
    assert status == "timed out after 1 s (--send-timeout)\n"
    assert check_errors(slow_file) == []


def test_send_log_keeps_the_tail_of_big_output_in_a_private_file(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, directory, _ = mount_with_agent(tmp_path, mount_factory, "--spam", str(3 * 1024 * 1024))
    run("sh", "-c", "echo hi > send; cat send", cwd=directory)
    log = (directory / "send.log").read_bytes()
    assert len(log) == os.stat(directory / "send.log").st_size == 1024 * 1024
    assert log.endswith(b"}\n") and b'"context"' in log  # the tail: the agent's last line
    cache = mount.path.parent / f"{mount.path.name}.cache"
    (on_disk,) = cache.rglob("send-logs/*.log")
    assert on_disk.stat().st_mode & 0o777 == 0o600
    assert on_disk.parent.stat().st_mode & 0o777 == 0o700
    assert on_disk.stat().st_size == 1024 * 1024  # cut once the run ended
    assert not any(mount.agent_dir.rglob("*.log"))


def test_a_running_agent_cannot_fill_the_disk_with_output(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, directory, session_file = mount_with_agent(
        tmp_path, mount_factory, "--spam", str(6 * 1024 * 1024), "--sleep", "4"
    )
    start_run(directory, session_file, "chatty")  # it has printed its 6 MiB by then
    cache = mount.path.parent / f"{mount.path.name}.cache"
    (on_disk,) = cache.rglob("send-logs/*.log")
    wait_for(lambda: on_disk.stat().st_blocks * 512 <= 2 * 1024 * 1024 + 64 * 1024, 10)
    assert on_disk.stat().st_size == 6 * 1024 * 1024  # still growing in place: a hole
    tail = (directory / "send.log").read_bytes()
    assert tail == b"x" * (1024 * 1024 - 1) + b"\n"
    assert (directory / "send").read_text().startswith("exit 0 after ")


def test_the_agent_runs_in_the_header_cwd_with_placeholders_filled(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, session_file = make_agent(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    header, *rest = session_file.read_bytes().splitlines(keepends=True)
    fixed = json.loads(header) | {"cwd": str(project)}
    session_file.write_bytes(json.dumps(fixed).encode() + b"\n" + b"".join(rest))
    script = tmp_path / "args.py"
    script.write_text("import os, sys, json; print(json.dumps([os.getcwd(), *sys.argv[1:]]))\n")
    mount = mount_factory(
        agent_dir, "--agent-cmd", f"{sys.executable} {script} {{cwd}} '{{session}}'"
    )
    directory = session_dir(mount, session_file)
    run("sh", "-c", "echo 'it'\"'\"'s $(not) a shell' > send; cat send", cwd=directory)
    seen = json.loads((directory / "send.log").read_text())
    assert seen == [str(project), str(project), str(session_file), "it's $(not) a shell"]


def test_without_an_agent_send_is_eopnotsupp(
    tmp_path: Path, mount_factory: MountFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_dir, session_file = make_agent(tmp_path)
    only_fuse = tmp_path / "bin"  # the daemon inherits PATH: fusermount3, no xcsh/omp/pi
    only_fuse.mkdir()
    fusermount = shutil.which("fusermount3")
    assert fusermount is not None
    (only_fuse / "fusermount3").symlink_to(fusermount)
    monkeypatch.setenv("PATH", str(only_fuse))
    monkeypatch.delenv("SESSIONFS_AGENT_CMD", raising=False)
    mount = mount_factory(agent_dir)
    directory = session_dir(mount, session_file)
    assert errno_of(lambda: write_send(directory, b"hello")) == errno.EOPNOTSUPP
    assert "none of xcsh, omp, pi is on PATH" in read_ctl(directory)["last_error"]


def test_an_agent_that_cannot_start_fails_the_write_and_says_why(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent_dir, session_file = make_agent(tmp_path)
    mount = mount_factory(agent_dir, "--agent-cmd", f"{tmp_path}/no-such-agent {{session}}")
    directory = session_dir(mount, session_file)
    u1 = file_objects(session_file)[1]["id"]
    run("ln", "-sfn", f"entries/{u1}.json", "leaf", cwd=directory)
    size = session_file.stat().st_size
    assert errno_of(lambda: write_send(directory, b"hello")) == errno.ENOENT
    assert "cannot start" in read_ctl(directory)["last_error"]
    assert session_file.stat().st_size == size  # not even the branch point
    assert (directory / "send").read_text() == "no run yet\n"
    assert read_ctl(directory)["send"] == "idle"


def test_without_agent_cmd_the_agent_owning_the_agent_dir_runs(
    tmp_path: Path, mount_factory: MountFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_dir, session_file = make_agent(tmp_path)
    (agent_dir / "models.json").write_text("{}")  # pi's model configuration: pi's dir
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("omp", "pi"):  # both on PATH: the owner is chosen, not the first
        script = bin_dir / name
        script.write_text(
            f'#!/bin/sh\necho "{name} $PI_CODING_AGENT_DIR $*"\n'
            f'exec {sys.executable} {FAKE_AGENT} "$2" "$4"\n'
        )
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "/not/the/mounted/dir")
    monkeypatch.delenv("SESSIONFS_AGENT_CMD", raising=False)
    mount = mount_factory(agent_dir)
    directory = session_dir(mount, session_file)
    assert run("sh", "-c", "echo hello > send; cat send", cwd=directory).startswith("exit 0")
    first = (directory / "send.log").read_text().splitlines()[0]
    assert first == f"pi {agent_dir} --session {session_file} -p hello"
    assert message_texts(session_file)[-2:] == ["hello", "answer to hello"]


def test_send_on_a_read_only_mount_is_erofs(tmp_path: Path, mount_factory: MountFactory) -> None:
    _, directory, session_file = mount_with_agent(tmp_path, mount_factory, extra=("--read-only",))
    size = session_file.stat().st_size
    assert errno_of(lambda: write_send(directory, b"hello")) == errno.EROFS
    assert os.stat(directory / "send").st_mode & 0o222 == 0
    assert session_file.stat().st_size == size


PYTHON_C = (sys.executable, "-c")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_under_allow_other_only_the_owner_may_send(tmp_path: Path, public_dir: Path) -> None:
    agent_dir, session_file = make_agent(tmp_path / "agent")
    session_file.chmod(0o644)
    before = session_file.read_bytes()
    mount = start_mount(agent_dir, public_dir / "mnt", "--agent-cmd", command(), "--allow-other")
    try:
        directory = session_dir(mount, session_file)
        probe = (
            "import os\n"
            f"print(len(open({str(directory / 'transcript.md')!r}, 'rb').read()) > 0)\n"
            f"try:\n os.open({str(directory / 'send')!r}, os.O_WRONLY)\n"
            "except OSError as e:\n print(e.errno)"
        )
        nobody = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *PYTHON_C, probe],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        # (a failure says why: the probe's traceback and the end of the daemon's log)
        assert nobody.returncode == 0, f"{nobody.stderr}\n{mount.log.read_text()[-3000:]}"
        # The other uid reaches and reads the (0644) session, so the refusal is send's:
        # the kernel refuses first (send is 0644 at most, default_permissions); the
        # daemon's own uid check behind it: test_ops_refuses_send_to_another_uid
        assert nobody.stdout.split() == ["True", str(errno.EACCES)]
        assert session_file.read_bytes() == before  # nothing ran, nothing was appended
    finally:
        mount.unmount()


def test_ops_refuses_send_to_another_uid() -> None:
    class FakeSend(FileNode):
        owner_only_writes = True

        async def open(self, flags: int) -> OpenFile:
            return OpenFile()

    ops = SessionFsOperations(DirNode(cast(MountContext, None), ()), read_only=False)
    node = FakeSend(cast(MountContext, None), ("send",))

    class Ctx:
        uid = ops.uid + 1

    with pytest.raises(WriteRejected) as refused:
        trio.run(ops._open_for_writing, node, os.O_WRONLY, Ctx())
    assert refused.value.errno == errno.EACCES
    assert "only the user who mounted" in refused.value.reason
    Ctx.uid = ops.uid
    assert isinstance(trio.run(ops._open_for_writing, node, os.O_WRONLY, Ctx()), OpenFile)


def mount_running(
    tmp_path: Path, mount_factory: MountFactory, sleep: str, grace: str, prompt: str
) -> tuple[Mount, Path, int]:
    """A mount with the fake agent answering ``prompt`` after ``sleep`` s, started;
    (mount, session file, agent pid)."""
    mount, directory, session_file = mount_with_agent(
        tmp_path, mount_factory, "--sleep", sleep, extra=("--send-grace", grace)
    )
    return mount, session_file, start_run(directory, session_file, prompt)


def test_unmount_during_a_run_waits_then_stops_the_agent(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, session_file, pid = mount_running(tmp_path, mount_factory, "60", "1", "never answered")
    started = time.monotonic()
    subprocess.run(["fusermount3", "-u", str(mount.path)], check=True, timeout=30)
    mount.process.wait(timeout=20)
    assert 1 <= time.monotonic() - started < 15
    assert not process_exists(pid)
    assert message_texts(session_file)[-1] == "never answered"  # written before it stopped
    assert check_errors(session_file) == []
    assert "stopped at unmount" in mount.log.read_text()


def test_sigterm_of_the_daemon_lets_a_short_run_finish(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, session_file, pid = mount_running(tmp_path, mount_factory, "1.5", "20", "finish me")
    mount.process.send_signal(signal.SIGTERM)
    assert mount.process.wait(timeout=20) == 0
    assert not os.path.ismount(mount.path)
    assert not process_exists(pid)
    assert message_texts(session_file)[-2:] == ["finish me", "answer to finish me"]


def test_a_killed_daemon_leaves_the_agent_to_finish(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, directory, session_file = mount_with_agent(tmp_path, mount_factory, "--sleep", "1.5")
    pid = start_run(directory, session_file, "on my own")
    mount.process.kill()
    mount.process.wait(timeout=10)
    subprocess.run(["fusermount3", "-u", "-z", str(mount.path)], check=False, timeout=30)
    assert process_exists(pid)  # not stopped with the daemon: it finishes on its own
    wait_for(lambda: message_texts(session_file)[-1] == "answer to on my own")


def test_subagent_sessions_have_send_too(tmp_path: Path, mount_factory: MountFactory) -> None:
    mount, directory, session_file = mount_with_agent(tmp_path, mount_factory)
    artifacts = session_file.with_suffix("")
    artifacts.mkdir()
    (artifacts / "task-1.jsonl").write_bytes(session_file.read_bytes().splitlines(keepends=True)[0])
    sub = directory / "subagents" / "task-1"
    run("sh", "-c", "echo 'sub prompt' > send; cat send", cwd=sub)
    (prompt, answer) = file_objects(artifacts / "task-1.jsonl")[1:]
    assert texts(prompt) == "sub prompt" and prompt["parentId"] is None
    assert texts(answer) == "answer to sub prompt"
    assert read_ctl(directory)["send"] == "idle"  # the parent session was never busy
    del mount


def test_sessionfs_umount_returns_once_no_agent_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_dir, session_file = make_agent(tmp_path)
    monkeypatch.setenv("SESSIONFS_AGENT_CMD", command("--sleep", "60"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with background_mount(agent_dir, tmp_path, monkeypatch) as (mountpoint, mounted):
        assert mounted.returncode == 0, mounted.stderr
        directory = mountpoint / "sessions" / PROJECT / session_file.stem
        pid = start_run(directory, session_file, "stopped by umount")
        started = time.monotonic()
        done = sessionfs("umount", mountpoint)
        assert done.returncode == 0, done.stderr
        assert not process_exists(pid)  # the daemon waited (grace), then stopped it
        assert time.monotonic() - started >= 4  # the default --send-grace, 5 s
        assert not os.path.ismount(mountpoint)
    assert message_texts(session_file)[-1] == "stopped by umount"
    assert check_errors(session_file) == []


def test_a_second_sigterm_stops_the_agents_at_once(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    mount, session_file, pid = mount_running(tmp_path, mount_factory, "60", "60", "impatient")
    mount.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert process_exists(pid) and os.path.ismount(mount.path)  # the grace period runs
    started = time.monotonic()
    mount.process.send_signal(signal.SIGTERM)
    assert mount.process.wait(timeout=20) == 0
    assert time.monotonic() - started < 10  # not the 60 s grace
    assert not process_exists(pid)
    assert message_texts(session_file)[-1] == "impatient"
