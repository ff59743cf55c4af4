"""Fault suite: whole-file rewrites while a real agent process appends to the same file.

The agent (tests/agent_simulator.py, a subprocess) appends by path at ~500 lines/s,
like Node's appendFileSync, while every rewriting operation runs again and again. No
agent line may be lost or reordered, every line must stay valid JSON, and every line a
rewrite has no reason to touch (a 600,000-char tool result another tool stored, an
entry with partialJson, a malformed line, odd spacing) must keep its exact bytes. An
agent that keeps its descriptor open makes the rewrite refuse with SessionBusyError.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.agent_simulator import agent_line, agent_numbers, running_agent

from core import FileSessionStorage, MemorySessionStorage, SessionManager, rewrite
from core.check import fix_file
from core.rewrite import SessionBusyError, rewrite_file

RATE = 500  # lines per second, as an agent streaming tool output
SESSION_ID = "rewrite-safety"

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fdinfo").is_dir(), reason="writer detection needs Linux /proc"
)


# ---------------------------------------------------------------------------- files


def _entry(n: int, parent: str | None, **body: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"e{n:07d}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
        **body,
    }


def stored_lines() -> list[bytes]:
    """Lines written by other tools that no rewrite may touch (no newline)."""
    big = _entry(
        3,
        "e0000002",
        message={"role": "toolResult", "content": "x" * 600_000, "lineCount": 1, "timestamp": 3},
    )
    partial = _entry(
        4,
        "e0000003",
        message={
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c", "name": "n", "partialJson": '{"a'}],
            "provider": "p",
            "model": "m",
            "timestamp": 4,
        },
    )
    spaced = json.dumps(
        _entry(5, "e0000004", message={"role": "user", "content": "spaced", "timestamp": 5})
    ).encode()  # ", " and ": " separators: a re-serialised copy would differ
    return [orjson.dumps(big), orjson.dumps(partial), b"{not json at all", spaced]


def write_session(path: Path, *, version: int | None = 3) -> list[bytes]:
    """A session with the stored lines; returns them. ``version=None``: a v1 file
    (whose own entries have no ids, so migration has lines to change)."""
    header: dict[str, Any] = {
        "type": "session",
        "id": SESSION_ID,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/w",
    }
    if version is not None:
        header["version"] = version
    first = {"role": "user", "content": "hi", "timestamp": 1}
    second = {"role": "assistant", "content": [], "provider": "p", "model": "m", "timestamp": 2}
    if version is None:
        plain = [{"type": "message", "timestamp": "t", "message": m} for m in (first, second)]
    else:
        plain = [_entry(1, None, message=first), _entry(2, "e0000001", message=second)]
    specials = stored_lines()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"".join(orjson.dumps(o) + b"\n" for o in [header, *plain])
        + b"".join(line + b"\n" for line in specials)
    )
    return specials


def session_path(tmp_path: Path, name: str = "s") -> Path:
    return tmp_path / "agent" / "sessions" / "--w--" / f"2026-01-01T00-00-00-000Z_{name}.jsonl"


# ---------------------------------------------------------------------------- agent


agent = partial(running_agent, rate=RATE)


def finish(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"done"), "the simulated agent did not finish"


def assert_intact(data: bytes, specials: list[bytes], *, agent_lines: int | None = None) -> None:
    """Every stored line byte for byte, every other line JSON, agent lines in order."""
    lines = data.split(b"\n")
    assert lines[-1] == b""  # ends with a newline
    for special in specials:
        assert lines.count(special) == 1, special[:60]
    for line in lines[:-1]:
        if line != b"{not json at all":
            orjson.loads(line)
    numbers = agent_numbers(data)
    assert numbers == sorted(set(numbers)), "agent lines duplicated or out of order"
    if agent_lines is not None:
        assert numbers == list(range(agent_lines)), "agent lines lost"


def run_while_appending(
    path: Path, operations: list[Callable[[int], object]], count: int
) -> tuple[int, list[float]]:
    """Run the operations round-robin until the agent wrote ``count`` lines; returns
    (rewrites done, seconds per rewrite)."""
    times: list[float] = []
    with agent(path, count=count) as proc:
        while proc.poll() is None and len(times) < 400:
            for operation in operations:
                start = time.perf_counter()
                operation(len(times))
                times.append(time.perf_counter() - start)
            if agent_numbers(path.read_bytes())[-1:] == [count - 1]:
                break
        finish(proc)
    return len(times), times


# ---------------------------------------------------------------------------- tests


def test_title_and_rewrite_entries_while_an_agent_appends_lose_nothing(tmp_path: Path) -> None:
    path = session_path(tmp_path)
    specials = write_session(path)
    manager = SessionManager.open(path)

    def title(i: int) -> None:
        manager.set_session_name(f"title {i}", "user")

    def edit(i: int) -> None:
        entry = manager.get_entry("e0000001")
        assert entry is not None
        entry["message"]["content"] = f"edited {i}"
        manager.rewrite_entries()

    count = 600
    rewrites, _times = run_while_appending(path, [title, edit], count)
    data = path.read_bytes()
    assert rewrites >= 6
    assert_intact(data, specials, agent_lines=count)
    assert b'"edited ' in data and b'"title ' in data
    # Memory matches the file: every agent line became an entry, later appends chain on.
    manager.catch_up()
    assert all(manager.get_entry(f"a{n:07d}") is not None for n in range(count))
    new_id = manager.append_custom_entry("after", {"ok": True})
    manager.close()
    reloaded = SessionManager.open(path, browse=True)
    assert [e["id"] for e in reloaded.get_entries()] == [e["id"] for e in manager.get_entries()]
    assert reloaded.get_entry(new_id) is not None


def test_migration_on_first_write_and_check_fix_carry_agent_lines(tmp_path: Path) -> None:
    specials_seen = []
    for round_number in range(3):
        path = session_path(tmp_path, f"browse{round_number}")
        specials = write_session(path, version=None)
        manager = SessionManager.open(path, browse=True)
        assert manager.needs_rewrite
        with agent(path, count=150) as proc:
            time.sleep(0.05)
            manager.append_custom_entry("first-write", {"round": round_number})  # migrates
            assert not manager.needs_rewrite
            finish(proc)
        data = path.read_bytes()
        assert b'"version":3' in data.split(b"\n")[0]
        assert_intact(data, specials, agent_lines=150)
        specials_seen.append(specials)

        fixed = session_path(tmp_path, f"fix{round_number}")
        specials = write_session(fixed, version=None)
        with agent(fixed, count=150) as proc:
            time.sleep(0.05)
            report = fix_file(fixed)
            assert report.refused == [] and report.fixed
            finish(proc)
        assert_intact(fixed.read_bytes(), specials, agent_lines=150)
        assert SessionManager.open(fixed, browse=True).version == 3


def test_move_and_fork_while_an_agent_appends(tmp_path: Path) -> None:
    path = session_path(tmp_path)
    specials = write_session(path)
    path.chmod(0o600)
    manager = SessionManager.open(path)
    forks: list[str] = []
    with agent(path, count=300) as proc:
        time.sleep(0.1)
        fork = manager.fork(switch=False)
        assert fork is not None
        forks.append(fork)
        time.sleep(0.1)
        new_path = Path(str(manager.move_to("/elsewhere")))
        finish(proc)
    # The agent kept appending by the old path: after the move that is a new file.
    # Together the two hold every line, each exactly once, and the moved file holds
    # every line written before the move, untouched.
    moved = new_path.read_bytes()
    stray = path.read_bytes() if path.exists() else b""
    assert sorted(agent_numbers(moved) + agent_numbers(stray)) == list(range(300))
    assert_intact(moved, specials)
    assert agent_numbers(moved) == list(range(len(agent_numbers(moved))))
    assert b'"cwd":"/elsewhere"' in moved.split(b"\n")[0]
    assert os.stat(forks[0]).st_mode & 0o777 == 0o600  # a private session forks private
    assert os.stat(new_path).st_mode & 0o777 == 0o600


def test_a_writer_holding_the_file_open_makes_every_rewrite_refuse(tmp_path: Path) -> None:
    path = session_path(tmp_path)
    write_session(path)
    manager = SessionManager.open(path)
    with agent(path, mode="held", count=5) as proc:
        finish(proc)
        before = path.read_bytes()
        with pytest.raises(SessionBusyError) as caught:
            manager.set_session_name("refused", "user")
        assert caught.value.errno == 16 and str(proc.pid) in str(caught.value)
        assert manager.get_session_name() is None  # undone in memory too
        with pytest.raises(SessionBusyError):
            manager.rewrite_entries()
        with pytest.raises(SessionBusyError):
            manager.move_to("/elsewhere")
        assert manager.get_session_file() == str(path)
        report = fix_file(path)
        assert report.fixed == []  # a v3 file: nothing to fix, nothing rewritten
        assert path.read_bytes() == before
        assert manager.persist_error is None  # refused, not failed: later writes work
    manager.set_session_name("accepted", "user")
    assert agent_numbers(path.read_bytes()) == list(range(5))


def test_a_v1_file_held_open_is_not_migrated_by_fix(tmp_path: Path) -> None:
    path = session_path(tmp_path)
    write_session(path, version=None)
    with agent(path, mode="held", count=1) as proc:
        finish(proc)
        before = path.read_bytes()
        report = fix_file(path)
        assert any(f"pid {proc.pid}" in r for r in report.refused)
        assert path.read_bytes() == before


def test_new_sessions_take_the_mode_of_the_projects_sessions(tmp_path: Path) -> None:
    path = session_path(tmp_path)
    write_session(path)
    path.chmod(0o600)
    manager = SessionManager.create("/w", path.parent)
    manager.ensure_on_disk()
    created = manager.get_session_file()
    assert created is not None and os.stat(created).st_mode & 0o777 == 0o600
    source = SessionManager.open(path)
    extracted = source.create_branched_session("e0000002", switch=False)
    assert extracted is not None and os.stat(extracted).st_mode & 0o777 == 0o600
    forked = SessionManager.fork_from(path, "/other", tmp_path / "other")
    forked_file = forked.get_session_file()
    assert forked_file is not None and os.stat(forked_file).st_mode & 0o777 == 0o600


def test_memory_storage_rewrites_keep_lines_and_absorb_appends() -> None:
    storage = MemorySessionStorage()
    path = "/m/s.jsonl"
    specials = stored_lines()
    header = {"type": "session", "id": "m", "version": 3, "timestamp": "t", "cwd": "/w"}
    storage.write_bytes(path, orjson.dumps(header) + b"\n" + b"\n".join(specials) + b"\n")
    manager = SessionManager.open(path, storage=storage)
    with _appender(storage, path) as append:
        append(agent_line(0))
        manager.set_session_name("t", "user")
        append(agent_line(1))
    manager.rewrite_entries()
    data = storage.read_bytes(path)
    assert_intact(data, specials, agent_lines=2)
    assert manager.get_entry("a0000001") is not None


@contextmanager
def _appender(storage: MemorySessionStorage, path: str) -> Iterator[Callable[[bytes], None]]:
    writer = storage.open_writer(path, "a")
    try:
        yield writer.write
    finally:
        writer.close()


def test_the_carry_lease_makes_other_opens_wait_until_it_is_released(tmp_path: Path) -> None:
    # The lease that keeps a straddling writer's lines in order: while it is held, an
    # agent's next open() of the new file waits (so its line cannot overtake the carry).
    from core.rewrite import _hold_opens, _release_opens

    new_file = tmp_path / "new.jsonl"
    new_file.write_bytes(b"")
    fd = os.open(new_file, os.O_WRONLY | os.O_APPEND)
    try:
        assert _hold_opens(fd), "this file system grants no write lease"
        opener = subprocess.Popen(
            [sys.executable, "-c", f"open({str(new_file)!r}, 'ab').write(b'x\\n')"]
        )
        time.sleep(0.3)
        assert opener.poll() is None  # its open() is waiting for the lease
        os.write(fd, b"carried\n")
        _release_opens(fd)
        assert opener.wait(timeout=10) == 0
    finally:
        os.close(fd)
    assert new_file.read_bytes() == b"carried\nx\n"


def test_a_writer_still_inside_open_after_the_rename_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rare "agent lines lost" under CPU load: the agent's open() of the path had to
    # wait in the kernel (a lease break: the previous rewrite's write lease on this very
    # file) and, once let go, was not scheduled again before the next rewrite had
    # renamed and ended its carry. Such an open already counts as a writer of the inode
    # (no read lease is granted on it) but has no descriptor in /proc yet, so the scan
    # saw nobody and the line went to the replaced inode. A read lease the test holds
    # keeps the agent's open() waiting in the same way, from just before the rename
    # (after the busy checks, which would wait for it) until 0.2 s after it.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session"}\n')
    storage = FileSessionStorage()
    rename = storage.rename
    agents: list[subprocess.Popen[bytes]] = []
    with _lease_gate(path, let_go_after=0.2) as (gate, let_go):

        def open_then_rename_then_let_go(source: str, destination: str) -> None:
            agents.append(_opener_held_by_lease(path, gate, b'{"late":1}\n'))
            rename(source, destination)
            let_go.start()

        monkeypatch.setattr(storage, "rename", open_then_rename_then_let_go)
        rewrite_file(storage, path, lambda data: data)
        assert agents[0].wait(timeout=10) == 0
    assert path.read_bytes() == b'{"type":"session"}\n{"late":1}\n'


@contextmanager
def _lease_gate(path: Path, let_go_after: float) -> Iterator[tuple[int, threading.Timer]]:
    """A read lease the test holds on ``path`` (an open() for writing then waits for
    it) and a timer, not started, that releases it ``let_go_after`` seconds after
    ``start()``; both undone on the way out."""
    from core.rewrite import _release_opens, _take_lease

    gate = os.open(path, os.O_RDONLY)
    let_go = threading.Timer(let_go_after, _release_opens, (gate,))
    try:
        assert _take_lease(gate, fcntl.F_RDLCK) is None, "this file system grants no lease"
        yield gate, let_go
    finally:
        let_go.cancel()
        if let_go.is_alive():
            let_go.join()
        _release_opens(gate)
        os.close(gate)


def _opener_held_by_lease(
    path: Path, gate: int, line: bytes, keep_open: bool = False
) -> subprocess.Popen[bytes]:
    """A process that opens ``path`` for appending, writes ``line`` and closes it (or,
    ``keep_open``, keeps it open as an agent mid-run does), returned once its open() is
    held up by the read lease the caller holds on ``gate``."""
    script = (
        "import os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
        f"os.write(fd, {line!r})\n" + ("time.sleep(60)\n" if keep_open else "os.close(fd)\n")
    )
    opener = subprocess.Popen([sys.executable, "-c", script, str(path)])
    waited = time.monotonic() + 10
    while fcntl.fcntl(gate, fcntl.F_GETLEASE) != fcntl.F_UNLCK:  # its open() waits
        assert opener.poll() is None and time.monotonic() < waited
        time.sleep(0.005)
    return opener


def test_a_writer_inside_open_when_a_rewrite_starts_is_waited_for_then_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent starting a run opens the file for good; caught inside its open() (no
    # descriptor in /proc yet), it was taken for nobody: the rewrite went ahead, and
    # the lines the agent wrote after the carry ended went to the replaced inode. The
    # read lease it blocks is its trace: the rewrite waits for it, sees it, refuses.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session"}\n')
    before = path.read_bytes()
    # The agent's open() is let go once the rewrite has found it waiting there, and it
    # then has 1 s, not BUSY_RETRY_SECONDS (0.3 s), to show in /proc: a loaded machine
    # may not run it (nor a timer thread of this process) again within 0.3 s, and the
    # rewrite is then refused naming no pid (with a 0.1 s timer, 6 runs in 10 so when
    # this process was stopped 0.35 s every 0.08 s).
    monkeypatch.setattr(rewrite, "BUSY_RETRY_SECONDS", 1.0)
    refused_for_another_writer = rewrite._refused_for_another_writer
    agent = None
    try:
        with _lease_gate(path, let_go_after=0.1) as (gate, _timer):

            def found_then_let_go(refusal: OSError, st: os.stat_result) -> bool:
                found = refused_for_another_writer(refusal, st)
                if found:
                    rewrite._release_opens(gate)
                return found

            monkeypatch.setattr(rewrite, "_refused_for_another_writer", found_then_let_go)
            agent = _opener_held_by_lease(path, gate, b'{"agent":1}\n', keep_open=True)
            with pytest.raises(SessionBusyError) as refused:
                rewrite_file(FileSessionStorage(), path, lambda data: data + b'{"new":1}\n')
            assert refused.value.pids == (agent.pid,)
            assert f"pid {agent.pid}" in str(refused.value)
    finally:
        if agent is not None:
            agent.kill()
            agent.wait()
    assert path.read_bytes() == before + b'{"agent":1}\n'  # untouched by the rewrite


def test_our_own_descriptor_on_the_file_does_not_hold_the_carry_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Our own write descriptors refuse the read lease the carry ends with, as another
    # process's would; they never count as a writer to wait for (another session of
    # this process may have the file open), so the /proc scan decides then.
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session"}\n')
    own = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        with caplog.at_level("WARNING", logger="core.rewrite"):
            rewrite_file(FileSessionStorage(), path, lambda data: data + b'{"new":1}\n')
    finally:
        os.close(own)
    assert path.read_bytes() == b'{"type":"session"}\n{"new":1}\n'
    assert "giving up" not in caplog.text


def _leases_on(file: Path) -> list[str]:
    """The lines of /proc/locks that are leases on ``file``'s inode."""
    inode = f":{os.stat(file).st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return [line for line in lines if "LEASE" in line and inode in line]


def test_the_quick_probe_leaves_no_lease_behind(tmp_path: Path) -> None:
    # `seems_unshared` lets its read lease go by closing its descriptor (no separate
    # release call): nothing is left that would make a writer's open() wait for a lease
    # break, and a descriptor open for writing (ours included) is still seen.
    from core.rewrite import seems_unshared

    file = tmp_path / "s.jsonl"
    file.write_bytes(b"{}\n")
    assert seems_unshared(file)
    assert _leases_on(file) == []
    with open(file, "ab") as writer:
        writer.write(b"x\n")
        writer.flush()
        assert not seems_unshared(file)
    assert seems_unshared(file)
    assert _leases_on(file) == []
    assert file.read_bytes() == b"{}\nx\n"
