"""How big a ``.zst`` file's text is, told without decompressing it
(`core.zstd_files.text_size`): its frame header's content size where it gives it and
the file is that frame alone, else `ASSUMED_RATIO` times the compressed size. A render
worker streams a compressed rollout by it (tests/view/test_streamed_agents.py), and the
daemon judges every session file by it (`file_text_size`: a plain file's size, a
``.zst``'s header read once per state of the file; tests/fs/test_compressed_rollout.py)."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path
from typing import Any

import pytest
import zstandard

import core.zstd_files
from core.safe_open import open_regular
from core.zstd_files import (
    ASSUMED_RATIO,
    TextSize,
    file_text_size,
    text_size,
    text_size_words,
)

TEXT = b"".join(
    b'{"type":"message","n":%d,"text":"the same words again"}\n' % n for n in range(5000)
)


def written(path: Path, data: bytes) -> tuple[Path, int]:
    path.write_bytes(data)
    return path, len(data)


def test_the_header_says_the_size_of_one_frame(tmp_path: Path) -> None:
    path, size = written(tmp_path / "a.jsonl.zst", zstandard.ZstdCompressor().compress(TEXT))
    assert size * ASSUMED_RATIO < len(TEXT)  # (the header, not the ratio)
    assert text_size(path, size) == len(TEXT)


def test_a_size_not_said_is_taken_at_the_ratio(tmp_path: Path) -> None:
    unsaid = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    path, size = written(tmp_path / "a.jsonl.zst", unsaid)
    assert zstandard.frame_content_size(unsaid) == -1
    assert text_size(path, size) == size * ASSUMED_RATIO


def test_frames_after_the_first_are_not_taken_at_its_word(tmp_path: Path) -> None:
    """The header says the first frame's size only: a small first frame, then a big
    one (of bytes that do not compress: more than the first frame's text and its
    frame's overhead) -- the ratio."""
    first = zstandard.ZstdCompressor().compress(b"{}\n")
    raw = zstandard.ZstdCompressor().compress(random.Random(0).randbytes(8000))
    path, size = written(tmp_path / "a.jsonl.zst", first + raw)
    assert text_size(path, size) == size * ASSUMED_RATIO


def test_a_skippable_frame_first_or_no_zstd_data_is_taken_at_the_ratio(tmp_path: Path) -> None:
    """A skippable frame's header reads as content size 0: never trusted as the text's."""
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"skip"
    framed = skippable + zstandard.ZstdCompressor().compress(TEXT)
    assert zstandard.frame_content_size(framed) == 0
    for name, data in [("skip", framed), ("junk", b"not zstd data at all"), ("empty", b"")]:
        path, size = written(tmp_path / f"{name}.jsonl.zst", data)
        assert text_size(path, size) == size * ASSUMED_RATIO, name
    assert text_size(tmp_path / "gone.jsonl.zst", 10) == 10 * ASSUMED_RATIO


def test_a_fifo_named_like_a_rollout_is_taken_at_the_ratio_without_waiting(
    tmp_path: Path,
) -> None:
    """Another agent's dir is untrusted: a FIFO named ``*.jsonl.zst`` (no writer ever
    comes) is not opened for a read that would wait forever."""
    fifo = tmp_path / "x.jsonl.zst"
    os.mkfifo(fifo)
    assert text_size(fifo, 10) == 10 * ASSUMED_RATIO


def test_a_plain_file_is_its_size_without_a_look_at_it(tmp_path: Path) -> None:
    assert file_text_size(tmp_path / "not-there.jsonl", 123, 1) == 123


def test_a_compressed_files_text_size_is_read_once_per_state(tmp_path: Path) -> None:
    """The daemon asks at every ``stat`` of a rendering: the header is read once for a
    state of the file (its size and mtime), and again for a new one."""
    path, size = written(tmp_path / "a.jsonl.zst", zstandard.ZstdCompressor().compress(TEXT))
    mtime_ns = path.stat().st_mtime_ns
    assert file_text_size(path, size, mtime_ns) == len(TEXT)
    shorter = TEXT[: len(TEXT) // 2]
    path.write_bytes(zstandard.ZstdCompressor().compress(shorter))
    assert file_text_size(path, size, mtime_ns) == len(TEXT)  # remembered: no read
    now = path.stat()
    assert file_text_size(path, now.st_size, now.st_mtime_ns) == len(shorter)


def test_a_header_that_could_not_be_read_is_guessed_and_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A passing failure (``EMFILE``: the daemon out of descriptors for a moment) gives
    the ratio's guess that once; the next ask reads the header."""
    path, size = written(tmp_path / "a.jsonl.zst", zstandard.ZstdCompressor().compress(TEXT))
    mtime_ns = path.stat().st_mtime_ns
    failures = [OSError(errno.EMFILE, "Too many open files")]

    def failing_once(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return open_regular(*args, **kwargs)

    monkeypatch.setattr(core.zstd_files, "open_regular", failing_once)
    assert file_text_size(path, size, mtime_ns) == size * ASSUMED_RATIO
    assert not failures
    assert file_text_size(path, size, mtime_ns) == len(TEXT)


def test_a_refusal_says_a_compressed_files_text_and_about_when_guessed() -> None:
    """Decided by the suffix, as every refusal of a rendering says it: a plain file by
    its size; a ``.zst`` by its text, "about" when not its header's."""
    mb = 2**20
    plain = text_size_words("s.jsonl", TextSize(64 * mb, True))
    assert plain == "the session file is 64 MB"
    said = text_size_words("s.jsonl.zst", TextSize(64 * mb, True))
    assert said == "the compressed session file's text is 64 MB"
    guessed = text_size_words("s.jsonl.zst", TextSize(20 * mb, False))
    assert guessed == "the compressed session file's text is about 20 MB"
