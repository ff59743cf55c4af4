"""The sync engine against a real S3-compatible server (SeaweedFS on loopback).

Each test ships real agent dirs with ``python -m sessionfs.store.command sync`` (the
command a user runs) and reads the store back with the mirror the read-only mount serves.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from store_helpers import (
    SYNC_TIMEOUT,
    S3Server,
    add_blob,
    make_agent_dir,
    mirrored_files,
    run_sync,
    shipped_files,
    store_bytes,
    sync_command,
)

from core.rewrite import rewrite_file
from core.storage import FileSessionStorage
from sessionfs.store.client import AlreadyExists
from sessionfs.store.mirror import StoreMirror

SHARED_BLOB = b"a screenshot both machines attached" * 40


def _session_files(agent: Path) -> list[Path]:
    return sorted((agent / "sessions").glob("*/*.jsonl"))


def _small_agent(tmp_path: Path) -> Path:
    """An agent dir of one small session (project ``--p--``) and the shared blob."""
    return make_agent_dir(
        tmp_path, fixture="pi-v1-before-compaction.jsonl", project="--p--",
        shared_blob=SHARED_BLOB,
    )  # fmt: skip


def _mirrored_session(mirror: StoreMirror, agent: Path, session: Path) -> Path:
    """Where machine ``m``'s copy of ``agent``'s ``session`` lands in the mirror."""
    return mirror.machine_dir("m") / "sessions" / session.relative_to(agent / "sessions")


def _line(n: int, size: int = 200) -> bytes:
    entry = {"type": "custom", "id": f"{n:08x}", "parentId": None, "data": "x" * size}
    return orjson.dumps(entry) + b"\n"


def test_seaweedfs_honours_if_none_match(s3_server: S3Server, store_prefix: str) -> None:
    """The store's one promise we build on: a conditional create refuses all but one."""
    client = s3_server.client(store_prefix)
    key = f"{store_prefix}/race"

    def create(n: int) -> bool:
        try:
            client.put_if_absent(key, f"writer {n}".encode())
        except AlreadyExists:
            return False
        return True

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        won = list(pool.map(create, range(8)))
    assert won.count(True) == 1
    assert client.get(key, 100) == f"writer {won.index(True)}".encode()
    with pytest.raises(AlreadyExists):
        client.put_if_absent(key, b"again")


def test_two_machines_mirror_byte_identical(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    laptop = make_agent_dir(
        tmp_path / "laptop", fixture="pi-v1-large-session.jsonl", project="--work-a--",
        shared_blob=SHARED_BLOB,
    )  # fmt: skip
    ci = make_agent_dir(
        tmp_path / "ci", fixture="pi-v1-before-compaction.jsonl", project="--work-b--",
        shared_blob=SHARED_BLOB,
    )  # fmt: skip
    for agent, machine in ((laptop, "laptop"), (ci, "ci-runner")):
        done = run_sync(s3_server, store_prefix, agent, machine, tmp_path / f"state-{machine}")
        assert done.returncode == 0, done.stderr

    mirror = s3_server.mirror(store_prefix, tmp_path / "cache")
    result = mirror.refresh()
    assert result.machines == ["ci-runner", "laptop"] and not result.partial
    assert mirrored_files(mirror, "laptop") == shipped_files(laptop)
    assert mirrored_files(mirror, "ci-runner") == shipped_files(ci)
    # The shared blob is one object in the store, one file in the cache.
    blob_keys = [item.key for item in s3_server.client(store_prefix).list(f"{store_prefix}/blobs/")]
    assert len(blob_keys) == 3
    assert mirror.refresh().bytes_fetched == 0  # nothing new: nothing fetched


def test_incremental_sync_ships_about_the_appended_bytes(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = make_agent_dir(
        tmp_path, fixture="pi-v1-large-session.jsonl", project="--work-a--",
        shared_blob=SHARED_BLOB,
    )  # fmt: skip
    state = tmp_path / "state"
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    before = store_bytes(s3_server, store_prefix)

    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    assert store_bytes(s3_server, store_prefix) == before  # unchanged dir: nothing shipped

    appended = b"".join(_line(n) for n in range(50))
    with _session_files(agent)[0].open("ab") as session:
        session.write(appended)
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    assert store_bytes(s3_server, store_prefix) - before == len(appended)
    refreshed = mirror.refresh()
    assert refreshed.bytes_fetched == len(appended)  # the mirror appends just those too
    assert mirrored_files(mirror, "m") == shipped_files(agent)


def test_sync_loop_ships_appends_every_interval(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = _small_agent(tmp_path)
    command = sync_command(s3_server, store_prefix, agent, "m", tmp_path / "state")
    command[command.index("--once")] = "--interval=0.2"
    sync = subprocess.Popen(command, env=s3_server.env, stderr=subprocess.DEVNULL)
    mirror = s3_server.mirror(store_prefix, tmp_path / "cache")
    try:
        for n in range(3):  # an agent goes on appending; each line shows up on its own
            with _session_files(agent)[0].open("ab") as session:
                session.write(_line(n))
            deadline = time.monotonic() + 20
            while mirrored_files(mirror, "m") != shipped_files(agent):
                assert sync.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
                mirror.refresh()
    finally:
        sync.terminate()
        sync.wait(timeout=10)


def test_torn_last_line_is_shipped_only_once_complete(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = _small_agent(tmp_path)
    session = _session_files(agent)[0]
    whole = session.read_bytes()
    line = _line(1)
    with session.open("ab") as writer:
        writer.write(line[:50])  # the agent is half way through a line
    state = tmp_path / "state"
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    mirrored = _mirrored_session(mirror, agent, session)
    assert mirrored.read_bytes() == whole

    with session.open("ab") as writer:
        writer.write(line[50:])
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror.refresh()
    assert mirrored.read_bytes() == whole + line


def test_title_rewrite_goes_up_as_a_new_generation(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = _small_agent(tmp_path)
    session = _session_files(agent)[0]
    state = tmp_path / "state"
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    mirrored = _mirrored_session(mirror, agent, session)
    inode_before = mirrored.stat().st_ino

    def retitle(content: bytes) -> bytes:
        header, _, rest = content.partition(b"\n")
        return orjson.dumps({**orjson.loads(header), "title": "Renamed by the user"}) + b"\n" + rest

    rewrite_file(FileSessionStorage(), session, retitle)  # the real temp + rename rewrite
    assert run_sync(s3_server, store_prefix, agent, "m", state).returncode == 0
    keys = [item.key for item in s3_server.client(store_prefix).list(f"{store_prefix}/machines/")]
    assert any("/g00000002/" in key for key in keys)
    mirror.refresh()
    assert mirrored.read_bytes() == session.read_bytes()
    assert b"Renamed by the user" in mirrored.read_bytes().split(b"\n")[0]
    assert mirrored.stat().st_ino != inode_before  # replaced whole, never edited in place


def test_sigkill_mid_upload_leaves_a_clean_prefix_then_completes(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = tmp_path / "agent"
    session = agent / "sessions" / "--big--" / "big.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(b"".join(_line(n, size=int(1000 + n % 7 * 300)) for n in range(30_000)))
    state = tmp_path / "state"
    command = sync_command(
        s3_server, store_prefix, agent, "m", state, "--segment-mb", "0.25", "--jobs", "1"
    )
    client = s3_server.client(store_prefix)
    segments_prefix = f"{store_prefix}/machines/m/sessions/"
    sync = subprocess.Popen(command, env=s3_server.env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SYNC_TIMEOUT
        while len(list(client.list(segments_prefix))) < 5:
            assert sync.poll() is None, "the sync ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        sync.send_signal(signal.SIGKILL)
    finally:
        sync.kill()
        sync.wait(timeout=10)

    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    mirrored = mirror.machine_dir("m") / "sessions" / "--big--" / "big.jsonl"
    partial, full = mirrored.read_bytes(), session.read_bytes()
    assert 0 < len(partial) < len(full)
    assert full.startswith(partial) and partial.endswith(b"\n")

    done = run_sync(s3_server, store_prefix, agent, "m", state, "--segment-mb", "0.25")
    assert done.returncode == 0, done.stderr
    mirror.refresh()
    assert mirrored.read_bytes() == full
    assert store_bytes(s3_server, f"{store_prefix}/machines/m/sessions") == len(full)


def test_conflicting_syncs_of_one_machine_name_refuse_the_loser(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    """Two hosts, one machine name, started at once: one claims it, the other is refused."""
    agents = [
        make_agent_dir(
            tmp_path / name, fixture=fixture, project=f"--{name}--", shared_blob=SHARED_BLOB
        )
        for name, fixture in (
            ("one", "pi-v1-large-session.jsonl"),
            ("two", "pi-v1-before-compaction.jsonl"),
        )
    ]
    syncs = [
        subprocess.Popen(
            sync_command(s3_server, store_prefix, agent, "shared-name", tmp_path / f"state{n}"),
            env=s3_server.env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, agent in enumerate(agents)
    ]
    outcomes = [(sync.wait(timeout=SYNC_TIMEOUT), sync.stderr.read()) for sync in syncs]  # type: ignore[union-attr]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 3], outcomes
    winner = next(agent for agent, (code, _) in zip(agents, outcomes, strict=True) if code == 0)
    loser_message = next(message for code, message in outcomes if code == 3)
    assert "shared-name" in loser_message and "another sync" in loser_message

    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    assert mirrored_files(mirror, "shared-name") == shipped_files(winner)


def test_segment_race_with_a_copied_state_refuses_different_bytes(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    """Two syncs that both hold the claim (a copied state dir) race for the same segment
    key with different bytes after it: the second one's bytes are refused, none written."""
    agent = _small_agent(tmp_path)
    state_a, state_b = tmp_path / "state-a", tmp_path / "state-b"
    assert run_sync(s3_server, store_prefix, agent, "m", state_a).returncode == 0
    shutil.copytree(state_a, state_b)
    session = _session_files(agent)[0]
    synced = session.read_bytes()

    with session.open("ab") as writer:
        writer.write(_line(1, size=300))
    assert run_sync(s3_server, store_prefix, agent, "m", state_a).returncode == 0
    winner = session.read_bytes()
    with session.open("r+b") as writer:  # same inode, same shipped prefix, other new line
        writer.truncate(len(synced))
        writer.seek(len(synced))
        writer.write(_line(2, size=100))
    lost = run_sync(s3_server, store_prefix, agent, "m", state_b)
    assert lost.returncode == 3
    assert "different bytes" in lost.stderr

    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    mirrored = _mirrored_session(mirror, agent, session)
    assert mirrored.read_bytes() == winner


@contextmanager
def _forwarder(target_port: int, listen_port: int) -> Iterator[None]:
    """A loopback TCP forwarder: the store "comes back" when this starts listening."""
    server = socket.create_server(("127.0.0.1", listen_port))
    server.settimeout(0.2)
    stop = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            upstream = socket.create_connection(("127.0.0.1", target_port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_store_is_retried_with_backoff_until_it_answers(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = _small_agent(tmp_path)
    port = _closed_port()
    command = sync_command(
        s3_server, store_prefix, agent, "m", tmp_path / "state", "--backoff", "0.2",
        endpoint=f"http://127.0.0.1:{port}",
    )  # fmt: skip
    sync = subprocess.Popen(command, env=s3_server.env, stderr=subprocess.PIPE, text=True)
    assert sync.stderr is not None
    try:
        # Two retries seen (not a fixed sleep: a loaded machine starts Python slowly).
        early = [sync.stderr.readline() for _ in range(2)]
        assert all("retrying in" in line for line in early), early
        assert sync.poll() is None  # still retrying
        with _forwarder(int(s3_server.endpoint.rsplit(":", 1)[1]), port):
            code = sync.wait(timeout=SYNC_TIMEOUT)
    finally:
        sync.kill()
    log = "".join(early) + sync.stderr.read()
    assert code == 0, log
    delays = [float(part.split(" s")[0]) for part in log.split("retrying in ")[1:]]
    assert len(delays) >= 2 and delays[1] == 2 * delays[0]  # exponential
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    assert mirrored_files(mirror, "m") == shipped_files(agent)


def test_unreachable_store_fails_clearly_after_the_retry_budget(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    (agent / "sessions" / "--p--").mkdir(parents=True)
    (agent / "sessions" / "--p--" / "s.jsonl").write_bytes(_line(0))
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable, "-m", "sessionfs.store.command", "sync",
            "--store", "s3://bucket-x/p", "--endpoint-url", f"http://127.0.0.1:{_closed_port()}",
            "--machine", "m", "--agent-dir", str(agent), "--state-dir", str(tmp_path / "st"),
            "--once", "--no-agents", "--backoff", "0.1", "--retry-seconds", "1",
        ],
        capture_output=True, text=True, timeout=SYNC_TIMEOUT, env=env,
    )  # fmt: skip
    assert done.returncode == 75
    assert "unreachable" in done.stderr and "giving up" in done.stderr
    assert time.monotonic() - started < 20


def test_a_shared_blob_with_wrong_bytes_is_never_shipped(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    agent = _small_agent(tmp_path)
    good = add_blob(agent, b"good bytes")
    liar = "0" * 64
    (agent / "blobs" / liar).write_bytes(b"these bytes do not hash to zeros")
    assert run_sync(s3_server, store_prefix, agent, "m", tmp_path / "state").returncode == 0
    keys = {
        item.key.rsplit("/", 1)[1]
        for item in s3_server.client(store_prefix).list(f"{store_prefix}/blobs/")
    }
    assert good in keys and liar not in keys
