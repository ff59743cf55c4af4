"""Store addresses, the key scheme, and what a reader does with gaps and partial listings."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from store_helpers import S3Server

from sessionfs.store.client import Download, ListedObject, StoreClient, Unreachable
from sessionfs.store.layout import SegmentKey, StoreLayout
from sessionfs.store.mirror import StoreMirror, contiguous_chain, newest_generation
from sessionfs.store.url import StoreURLError, parse_store_url


def test_store_urls() -> None:
    assert parse_store_url("s3://team-sessions").key("blobs", "x") == "blobs/x"
    url = parse_store_url("s3://team-sessions//agents/prod/")
    assert (url.bucket, url.prefix) == ("team-sessions", "agents/prod")
    assert str(url) == "s3://team-sessions/agents/prod"
    for bad in ("team-sessions", "s3://", "s3://Upper", "s3://b/../x", "http://bucket"):
        with pytest.raises(StoreURLError):
            parse_store_url(bad)


def test_segment_keys_round_trip_and_sort_numerically() -> None:
    layout = StoreLayout(parse_store_url("s3://bucket/p"))
    segment = SegmentKey("--w--/x g00000001/sub.jsonl", 3, 1_000_000)
    machine, rest = layout.parse_machine_key(layout.segment("laptop", segment)) or ("", "")
    assert machine == "laptop" and layout.parse_segment(rest) == segment
    keys = [layout.segment("m", SegmentKey("a.jsonl", 1, start)) for start in (900, 10_000, 5)]
    assert sorted(keys) == [keys[2], keys[0], keys[1]]


@pytest.mark.parametrize(
    "rest",
    [
        "sessions/../x.jsonl/g00000001/0000000000000000",
        "sessions/x.txt/g00000001/0000000000000000",
        "sessions/x.jsonl/g1/0000000000000000",
        "sessions/x.jsonl/g00000001/12",
        "sessions//x.jsonl/g00000001/0000000000000000",
    ],
)
def test_hostile_segment_keys_are_ignored(rest: str) -> None:
    assert StoreLayout.parse_segment(rest) is None


def _listed(sizes: dict[int, int]) -> dict[int, ListedObject]:
    return {start: ListedObject(f"k{start}", size, f"e{start}") for start, size in sizes.items()}


def test_contiguous_chain_stops_at_a_gap() -> None:
    segments = _listed({0: 10, 10: 5, 20: 7})
    assert [(start, seg.size) for start, seg in contiguous_chain(segments)] == [(0, 10), (10, 5)]
    assert newest_generation({1: _listed({0: 3}), 2: _listed({5: 4})}) == 1  # g2 unstarted
    assert newest_generation({1: _listed({0: 3}), 9: _listed({0: 0})}) == 1  # g9 empty


def _put(server: S3Server, prefix: str, rel: str, generation: int, start: int, data: bytes) -> None:
    client = server.client(prefix)
    key = StoreLayout(client.url).segment("m", SegmentKey(rel, generation, start))
    client.put_if_absent(key, data)


def test_mirror_stops_at_a_gap_and_at_a_torn_segment(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    _put(s3_server, store_prefix, "p/gap.jsonl", 1, 0, b"one\n")
    _put(s3_server, store_prefix, "p/gap.jsonl", 1, 10, b"after a gap\n")
    _put(s3_server, store_prefix, "p/torn.jsonl", 1, 0, b"whole\n")
    _put(s3_server, store_prefix, "p/torn.jsonl", 1, 6, b"no newline")
    mirror = s3_server.refreshed_mirror(store_prefix, tmp_path / "cache")
    sessions = mirror.machine_dir("m") / "sessions" / "p"
    assert (sessions / "gap.jsonl").read_bytes() == b"one\n"
    assert (sessions / "torn.jsonl").read_bytes() == b"whole\n"
    _put(s3_server, store_prefix, "p/gap.jsonl", 1, 4, b"filled\n")  # the gap closes
    mirror.refresh()
    assert (sessions / "gap.jsonl").read_bytes() == b"one\nfilled\n"  # 4 + 7 = 11: no 10


class _ListingBreaksAfter:
    """A client whose listings fail after ``count`` objects (a store going away mid-list)."""

    def __init__(self, client: StoreClient, count: int) -> None:
        self._client, self._count = client, count
        self.url = client.url

    def list(self, prefix: str) -> Iterator[ListedObject]:
        for n, item in enumerate(self._client.list(prefix)):
            if n == self._count:
                raise Unreachable("list: connection reset")
            yield item

    def download(self, key: str) -> AbstractContextManager[Download]:
        return self._client.download(key)


def test_a_partial_listing_never_takes_the_view_back(
    s3_server: S3Server, store_prefix: str, tmp_path: Path
) -> None:
    _put(s3_server, store_prefix, "p/s.jsonl", 1, 0, b"gen one\n")
    _put(s3_server, store_prefix, "p/s.jsonl", 2, 0, b"gen two\n")
    _put(s3_server, store_prefix, "p/s.jsonl", 2, 8, b"more\n")
    cache = tmp_path / "cache"
    mirror = s3_server.refreshed_mirror(store_prefix, cache)
    target = mirror.machine_dir("m") / "sessions" / "p" / "s.jsonl"
    assert target.read_bytes() == b"gen two\nmore\n"

    broken = StoreMirror(_ListingBreaksAfter(s3_server.client(store_prefix), 1), cache)  # type: ignore[arg-type]
    result = broken.refresh()  # listed only g1's segment
    assert result.partial
    assert target.read_bytes() == b"gen two\nmore\n"


def test_the_local_mount_never_imports_the_s3_library() -> None:
    """Every sessionfs module but sessionfs.store imports without loading boto3."""
    script = (
        "import importlib, pkgutil, sys, sessionfs\n"
        "for info in pkgutil.walk_packages(sessionfs.__path__, 'sessionfs.'):\n"
        "    name = info.name\n"
        "    if not name.startswith('sessionfs.store') and not name.endswith('__main__'):\n"
        "        importlib.import_module(name)\n"
        "import sessionfs.store.command\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
