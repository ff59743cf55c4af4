"""``LineFile``: complete lines only, appended lines read once, replaced files
reloaded, ``.zst`` decompressed as a stream; a file over the whole-read limit read
where it is, with the same lines (a ``.zst`` by its text's size, not its own)."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

import core.formats.lines
import core.zstd_files
from core.formats.lines import (
    LineFile,
    decompressing_into,
    read_zstd_prefix,
    set_whole_read_limit,
)
from core.zstd_files import (
    ASSUMED_RATIO,
    NotZstdData,
    TextPastItsBound,
    file_text_info,
    most_text,
    read_chunks,
)


def _numbers_and_objects(lines: list) -> list[tuple[int, object]]:
    return [(line.number, line.obj) for line in lines]


@pytest.fixture(params=["whole", "in place"])
def read_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test twice: files read whole, and read where they are (limit 0)."""
    set_whole_read_limit(None if request.param == "whole" else 0)
    try:
        yield request.param
    finally:
        set_whole_read_limit(None)


def test_lines_numbers_malformed_and_torn_tail(tmp_path: Path, read_mode: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n\nnot json\n[1]\n{"b":2}\n{"c":')
    held = LineFile(path)
    lines = list(held.load())
    assert _numbers_and_objects(lines) == [(1, {"a": 1}), (3, None), (4, None), (5, {"b": 2})]
    assert held.raw(lines[1].start, lines[1].end) == b"not json"
    assert list(held.read_new() or [None]) == []
    with path.open("ab") as f:
        f.write(b'3}\n{"d":4}')  # the torn line completed; a whole last line without \n
    new = list(held.read_new() or [None])
    assert _numbers_and_objects(new) == [(6, {"c": 3}), (7, {"d": 4})]
    with path.open("ab") as f:
        f.write(b'\n{"e":5}\n')  # the newline of the line read whole is no new line
    new = list(held.read_new() or [None])
    assert _numbers_and_objects(new) == [(8, {"e": 5})]
    assert held.raw(new[0].start, new[0].end) == b'{"e":5}'


def test_replaced_or_shrunk_file_asks_for_a_reload(tmp_path: Path, read_mode: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}\n')
    held = LineFile(path)
    held.load()
    path.write_bytes(b'{"a":1}\n')
    assert held.read_new() is None
    other = tmp_path / "t.jsonl"
    other.write_bytes(b'{"a":1}\n{"b":2}\n{"c":3}\n')
    held.load()
    os.replace(other, path)
    assert held.read_new() is None
    assert len(list(held.load())) == 3


def test_zst_is_read_as_a_stream(tmp_path: Path) -> None:
    text = b"".join(b'{"n":%d}\n' % i for i in range(20000))
    path = tmp_path / "s.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(text))
    held = LineFile(path)
    lines = list(held.load())
    assert len(lines) == 20000 and lines[-1].obj == {"n": 19999}
    assert held.data == text
    assert read_zstd_prefix(path, 16) == text[:16]
    assert list(held.read_new() or [None]) == []
    os.utime(path, ns=(1, 1))
    assert held.read_new() is None  # an archive that changed at all is read again


def test_a_zst_that_is_not_zstd_data_is_an_unreadable_file(tmp_path: Path) -> None:
    # Another agent's file, untrusted: an OSError (EBADMSG) every reader already
    # treats as an unreadable file, never the binding's own exception.
    path = tmp_path / "s.jsonl.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 50)  # a zstd magic, then junk
    with pytest.raises(NotZstdData) as raised:
        list(LineFile(path).load())
    assert isinstance(raised.value, OSError) and raised.value.errno == errno.EBADMSG
    with pytest.raises(NotZstdData):
        read_zstd_prefix(path, 1024)


def test_a_file_over_the_limit_is_indexed_in_chunks_and_not_held(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = "x" * (1 << 20)  # lines across the 1 MB chunks the index reads
    text = b"".join(b'{"n":%d,"t":"%s"}\n\n' % (i, big[: i * 97_003].encode()) for i in range(30))
    path.write_bytes(text + b'{"last":true}')
    whole = LineFile(path)
    expected = [(line.number, line.start, line.end, line.obj) for line in whole.load()]
    set_whole_read_limit(len(text) // 2)
    try:
        held = LineFile(path)
        lines = [(line.number, line.start, line.end, line.obj) for line in held.load()]
        assert lines == expected
        assert held.memory_cost() == 0 < whole.memory_cost()
        assert all(held.raw(s, e) == whole.raw(s, e) for _, s, e, _ in lines)
        with path.open("ab") as f:
            f.write(b'\n{"after":1}\n{"torn":')
        new = list(held.read_new() or [None])
        assert [(line.number, line.obj) for line in new] == [(62, {"after": 1})]
        assert held.raw(new[0].start, new[0].end) == b'{"after":1}'
        set_whole_read_limit(None)
        also = list(whole.read_new() or [None])
        assert [(line.number, line.start, line.obj) for line in also] == [
            (line.number, line.start, line.obj) for line in new
        ]
    finally:
        set_whole_read_limit(None)


@pytest.mark.parametrize("header_says_its_size", [True, False])
def test_a_small_zst_of_a_text_over_the_limit_is_not_read_whole(
    tmp_path: Path, header_says_its_size: bool
) -> None:
    """Judged by its text (the header's content size, else `ASSUMED_RATIO` times the
    compressed size), not by the few KB it takes on disk: decompressed into a file
    without a name of the dir set (made when missing), read where it is; the same
    lines as read whole. Without a dir set it is read whole, as before."""
    text = b"".join(b'{"n":%d,"t":"the same words again"}\n' % i for i in range(20000))
    path = tmp_path / "s.jsonl.zst"
    path.write_bytes(
        zstandard.ZstdCompressor(write_content_size=header_says_its_size).compress(text)
    )
    limit = path.stat().st_size * ASSUMED_RATIO // 2  # the file far under it, the text over
    assert len(text) > limit
    whole = LineFile(path)
    expected = [(line.number, line.start, line.end, line.obj) for line in whole.load()]
    spill = tmp_path / "cache" / "not-made-yet"
    set_whole_read_limit(limit)
    held_dir = decompressing_into(str(spill))
    try:
        held = LineFile(path)
        lines = [(line.number, line.start, line.end, line.obj) for line in held.load()]
        assert lines == expected
        assert held.memory_cost() == 0 < whole.memory_cost() == len(text)
        assert os.fstat(held.data.fd).st_nlink == 0  # type: ignore[union-attr]
        assert spill.is_dir() and list(spill.iterdir()) == []
        decompressing_into(None)
        again = LineFile(path)
        assert len(list(again.load())) == len(expected) and again.memory_cost() == len(text)
    finally:
        set_whole_read_limit(None)
        decompressing_into(held_dir)


@pytest.mark.parametrize("into", ["a dir", "memory"])
@pytest.mark.parametrize("header", ["first frame said", "unsaid"])
def test_a_zst_that_expands_past_its_bound_is_refused_and_nothing_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, header: str, into: str
) -> None:
    """Another agent's file, untrusted: a first frame that says its size (200 KB of
    lines that compress some 2 times), then one of 16 MB that compresses to a few KB
    (its size believed: `text_size`); or (``unsaid``) one frame that says no size.
    Past the ceiling (made 1 MB here: `MOST_UNSAID`, and `MOST_RATIO` 2), whatever the
    header says, decompressed into the dir set or read whole, the copy stops at the
    bound with ``EFBIG`` saying why, and nothing is left in the dir."""
    rng = random.Random(0)
    said = b"".join(
        b'{"n":%d,"t":"%s"}\n' % (i, rng.randbytes(40).hex().encode()) for i in range(2000)
    )
    bomb = b'{"type":"filler","text":"again and again"}\n' * (16 * 2**20 // 42)
    monkeypatch.setattr(core.zstd_files, "MOST_RATIO", 2)
    monkeypatch.setattr(core.zstd_files, "MOST_UNSAID", 2**20)
    if header == "first frame said":
        data = zstandard.ZstdCompressor().compress(said) + zstandard.ZstdCompressor().compress(bomb)
    else:
        data = zstandard.ZstdCompressor(write_content_size=False).compress(said + bomb)
    most = 2**20
    path = tmp_path / "s.jsonl.zst"
    path.write_bytes(data)
    st = path.stat()
    text = file_text_info(path, st.st_size, st.st_mtime_ns)
    assert most_text(st.st_size) == most and text.said == (header == "first frame said")
    out: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Iterator[bytes]:
        for chunk in read_chunks(*args, **kwargs):
            out.append(len(chunk))
            yield chunk

    monkeypatch.setattr(core.formats.lines, "read_chunks", counted)
    spill = tmp_path / "cache"
    set_whole_read_limit(0 if into == "a dir" else None)
    held_dir = decompressing_into(str(spill))
    try:
        with pytest.raises(TextPastItsBound) as refused:
            LineFile(path).load()
    finally:
        set_whole_read_limit(None)
        decompressing_into(held_dir)
    assert refused.value.errno == errno.EFBIG
    assert "a decompression bomb" in str(refused.value), refused.value
    assert sum(out) <= most  # what came out before the refusal: at most the bound
    assert not spill.exists() or list(spill.iterdir()) == []
