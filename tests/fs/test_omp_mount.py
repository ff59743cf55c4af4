"""oh-my-pi 18's agent dir through a real mount, with files written in omp's format:
listed, read and grepped (slot, new entry types, sub-agents named like omp names them,
a blob with its hard-linked sidecar, transient lock/temp/backup names left out); a
title written as omp renames (only the slot bytes and one appended ``title_change``
line differ); writes into a file another process holds open are EBUSY with its pid in
``ctl``; omp's lock file is waited for; new files get a slot only in omp's agent dirs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.agent_messages import make_session
from support.mount import Mount, MountFactory, run, sessionfs
from support.omp_files import (
    OMP_SESSION_ID,
    SLOT_BYTES,
    conversation,
    entry,
    held_open,
    omp_header,
    slot_line,
    write_omp_session,
)
from support.waiting import search_ready
from support.write_setup import drop, errno_of, read_ctl, session_dir

from core.title_slot import split_title_slot

pytestmark = pytest.mark.fuse

PROJECT = "-work-app"
STEM = f"2026-11-20T10-00-00-000Z_{OMP_SESSION_ID}"


def omp_agent(root: Path) -> tuple[Path, Path]:
    """An omp agent dir: one slot session with a sub-agent and an advisor transcript in
    its artifacts dir, a blob and its sidecar, and the transient files omp leaves."""
    agent = root / "agent"
    project = agent / "sessions" / PROJECT
    file = write_omp_session(
        project / f"{STEM}.jsonl", conversation(), title="Listing files", source="auto"
    )
    artifacts = project / STEM
    for name, task in (("Anna", "look around"), ("Anna-2", "again"), ("Anna.Bob", "deeper")):
        init = entry("session_init", "s0000001", None, 20, systemPrompt="be brief", task=task,
                     tools=["read"], agent="scout")  # fmt: skip
        header = omp_header(f"sub-{name}", parentSession=str(file))
        write_omp_session(artifacts / f"{name}.jsonl", [init], title=name, header=header)
    write_omp_session(
        artifacts / "__advisor-1.jsonl", [], header=omp_header("advisor", parentSession=str(file))
    )
    for transient in (f".{STEM}.jsonl.lock", f".{STEM}.jsonl.0190abc.tmp", f"{STEM}.jsonl.bak"):
        (project / transient).write_bytes(file.read_bytes())
    blobs = agent / "blobs"
    blobs.mkdir()
    data = b"\x89PNG fake image"
    sha = hashlib.sha256(data).hexdigest()
    (blobs / sha).write_bytes(data)
    os.link(blobs / sha, blobs / f"{sha}.png")
    return agent, file


@pytest.fixture
def omp_mount(tmp_path: Path, mount_factory: MountFactory) -> tuple[Mount, Path, Path]:
    agent, file = omp_agent(tmp_path)
    return mount_factory(agent), agent, file


def test_an_omp_agent_dir_lists_reads_and_greps(omp_mount: tuple[Mount, Path, Path]) -> None:
    mount, agent, file = omp_mount
    assert run("ls", mount.path / "sessions" / PROJECT).split() == [STEM]
    d = session_dir(mount, file)
    assert run("cat", d / "title") == "Listing files\n"
    assert json.loads(run("cat", d / "header.json"))["title"] == "Listing files"
    assert sorted(run("ls", d / "entries").split()) == sorted(
        f"{e['id']}.json" for e in conversation()
    )
    kinds = {
        json.loads((d / "entries" / f"{e['id']}.json").read_text())["type"] for e in conversation()
    }
    assert {
        "title_change",
        "model_usage",
        "credential_pin",
        "mode_change",
        "ttsr_injection",
    } <= kinds
    assert os.readlink(d / "leaf") == "entries/e0000009.json"
    assert [m["role"] for m in json.loads(run("cat", d / "context.json"))["messages"]] == [
        "user",
        "assistant",
    ]
    hits = run("grep", "-rl", "How do I list files", mount.path / "transcripts").split()
    assert hits == [str(mount.path / "transcripts" / PROJECT / f"{STEM}.md")]
    assert sorted(run("ls", d / "subagents").split()) == [
        "Anna",
        "Anna-2",
        "Anna.Bob",
        "__advisor-1",
    ]
    assert run("cat", d / "subagents" / "Anna" / "title") == "Anna\n"
    assert "How do I list files" in run("cat", d / "transcript.html")
    assert "<title>Anna</title>" in run("cat", d / "subagents" / "Anna" / "transcript.html")
    assert os.path.realpath(mount.path / "by-id" / OMP_SESSION_ID) == str(d)
    assert os.path.realpath(mount.path / "recent" / "1") == str(d)
    assert run("ls", mount.path / "blobs").split() == [
        name for name in os.listdir(agent / "blobs") if "." not in name
    ]
    search_ready(mount.path)
    assert "How do I list files" in run("cat", mount.path / "search" / "list files")


def test_check_finds_the_omp_agent_dir_clean(tmp_path: Path) -> None:
    agent, file = omp_agent(tmp_path)
    # A young temp file is reported (a rewrite may be running); omp's are gone within
    # milliseconds. Lock and backup files are no sessions: nothing to report.
    next(file.parent.glob(".*.tmp")).unlink()
    checked = sessionfs("check", "--agent-dir", str(agent), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    checked_paths = {Path(r["path"]).name for r in json.loads(checked.stdout)["files"]}
    assert f"{STEM}.jsonl" in checked_paths and "Anna.jsonl" in checked_paths
    assert not any(name.endswith((".lock", ".bak")) for name in checked_paths)


def test_a_title_written_through_the_mount_is_renamed_as_omp_does(
    omp_mount: tuple[Mount, Path, Path],
) -> None:
    mount, _agent, file = omp_mount
    d = session_dir(mount, file)
    before = file.read_bytes()
    run("sh", "-c", "echo 'Find big files' > title", cwd=d)
    after = file.read_bytes()
    assert after[SLOT_BYTES : len(before)] == before[SLOT_BYTES:]
    added = after[len(before) :]
    assert added.count(b"\n") == 1 and added.endswith(b"\n")
    change = json.loads(added)
    assert (change["type"], change["title"], change["previousTitle"], change["source"]) == (
        "title_change", "Find big files", "Listing files", "user"
    )  # fmt: skip
    assert after[:SLOT_BYTES] == slot_line("Find big files", "user", change["timestamp"])
    assert run("cat", d / "title") == "Find big files\n"
    assert os.readlink(d / "leaf") == f"entries/{change['id']}.json"


def test_sed_i_and_append_rename_as_omp_does(omp_mount: tuple[Mount, Path, Path]) -> None:
    """An editor's save (``sed -i``: a scratch file renamed over ``title``) and ``>>`` are
    title writes like ``>``: the slot rewritten in place, one ``title_change`` added."""
    mount, _agent, file = omp_mount
    d = session_dir(mount, file)
    before = file.read_bytes()
    run("sed", "-i", "s/Listing/Counting/", "title", cwd=d)
    run("sh", "-c", "printf ' again' >> title", cwd=d)
    after = file.read_bytes()
    assert after[SLOT_BYTES : len(before)] == before[SLOT_BYTES:]
    changes = [json.loads(line) for line in after[len(before) :].splitlines()]
    assert [c["title"] for c in changes] == ["Counting files", "Counting files again"]
    assert run("cat", d / "title") == "Counting files again\n"
    assert not any(name.startswith("sed") for name in os.listdir(d))
    assert sorted(p.name for p in file.parent.iterdir() if p.name.startswith("sed")) == []


def test_writes_into_a_file_another_process_holds_open_are_ebusy(
    omp_mount: tuple[Mount, Path, Path], tmp_path: Path
) -> None:
    mount, _agent, file = omp_mount
    d = session_dir(mount, file)
    message = json.dumps({"role": "user", "content": "from the mount"}).encode()
    before = file.read_bytes()
    with held_open(file) as proc:
        assert errno_of(lambda: drop(d / "append", "m.json", message)) == errno.EBUSY
        reason = read_ctl(d)["last_error"]
        assert "held open for writing" in reason and str(proc.pid) in reason
        assert errno_of(lambda: os.symlink("../entries/e0000003.json", d / "labels" / "x")) == (
            errno.EBUSY
        )
        assert errno_of(lambda: drop(d, "title", b"Renamed\n")) == errno.EBUSY
        assert file.read_bytes() == before
    drop(d / "append", "m.json", message)  # works once the other process is gone
    assert file.read_bytes().startswith(before) and b"from the mount" in file.read_bytes()


def test_omps_lock_file_is_waited_for(omp_mount: tuple[Mount, Path, Path]) -> None:
    mount, _agent, file = omp_mount
    d = session_dir(mount, file)
    lock = file.parent / f".{file.name}.lock"
    lock.write_text(f"{os.getpid()}:{int(time.time() * 1000)}\n")  # a live holder
    message = json.dumps({"role": "user", "content": "locked out"}).encode()
    started = time.monotonic()
    assert errno_of(lambda: drop(d / "append", "m.json", message)) == errno.EBUSY
    assert time.monotonic() - started >= 0.45
    assert "publish lock" in read_ctl(d)["last_error"] and lock.exists()
    timer = threading.Timer(0.2, lock.unlink)
    timer.start()
    drop(d / "append", "m.json", json.dumps({"role": "user", "content": "waited"}).encode())
    timer.join()
    assert b"waited" in file.read_bytes() and not lock.exists()


def test_new_fork_and_extract_make_slot_files_only_in_omps_agent_dir(
    tmp_path: Path, mount_factory: MountFactory
) -> None:
    agent, omp_file = omp_agent(tmp_path / "omp")
    pi_agent = tmp_path / "pi" / "agent"
    pi_file = make_session(pi_agent, project="--work-demo--")
    for agent_dir, file, slotted in ((agent, omp_file, True), (pi_agent, pi_file, False)):
        mount = mount_factory(agent_dir, name=f"mnt-{slotted}")
        run("sh", "-c", "echo 'new /srv/fresh A new one' > ctl", cwd=mount.path)
        made = [Path(read_ctl(mount.path)["last_result"])]
        d = session_dir(mount, file)
        run("sh", "-c", "echo fork > ctl", cwd=d)
        made.append(Path(read_ctl(d)["last_result"]))
        first = os.listdir(d / "path")[0].split("-", 1)[1][: -len(".json")]
        run("sh", "-c", f"echo 'extract {first}' > ctl", cwd=d)
        made.append(Path(read_ctl(d)["last_result"]))
        for new_dir in made:
            header = json.loads((new_dir / "header.json").read_text())
            on_disk = next(agent_dir.glob(f"sessions/*/*{header['id']}.jsonl"))
            has_slot = split_title_slot(on_disk.read_bytes())[0] is not None
            assert has_slot is slotted, (new_dir, on_disk)


def test_make_run_finds_and_names_omps_agent_dir(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _agent, _file = omp_agent(home / ".omp")  # ~/.omp/agent, no ~/.xcsh
    mountpoint = tmp_path / "mnt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PI_", "OMP_", "XDG_"))}
    env["HOME"] = str(home)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        ["bash", "scripts/run.sh", str(mountpoint)],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    try:
        assert done.returncode == 0, done.stderr
        assert "mounted your oh-my-pi 18 agent dir" in done.stdout
        assert f"{home}/.omp/agent" in done.stdout
        assert run("ls", mountpoint / "sessions" / PROJECT).split() == [STEM]
    finally:
        subprocess.run([sys.executable, "-m", "sessionfs", "umount", str(mountpoint)], env=env)
