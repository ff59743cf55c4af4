"""The persistence pipeline (spec sections 7-8) seen from the file on disk."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.session_helpers import assistant, file_lines, file_objects, temp_files, user

import core
from core import FileSessionStorage, PersistenceError, SessionManager
from core.storage import FileSessionWriter, SessionWriter, WriterMode, atomic_write

REPO = Path(__file__).resolve().parents[2]


def session_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "agent" / "sessions" / "--w--"
    directory.mkdir(parents=True)
    return directory


# ---------------------------------------------------------------------------- deferral


def test_nothing_on_disk_before_first_assistant_then_whole_then_lines(tmp_path: Path) -> None:
    m = SessionManager.create("/w", session_dir(tmp_path))
    path = m.session_file
    assert path is not None
    m.append_message(user("q1"))
    m.append_thinking_level_change("high")
    m.flush()
    assert not os.path.exists(path)
    m.append_message(assistant("a1"))
    objects = file_objects(path)
    assert [o["type"] for o in objects] == [
        "session",
        "message",
        "thinking_level_change",
        "message",
    ]
    assert objects[1:] == m.get_entries()
    for n in range(3):
        m.append_message(user(f"more {n}"))
        assert len(file_lines(path)) == 5 + n
        assert file_objects(path)[-1] == m.get_entries()[-1]
    assert temp_files(os.path.dirname(path)) == []


def test_ensure_on_disk_writes_now_and_lifts_the_wait(tmp_path: Path) -> None:
    m = SessionManager.create("/w", session_dir(tmp_path))
    path = m.session_file
    assert path is not None
    m.ensure_on_disk()
    assert [o["type"] for o in file_objects(path)] == ["session"]
    m.append_message(user("q"))
    assert len(file_lines(path)) == 2


class _CountingWriter(FileSessionWriter):
    fsyncs = 0

    def fsync(self) -> None:
        type(self).fsyncs += 1
        super().fsync()


class _CountingStorage(FileSessionStorage):
    def open_writer(self, path: str | os.PathLike[str], mode: WriterMode = "a") -> SessionWriter:
        return _CountingWriter(path, mode)


def test_flush_fsyncs_the_append_writer(tmp_path: Path) -> None:
    m = SessionManager.create("/w", session_dir(tmp_path), _CountingStorage())
    m.append_message(assistant("a"))  # full rewrite: one fsync of the temp file
    after_rewrite = _CountingWriter.fsyncs
    m.append_message(user("b"))
    m.flush()
    assert _CountingWriter.fsyncs == after_rewrite + 1
    m.close()


# ---------------------------------------------------------------------------- crashes

CRASH_CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from core import SessionManager
    m = SessionManager.open(sys.argv[2])
    for i in range(100000):
        entry_id = m.append_custom_message_entry("tick", "x" * (i % 700), False)
        m.flush()
        print(entry_id, flush=True)
    """
)


def closed_session_on_disk(tmp_path: Path) -> str:
    """A session with one question and answer, written and closed; its file path."""
    m = SessionManager.create("/w", session_dir(tmp_path))
    m.append_message(user("q"))
    m.append_message(assistant("a"))
    m.close()
    path = m.session_file
    assert path is not None
    return path


def test_killed_writer_leaves_a_loadable_file_with_every_flushed_entry(tmp_path: Path) -> None:
    path = closed_session_on_disk(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", CRASH_CHILD, str(REPO), path],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    flushed = []
    try:
        for line in child.stdout:
            flushed.append(line.strip())
            if len(flushed) >= 200:
                break
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert len(flushed) == 200
    # and a torn half line, as if the kill had landed in the middle of a write
    with open(path, "ab") as fh:
        fh.write(b'{"type":"custom_message","id":"deadbeef","parentId":')
    reloaded = SessionManager.open(path)
    ids = {e["id"] for e in reloaded.get_entries()}
    assert set(flushed) <= ids
    assert "deadbeef" not in ids
    new_id = reloaded.append_message(user("after crash"))
    assert file_objects(path)[-1]["id"] == new_id
    assert file_lines(path)[-1].startswith(b'{"type":"message"')


# ---------------------------------------------------------------------------- errors


class _FailingWriter(FileSessionWriter):
    def write(self, data: bytes) -> None:
        raise OSError(28, "No space left on device (simulated)")


class _FailingAppendStorage(FileSessionStorage):
    """Full rewrites work; appends fail from the moment `broken` is set."""

    broken = False

    def open_writer(self, path: str | os.PathLike[str], mode: WriterMode = "a") -> SessionWriter:
        if self.broken and mode == "a":
            return _FailingWriter(path, mode)
        return FileSessionWriter(path, mode)


def test_failing_storage_latches_first_error_logs_once_and_reraises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = _FailingAppendStorage()
    m = SessionManager.create("/w", session_dir(tmp_path), storage)
    m.append_message(user("q"))
    first_assistant = m.append_message(assistant("a"))
    path = m.session_file
    assert path is not None
    storage.broken = True
    caplog.set_level(logging.ERROR, logger="core.manager")
    with pytest.raises(PersistenceError) as first:
        m.append_message(user("lost"))
    assert isinstance(first.value.__cause__, OSError)
    assert path in str(first.value)
    with pytest.raises(PersistenceError) as again:
        m.append_message(user("also refused"))
    assert again.value is first.value
    with pytest.raises(PersistenceError) as on_flush:
        m.flush()
    assert on_flush.value is first.value
    with pytest.raises(PersistenceError) as on_close:
        m.close()
    assert on_close.value is first.value
    assert m.persist_error is first.value
    assert len([r for r in caplog.records if path in r.getMessage()]) == 1
    # what was written before the failure is intact
    assert file_objects(path)[-1]["id"] == first_assistant


class _RenameFails(FileSessionStorage):
    def rename(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError("rename interrupted (simulated)")


class _FsyncFailsWriter(FileSessionWriter):
    def fsync(self) -> None:
        raise OSError("fsync failed (simulated)")


class _FsyncFails(FileSessionStorage):
    def open_writer(self, path: str | os.PathLike[str], mode: WriterMode = "a") -> SessionWriter:
        return _FsyncFailsWriter(path, mode) if mode == "w" else FileSessionWriter(path, mode)


@pytest.mark.parametrize("storage", [_RenameFails(), _FsyncFails()], ids=["rename", "fsync"])
def test_interrupted_atomic_rewrite_keeps_original_and_leaves_no_temp(
    tmp_path: Path, storage: FileSessionStorage
) -> None:
    path = closed_session_on_disk(tmp_path)
    directory = Path(path).parent
    original = Path(path).read_bytes()
    broken = SessionManager.open(path, storage=storage)
    with pytest.raises(PersistenceError):
        broken.set_session_name("new title", "user")
    assert Path(path).read_bytes() == original
    assert temp_files(directory) == []
    assert "title" not in broken.get_header()  # the name change was undone in memory
    with pytest.raises(OSError):
        atomic_write(storage, path, [b"replacement\n"])
    assert Path(path).read_bytes() == original
    assert temp_files(directory) == []


# ---------------------------------------------------------------------------- size rules


def test_persisted_copy_is_truncated_but_memory_keeps_everything(tmp_path: Path) -> None:
    m = SessionManager.create("/w", session_dir(tmp_path))
    big = "line\n" * 150_000  # 750,000 chars
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t", "thinkingSignature": "s" * 600_000},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}, "partialJson": "{"},
        ],
        "provider": "p",
        "model": "m",
        "jsonlEvents": ["e"],
        "timestamp": 1,
    }
    m.append_message(message)
    m.append_message({"role": "toolResult", "content": big, "lineCount": 150_000, "timestamp": 2})
    path = m.session_file
    assert path is not None
    stored = file_objects(path)
    stored_assistant, stored_result = stored[1]["message"], stored[2]["message"]
    assert stored_assistant["content"][0]["thinkingSignature"] == ""
    assert "partialJson" not in stored_assistant["content"][1]
    assert "jsonlEvents" not in stored_assistant
    assert stored_result["content"].endswith(core.TRUNCATION_NOTICE)
    assert len(stored_result["content"]) == core.MAX_PERSIST_CHARS
    assert stored_result["lineCount"] == stored_result["content"].count("\n") + 1
    # memory is untouched
    in_memory = m.get_entries()
    assert in_memory[0]["message"]["content"][0]["thinkingSignature"] == "s" * 600_000
    assert in_memory[0]["message"]["jsonlEvents"] == ["e"]
    assert in_memory[1]["message"]["content"] == big


def _image_message(data: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": data, "mimeType": "image/png"},
        ],
        "timestamp": 3,
    }


def test_large_images_go_to_the_blob_store_and_come_back(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    m = SessionManager.create("/w", core.session_dir_for_cwd("/w", agent))
    raw = os.urandom(900)  # 1200 base64 chars
    big = base64.b64encode(raw).decode()
    small = base64.b64encode(b"tiny").decode()
    assert len(big) >= 1024
    data_url = "data:image/png;base64," + big
    m.append_message(_image_message(big))
    m.append_message(_image_message(small))
    m.append_message(assistant("x") | {"content": [{"type": "image_url", "image_url": data_url}]})
    path = m.session_file
    assert path is not None
    sha = hashlib.sha256(raw).hexdigest()
    assert (agent / "blobs" / sha).read_bytes() == raw
    url_sha = hashlib.sha256(data_url.encode()).hexdigest()
    assert (agent / "blobs" / url_sha).read_bytes() == data_url.encode()
    stored = file_objects(path)
    assert stored[1]["message"]["content"][1]["data"] == f"blob:sha256:{sha}"
    assert stored[2]["message"]["content"][1]["data"] == small
    assert stored[3]["message"]["content"][0]["image_url"] == f"blob:sha256:{url_sha}"
    assert m.get_entries()[0]["message"]["content"][1]["data"] == big  # memory keeps base64
    reloaded = SessionManager.open(path, browse=True)
    entries = reloaded.get_entries()
    assert entries[0]["message"]["content"][1]["data"] == big
    assert entries[2]["message"]["content"][0]["image_url"] == data_url
    # re-persisting the resolved entries gives the same refs again
    reloaded.rewrite_entries()
    assert file_objects(path) == stored


def test_missing_blob_warns_and_keeps_the_ref(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent = tmp_path / "agent"
    m = SessionManager.create("/w", core.session_dir_for_cwd("/w", agent))
    raw = os.urandom(900)
    m.append_message(_image_message(base64.b64encode(raw).decode()))
    m.append_message(assistant("ok"))
    path = m.session_file
    assert path is not None
    sha = hashlib.sha256(raw).hexdigest()
    (agent / "blobs" / sha).unlink()
    caplog.set_level(logging.WARNING)
    reloaded = SessionManager.open(path, browse=True)
    assert reloaded.get_entries()[0]["message"]["content"][1]["data"] == f"blob:sha256:{sha}"
    assert any(sha in r.getMessage() for r in caplog.records)
    assert reloaded.build_session_context()["messages"][0]["content"][1]["data"].startswith("blob:")


def test_unserialisable_append_is_refused_without_changing_anything(tmp_path: Path) -> None:
    m = SessionManager.create("/w", session_dir(tmp_path))
    m.append_message(assistant("a"))
    m.append_message(user("b"))  # the append writer is open now
    path = m.session_file
    assert path is not None
    before_file, before_entries, leaf = Path(path).read_bytes(), m.get_entries(), m.get_leaf_id()
    with pytest.raises(TypeError):
        m.append_message({"role": "user", "content": object()})
    assert m.get_entries() == before_entries and m.get_leaf_id() == leaf
    assert Path(path).read_bytes() == before_file
    assert m.persist_error is None
    m.append_message(user("still fine"))
    assert file_objects(path)[-1]["parentId"] == leaf
