"""``sessionfs mount --store``: two machines shipped with the real ``sessionfs sync``,
mounted read-only from the store, compared file by file with local mounts of the same
agent dirs; appends show up; writes get EROFS; an unreachable store is served from the
cache and said so in ``ctl``."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
from store_helpers import SYNC_TIMEOUT, S3Server, make_agent_dir, sync_command
from support.agent_messages import make_session, user
from support.mount import Mount, fuse_available, sessionfs, start_mount

from core.manager import SessionManager

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.skipif(not fuse_available(), reason="FUSE is not available"),
]

MACHINES = ("alpha", "beta")
#: The issue's promise: a new object shows in the store mount within this.
APPEAR_WITHIN = 30.0
#: What a local mount renders per session, compared byte for byte.
RENDERED = ("header.json", "context.json", "transcript.md", "tree.txt")
#: The tests look for new objects every second (the default is 10 s).
REFRESH = ("--refresh-seconds", "1")


@dataclass
class Shipped:
    server: S3Server
    prefix: str
    agents: dict[str, Path]
    states: dict[str, Path]

    def sync(self, machine: str, endpoint: str | None = None) -> None:
        """``sessionfs sync --once``, the real command, as a user runs it."""
        command = sync_command(
            self.server,
            self.prefix,
            self.agents[machine],
            machine,
            self.states[machine],
            endpoint=endpoint,
        )
        command[command.index("sessionfs.store.command")] = "sessionfs"
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=SYNC_TIMEOUT, env=self.server.env
        )
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def shipped(s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Shipped:
    """Two machines shipped once for the module (the append test grows alpha's demo
    session; every comparison is with the agent dir as it is then)."""
    tmp_path = tmp_path_factory.mktemp("machines")
    store_prefix = f"store-mount-{uuid.uuid4().hex[:8]}"
    agents = {
        "alpha": make_agent_dir(
            tmp_path / "alpha",
            fixture="pi-v1-before-compaction.jsonl",
            project="--work-a--",
            shared_blob=b"shared",
        ),
        "beta": make_agent_dir(
            tmp_path / "beta",
            fixture="pi-v1-large-session.jsonl",
            project="--work-b--",
            shared_blob=b"shared",
        ),
    }
    make_session(agents["alpha"])  # a v3 session the append test grows
    states = {name: tmp_path / f"state-{name}" for name in agents}
    done = Shipped(s3_server, store_prefix, agents, states)
    for machine in agents:
        done.sync(machine)
    return done


def store_mount(
    shipped: Shipped, mountpoint: Path, cache: Path, endpoint: str | None = None
) -> Mount:
    url = shipped.server.store_url(shipped.prefix)
    endpoint = endpoint or shipped.server.endpoint
    # --agent-dir is the harness's; --store makes the mount ignore it.
    return start_mount(
        mountpoint.parent / "unused-agent",
        mountpoint,
        *("--store", url, "--endpoint-url", endpoint, "--cache-dir", str(cache), *REFRESH),
    )


@contextmanager
def mounted(mount: Mount) -> Iterator[Path]:
    try:
        yield mount.path
    finally:
        mount.unmount()


def session_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "sessions").glob("*/*") if p.is_dir())


def rendered_files(root: Path) -> dict[str, bytes]:
    """Every rendered file of every session, and every blob, by path below ``root``."""
    files: dict[str, bytes] = {}
    for session in session_dirs(root):
        paths = [session / name for name in RENDERED] + sorted((session / "entries").iterdir())
        for path in paths:
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    for blob in sorted((root / "blobs").iterdir()):
        files[blob.relative_to(root).as_posix()] = blob.read_bytes()
    return files


def ctl(root: Path) -> dict[str, str]:
    lines = (root / "ctl").read_text().splitlines()
    return dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in lines)


def test_each_machine_shows_the_bytes_of_a_local_mount(shipped: Shipped, tmp_path: Path) -> None:
    with mounted(store_mount(shipped, tmp_path / "store", tmp_path / "cache")) as store:
        assert sorted(os.listdir(store)) == ["README.md", "ctl", "machines", "recent", "search"]
        assert sorted(os.listdir(store / "machines")) == list(MACHINES)
        status = ctl(store)
        assert status["machines"] == "alpha beta"
        assert status["last_error"] == "" and status["last_refresh"]
        for machine in MACHINES:
            local_mount = start_mount(shipped.agents[machine], tmp_path / f"local-{machine}")
            with mounted(local_mount) as local:
                view = store / "machines" / machine
                assert sorted(os.listdir(view)) == sorted(
                    set(os.listdir(local)) - {"README.md", "ctl", "history", "search"}
                )
                expected = rendered_files(local)
                assert expected and rendered_files(view) == expected
                assert sorted(os.listdir(view / "by-id")) == sorted(os.listdir(local / "by-id"))
        assert_search_spans_every_machine(store)
        # Links stay inside the mount: root recent/ names a machine's session dir.
        newest = os.readlink(store / "recent" / "1")
        assert newest.startswith("../machines/")
        assert (store / "recent" / "1" / "header.json").read_bytes() == (
            store / "recent" / newest / "header.json"
        ).read_bytes()


def assert_search_spans_every_machine(store: Path) -> None:
    """Root ``search/<words>``: hits of both machines, each naming an entry file of the
    mount that holds the words."""
    deadline = time.monotonic() + APPEAR_WITHIN
    while not all(ctl(store).get(f"search_{m}", "").startswith("ready") for m in MACHINES):
        assert time.monotonic() < deadline, ctl(store)
        time.sleep(0.2)
    hits = [line.split("\t") for line in (store / "search" / "agnostic").read_text().splitlines()]
    assert {path.split("/")[1] for _, path, _, _ in hits} == set(MACHINES)
    assert [when for when, *_ in hits] == sorted((when for when, *_ in hits), reverse=True)
    (only_alpha,) = {
        path
        for _, path, _, _ in (
            line.split("\t")
            for line in (store / "search" / "first question").read_text().splitlines()
        )
    }
    assert only_alpha.startswith("machines/alpha/sessions/--work-demo--/")
    assert "first question" in (store / only_alpha).read_text()


def test_an_appended_line_appears_after_the_next_sync(shipped: Shipped, tmp_path: Path) -> None:
    session = next((shipped.agents["alpha"] / "sessions" / "--work-demo--").glob("*.jsonl"))
    with mounted(store_mount(shipped, tmp_path / "store", tmp_path / "cache")) as store:
        view = store / "machines" / "alpha" / "sessions" / "--work-demo--" / session.stem
        assert "appended from alpha" not in (view / "transcript.md").read_text()
        manager = SessionManager.open(str(session))
        with manager:
            manager.append_message(user("appended from alpha"))
        shipped.sync("alpha")
        synced = time.monotonic()
        while "appended from alpha" not in (view / "transcript.md").read_text():
            assert time.monotonic() - synced < APPEAR_WITHIN, "the append never showed"
            time.sleep(0.5)
        assert (view / "transcript.md").read_bytes() == _local_transcript(shipped, tmp_path)


def _local_transcript(shipped: Shipped, tmp_path: Path) -> bytes:
    with mounted(start_mount(shipped.agents["alpha"], tmp_path / "local")) as local:
        (session,) = (local / "sessions" / "--work-demo--").iterdir()
        return (session / "transcript.md").read_bytes()


WRITES: dict[str, Callable[[Path], object]] = {
    "create": lambda root: (root / "machines" / "alpha" / "new-file").write_text("x"),
    "root ctl": lambda root: (root / "ctl").write_text("new /tmp\n"),
    "mkdir": lambda root: (root / "machines" / "alpha" / "sessions" / "--work-a--" / "d").mkdir(),
    "title": lambda root: (
        next((root / "machines" / "beta" / "sessions").glob("*/*/title")).open("w").write("renamed")
    ),
    "rm link": lambda root: os.unlink(next((root / "machines" / "beta" / "by-id").iterdir())),
    "symlink": lambda root: os.symlink("x", root / "machines" / "beta" / "blobs" / "l"),
}


def test_every_write_is_erofs(shipped: Shipped, tmp_path: Path) -> None:
    with mounted(store_mount(shipped, tmp_path / "store", tmp_path / "cache")) as store:
        before = rendered_files(store / "machines" / "beta")
        for what, write in WRITES.items():
            with pytest.raises(OSError) as raised:
                write(store)
            assert raised.value.errno == errno.EROFS, what
        assert rendered_files(store / "machines" / "beta") == before


def test_mount_in_the_background_and_a_bad_store_address(shipped: Shipped, tmp_path: Path) -> None:
    mountpoint = tmp_path / "bg"
    mountpoint.mkdir()
    bad = sessionfs("mount", mountpoint, "--store", "https://bucket/prefix")
    assert bad.returncode == 2 and "s3://BUCKET[/PREFIX]" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1 and not os.path.ismount(mountpoint)
    url, endpoint = shipped.server.store_url(shipped.prefix), shipped.server.endpoint
    cache = str(tmp_path / "cache")
    started = sessionfs(
        "mount", mountpoint, "--store", url, "--endpoint-url", endpoint, "--cache-dir", cache
    )
    try:
        assert started.returncode == 0, started.stderr
        assert (
            started.stdout.strip() == f"sessionfs: mounted store {url} (read-only) at {mountpoint}"
        )
        assert sorted(os.listdir(mountpoint / "machines")) == list(MACHINES)
    finally:
        stopped = sessionfs("umount", mountpoint)
    assert stopped.returncode == 0, stopped.stderr
    assert not os.path.ismount(mountpoint)


class Forwarder:
    """A loopback TCP forwarder to the store that can be cut: the listener and every
    open connection closed at once, so the store is unreachable from then on."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = int(self.server.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def cut(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.server.close()
        for sock in self._sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass


def test_an_unreachable_store_is_served_from_the_cache(shipped: Shipped, tmp_path: Path) -> None:
    forwarder = Forwarder(int(shipped.server.endpoint.rsplit(":", 1)[1]))
    endpoint = f"http://127.0.0.1:{forwarder.port}"
    cache = tmp_path / "cache"
    try:
        with mounted(store_mount(shipped, tmp_path / "store", cache, endpoint)) as store:
            before = rendered_files(store / "machines" / "beta")
            forwarder.cut()
            cut = time.monotonic()
            while "unreachable" not in ctl(store)["last_error"]:
                assert time.monotonic() - cut < APPEAR_WITHIN, ctl(store)
                time.sleep(0.5)
            assert "serving cached data" in ctl(store)["last_error"]
            assert rendered_files(store / "machines" / "beta") == before
    finally:
        forwarder.cut()
    # A new mount while the store is down: ready at once, serving what the cache has.
    with mounted(store_mount(shipped, tmp_path / "again", cache, endpoint)) as again:
        assert sorted(os.listdir(again / "machines")) == list(MACHINES)
        assert rendered_files(again / "machines" / "beta") == before
        assert "store unreachable since" in ctl(again)["last_error"]
