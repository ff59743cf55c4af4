"""``LineFile``: complete lines only, appended lines read once, replaced files
reloaded, ``.zst`` decompressed as a stream."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import zstandard

from core.formats.lines import LineFile, read_zstd_prefix
from core.zstd_files import NotZstdData


def _numbers_and_objects(lines: list) -> list[tuple[int, object]]:
    return [(line.number, line.obj) for line in lines]


def test_lines_numbers_malformed_and_torn_tail(tmp_path: Path) -> None:
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


def test_replaced_or_shrunk_file_asks_for_a_reload(tmp_path: Path) -> None:
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
