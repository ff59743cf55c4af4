"""A reader's cost follows the store, not its junk: a bad object is downloaded once and
remembered (by key, ETag and size) until it changes, counted in ``ctl``; machine names
past the cap or without a session object are not mirrored; a refresh that finds nothing
new does not rewrite the mirror's state."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from store_helpers import S3Server
from test_store_layout import _put

from sessionfs.fs import store_mount
from sessionfs.store import mirror as mirror_module
from sessionfs.store.client import Download, ListedObject, StoreClient
from sessionfs.store.layout import StoreLayout
from sessionfs.store.mirror import StoreMirror
from sessionfs.store.refresher import StoreRefresher


class CountingClient:
    """The real client, counting the downloads of each key."""

    def __init__(self, client: StoreClient) -> None:
        self._client = client
        self.url = client.url
        self.downloads: Counter[str] = Counter()

    def list(self, prefix: str) -> Iterator[ListedObject]:
        return self._client.list(prefix)

    def head(self, key: str) -> ListedObject:
        return self._client.head(key)

    @contextmanager
    def download(self, key: str) -> Iterator[Download]:
        self.downloads[key] += 1
        with self._client.download(key) as download:
            yield download


def test_a_bad_object_is_downloaded_once_over_ten_refreshes(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    client = s3_server.client(store_prefix)
    layout = StoreLayout(client.url)
    wrong = hashlib.sha256(b"the name").hexdigest()
    client.put_if_absent(layout.blob(wrong), b"other bytes")
    client.put_if_absent(layout.machine_blob("m", wrong), b"")
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 0, b"good\n")
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 5, b"short of a newline")
    _put(s3_server, store_prefix, "p/t.jsonl", 1, 0, b"torn")
    counting = CountingClient(client)
    mirror = StoreMirror(counting, tmp_path / "cache")  # type: ignore[arg-type]
    refresher = StoreRefresher(mirror, "test store")
    for _ in range(10):
        refresher.refresh()
    bad = [
        layout.blob(wrong),
        layout.segment("m", mirror_module.SegmentKey("p/s.jsonl", 1, 5)),
        layout.segment("m", mirror_module.SegmentKey("p/t.jsonl", 1, 0)),
    ]
    assert {key: counting.downloads[key] for key in bad} == dict.fromkeys(bad, 1)
    assert ("failed_objects", 3) in refresher.ctl_items()
    assert ("objects_downloaded", 4) in refresher.ctl_items()  # the three, and "good\n"
    assert (mirror.machine_dir("m") / "sessions" / "p" / "s.jsonl").read_bytes() == b"good\n"
    # A restart remembers them too (mirror-state.json).
    again = CountingClient(client)
    StoreMirror(again, tmp_path / "cache").refresh()  # type: ignore[arg-type]
    assert not any(again.downloads[key] for key in bad)


def test_junk_machine_names_cost_nothing_past_the_cap(
    s3_server: S3Server, store_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mirror_module, "MAX_MACHINES", 3)
    client = s3_server.client(store_prefix)
    layout = StoreLayout(client.url)
    for name in ("a1", "a2", "a3", "a4", "a5"):
        segment = layout.segment(name, mirror_module.SegmentKey("p/s.jsonl", 1, 0))
        client.put_if_absent(segment, b"line\n")
    for name in ("a0", "a00"):  # before the others in key order: only a marker, or junk
        client.put_if_absent(layout.machine_blob(name, "0" * 64), b"")
        client.put_if_absent(f"{layout.machine_prefix(name)}sessions/x.txt/g1/0", b"x\n")
    mirror = StoreMirror(client, tmp_path / "cache")
    result = mirror.refresh()
    assert result.machines == ["a1", "a2", "a3"]
    assert result.machines_ignored == 4
    assert sorted(p.name for p in (tmp_path / "cache" / "machines").iterdir()) == result.machines

    # The mount side: no context (index, cache, search indexer) past its own cap.
    monkeypatch.setattr(store_mount, "MAX_MACHINES", 2)
    machines = store_mount.MachineContexts(
        tmp_path / "cache" / "machines", tmp_path / "mount-cache", 1 << 20, "/mnt", 0
    )
    assert machines.names() == ["a1", "a2"]
    assert [machines.context(name) is not None for name in ("a1", "a2", "a3")] == [
        True,
        True,
        False,
    ]


def test_a_refresh_with_nothing_new_does_not_rewrite_the_state(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 0, b"one\n")
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    state = tmp_path / "cache" / "mirror-state.json"
    before = state.stat()
    for _ in range(3):
        mirror.refresh()
    after = state.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 4, b"two\n")
    mirror.refresh()
    assert state.stat().st_ino != before.st_ino  # a change is saved (atomically)
