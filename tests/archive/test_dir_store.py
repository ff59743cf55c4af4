"""The directory store (``file:///ABS/DIR``): the store calls over a directory, the
same keys as S3, private files, and ``sessionfs sync`` archiving there by default."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from archive_helpers import default_archive, mirror_of, sync, tree_bytes

from sessionfs.store.client import AlreadyExists, NotFound, StoreError
from sessionfs.store.dir_client import DirStoreClient
from sessionfs.store.url import DirStoreURL, StoreURLError, parse_store_url


def test_a_file_url_names_an_absolute_dir() -> None:
    assert parse_store_url("file:///var/lib/x/") == DirStoreURL(Path("/var/lib/x"))
    assert str(parse_store_url("file:///a/b")) == "file:///a/b"
    for bad in ("file://host/x", "file://relative", "file:///", "file:///a/../b"):
        with pytest.raises(StoreURLError):
            parse_store_url(bad)


def test_objects_are_created_once_private_and_listed_in_key_order(tmp_path: Path) -> None:
    client = DirStoreClient(DirStoreURL(tmp_path / "store"))
    old = os.umask(0)
    try:
        client.create_bucket()
        client.put_if_absent("machines/m/sessions/p/s.jsonl/g00000001/0000000000000000", b"a\n")
        client.put_if_absent("machines/m/blobs/" + "0" * 64, b"")
        client.put_if_absent("blobs/x", b"bytes")
    finally:
        os.umask(old)
    with pytest.raises(AlreadyExists):
        client.put_if_absent("blobs/x", b"other")
    assert client.get("blobs/x", 100) == b"bytes"  # never overwritten
    for path in (tmp_path / "store").rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path
    keys = [item.key for item in client.list("machines/")]
    assert keys == sorted(keys) and len(keys) == 2
    assert [item.key for item in client.list("machines/m/ses")] == [keys[1]]
    assert [item.key for item in client.list("blob")] == ["blobs/x"]
    assert list(client.list("nothing/")) == []
    assert client.head("blobs/x").size == 5
    with pytest.raises(NotFound):
        client.head("blobs/y")
    with pytest.raises(StoreError):
        client.put_if_absent("blobs/../escape", b"")
    temps = tmp_path / "store" / ".tmp"
    assert not temps.exists() or not list(temps.iterdir())  # no temp file left


def test_a_listing_follows_no_link_and_skips_temp_files(tmp_path: Path) -> None:
    root = tmp_path / "store"
    client = DirStoreClient(DirStoreURL(root))
    client.put_if_absent("machines/m/blobs/" + "1" * 64, b"")
    outside = tmp_path / "outside"
    (outside / "sessions").mkdir(parents=True)
    (outside / "sessions" / "secret").write_text("not the store's")
    (root / "machines" / "evil").symlink_to(outside)
    (root / "machines" / "m" / "link").symlink_to(outside / "sessions" / "secret")
    (root / ".tmp").mkdir()
    (root / ".tmp" / "object.half").write_bytes(b"half")  # a killed writer's temp file
    assert [item.key for item in client.list("")] == ["machines/m/blobs/" + "1" * 64]
    with pytest.raises(NotFound):
        client.get("machines/m/link", 100)


def test_sync_without_store_archives_to_the_user_data_dir(tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = home / "agent" / "sessions" / "--work--" / "2026-01-01T00-00-00-000Z_a.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(b'{"type":"session","id":"a"}\n{"type":"message"}\nhalf a line')
    old = os.umask(0o022)
    try:
        done = sync(home)
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    archive = default_archive(home)
    modes = {stat.S_IMODE(p.lstat().st_mode) for p in archive.rglob("*") if p.is_file()}
    assert modes == {0o600}
    assert {stat.S_IMODE(p.lstat().st_mode) for p in archive.rglob("*") if p.is_dir()} == {0o700}
    mirror = mirror_of(archive, tmp_path / "cache")
    assert tree_bytes(mirror.machine_dir("box")) == {
        "sessions/--work--/2026-01-01T00-00-00-000Z_a.jsonl": session.read_bytes()[:-11]
    }
    other = tmp_path / "elsewhere"
    done = sync(home, "--store", f"file://{other}")
    assert done.returncode == 0, done.stderr
    assert tree_bytes(mirror_of(other, tmp_path / "cache2").machine_dir("box")) == tree_bytes(
        mirror.machine_dir("box")
    )


def test_without_unnamed_files_objects_go_through_a_private_temp_file(tmp_path: Path) -> None:
    client = DirStoreClient(DirStoreURL(tmp_path / "store"))
    client._unnamed = False  # a file system without O_TMPFILE
    client.put_if_absent("blobs/a", b"bytes")
    with pytest.raises(AlreadyExists):
        client.put_if_absent("blobs/a", b"other")
    assert client.get("blobs/a", 100) == b"bytes"
    assert list((tmp_path / "store" / ".tmp").iterdir()) == []
    assert stat.S_IMODE((tmp_path / "store" / "blobs" / "a").stat().st_mode) == 0o600
