"""An agent appends to its session file while the mount rewrites it (real processes).

The simulated agent (tests/agent_simulator.py) appends by path at ~500 lines/s, the
way Node's appendFileSync does, while ``title`` is written again and again through the
mount, each write an atomic rewrite of a ~20,000-entry file. No agent line may be lost
or reordered. An agent that keeps its descriptor open makes ``title`` fail with EBUSY
(reason in ``ctl``), the file untouched. A 0600 session forks to a 0600 file.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from functools import partial
from pathlib import Path

import orjson
import pytest
from support.agent_simulator import agent_numbers, running_agent
from support.mount import Mount, MountFactory, run
from support.write_setup import PROJECT, drop, errno_of, read_ctl, session_dir

pytestmark = pytest.mark.fuse

RATE = 500
BIG_SESSION_ENTRIES = 20_000


def write_session(agent: Path, entries: int, *, v1: bool = False) -> Path:
    """A session of ``entries`` message entries, written directly (as an agent would)."""
    path = agent / "sessions" / PROJECT / "2026-01-01T00-00-00-000Z_race-session.jsonl"
    path.parent.mkdir(parents=True)
    header = {"type": "session", "id": "race-session", "timestamp": "2026-01-01T00:00:00.000Z"}
    header["cwd"] = "/work/demo"
    if not v1:
        header["version"] = 3
    lines = [orjson.dumps(header)]
    for n in range(entries):
        role = "user" if n % 2 == 0 else "assistant"
        message = {"role": role, "content": [{"type": "text", "text": f"message {n} " * 8}]}
        entry: dict[str, object] = {"type": "message", "timestamp": "t", "message": message}
        if not v1:
            entry |= {"id": f"m{n:07d}", "parentId": f"m{n - 1:07d}" if n else None}
        lines.append(orjson.dumps(entry))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


agent = partial(running_agent, rate=RATE)


def finished(proc: subprocess.Popen[bytes]) -> bool:
    assert proc.stdout is not None
    return proc.stdout.readline().startswith(b"done")


def test_title_rewrites_of_a_big_session_lose_no_agent_line(
    tmp_path: Path,
    mount_factory: MountFactory,
) -> None:
    agent_dir = tmp_path / "agent"
    file = write_session(agent_dir, BIG_SESSION_ENTRIES)
    mount: Mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    (d / "title").read_text()  # loaded once before the race
    count = 1000
    times: list[float] = []
    with agent(file, "by-path", count) as proc:
        while proc.poll() is None and agent_numbers(file.read_bytes())[-1:] != [count - 1]:
            start = time.perf_counter()
            run("sh", "-c", f"printf 'title {len(times)}\\n' > title", cwd=d)
            times.append(time.perf_counter() - start)
        assert finished(proc)
    data = file.read_bytes()
    assert agent_numbers(data) == list(range(count)), "agent lines lost or reordered"
    assert len(data.split(b"\n")) == 1 + BIG_SESSION_ENTRIES + count + 1
    assert orjson.loads(data.split(b"\n", 1)[0])["title"] == f"title {len(times) - 1}"
    assert len(times) >= 3
    print(
        f"\n[agent race] {count} agent lines, 0 lost, {len(times)} title rewrites of a "
        f"{BIG_SESSION_ENTRIES}-entry session, {1000 * sum(times) / len(times):.0f} ms each "
        f"(max {1000 * max(times):.0f} ms)"
    )


def test_first_append_migrates_a_v1_file_without_losing_agent_lines(
    tmp_path: Path,
    mount_factory: MountFactory,
) -> None:
    agent_dir = tmp_path / "agent"
    file = write_session(agent_dir, 2_000, v1=True)
    mount: Mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    (d / "title").read_text()  # browse-loaded: migrated in memory only
    with agent(file, "by-path", 200) as proc:
        time.sleep(0.1)
        run("sh", "-c", "printf 'from the mount' > append/note.txt", cwd=d)
        assert finished(proc)
    data = file.read_bytes()
    assert orjson.loads(data.split(b"\n", 1)[0])["version"] == 3
    assert agent_numbers(data) == list(range(200))
    assert b"from the mount" in data


def test_title_is_ebusy_while_an_agent_holds_the_file_open(
    tmp_path: Path,
    mount_factory: MountFactory,
) -> None:
    if not Path("/proc/self/fdinfo").is_dir():
        pytest.skip("writer detection needs Linux /proc")
    agent_dir = tmp_path / "agent"
    file = write_session(agent_dir, 50)
    mount: Mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    with agent(file, "held", 3) as proc:
        assert finished(proc)
        before = file.read_bytes()
        assert errno_of(lambda: drop(d, "title", b"refused\n")) == errno.EBUSY
        reason = read_ctl(d)["last_error"]
        assert "held open for writing" in reason and str(proc.pid) in reason
        assert file.read_bytes() == before
    drop(d, "title", b"accepted\n")  # works again once the agent is gone
    assert orjson.loads(file.read_bytes().split(b"\n", 1)[0])["title"] == "accepted"


def test_a_private_session_forks_private(
    tmp_path: Path,
    mount_factory: MountFactory,
) -> None:
    agent_dir = tmp_path / "agent"
    file = write_session(agent_dir, 10)
    file.chmod(0o600)
    mount: Mount = mount_factory(agent_dir)
    d = session_dir(mount, file)
    run("sh", "-c", "echo fork > ctl", cwd=d)
    forks = [p for p in file.parent.glob("*.jsonl") if p != file]
    assert len(forks) == 1
    assert os.stat(forks[0]).st_mode & 0o777 == 0o600
    assert os.stat(file).st_mode & 0o777 == 0o600
