"""BlobStore: content addressing, idempotent puts, hostile names."""

from __future__ import annotations

import hashlib

import pytest

from core.blobs import BLOB_REF_PREFIX, BlobStore, parse_blob_ref


def test_put_get_has(tmp_path):
    store = BlobStore(tmp_path / "blobs")
    sha, path, ref = store.put(b"hello")
    assert sha == hashlib.sha256(b"hello").hexdigest()
    assert path == tmp_path / "blobs" / sha and path.read_bytes() == b"hello"
    assert ref == BLOB_REF_PREFIX + sha
    assert store.has(sha) and store.get(sha) == b"hello"
    assert store.get("0" * 64) is None and not store.has("0" * 64)


def test_put_is_idempotent_and_leaves_no_temp_files(tmp_path):
    store = BlobStore(tmp_path)
    sha, path, _ = store.put(b"x" * 10)
    mtime = path.stat().st_mtime_ns
    store.put(b"x" * 10)
    assert path.stat().st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [sha]


@pytest.mark.parametrize("name", ["../etc/passwd", "/etc/passwd", "ABC", "", "g" * 64])
def test_hostile_names_never_become_paths(tmp_path, name):
    store = BlobStore(tmp_path)
    assert store.get(name) is None and not store.has(name)
    with pytest.raises(ValueError):
        store.path_for(name)


def test_parse_blob_ref():
    sha = "a" * 64
    assert parse_blob_ref(BLOB_REF_PREFIX + sha) == sha
    assert parse_blob_ref(BLOB_REF_PREFIX + "zz") is None
    assert parse_blob_ref("data:image/png;base64,xx") is None
    assert parse_blob_ref(42) is None
