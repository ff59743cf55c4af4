"""FileSessionStorage and MemorySessionStorage behave alike; writers and atomic_write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import core
from core import FileSessionStorage, MemorySessionStorage, SessionStorage, SessionWriter
from core.storage import atomic_write, temp_path_for


@pytest.fixture(params=["file", "memory"])
def storage_and_root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[SessionStorage, str]:
    if request.param == "file":
        return FileSessionStorage(), str(tmp_path)
    return MemorySessionStorage(), "/mem"


def test_protocols_are_satisfied() -> None:
    assert isinstance(FileSessionStorage(), SessionStorage)
    assert isinstance(MemorySessionStorage(), SessionStorage)
    assert isinstance(MemorySessionStorage().open_writer("/x"), SessionWriter)


def test_basic_file_operations(storage_and_root: tuple[SessionStorage, str]) -> None:
    storage, root = storage_and_root
    directory = os.path.join(root, "a", "b")
    storage.ensure_dir(directory)
    assert storage.is_dir(directory) and storage.exists(directory)
    path = os.path.join(directory, "f.jsonl")
    assert not storage.exists(path)
    storage.write_text(path, "one\ntwo\n")
    assert storage.read_text(path) == "one\ntwo\n"
    assert storage.read_bytes_from(path, 4) == b"two\n"
    assert storage.read_text_prefix(path, 3) == "one"
    data, st = storage.read_bytes_with_stat(path)
    assert data == b"one\ntwo\n" and st.size == 8
    assert storage.stat(path).inode == st.inode
    storage.write_text(os.path.join(directory, "g.txt"), "")
    assert [os.path.basename(p) for p in storage.list_files(directory, "*.jsonl")] == ["f.jsonl"]
    assert sorted(os.path.basename(p) for p in storage.list_files(directory)) == [
        "f.jsonl",
        "g.txt",
    ]
    assert storage.list_dirs(os.path.join(root, "a")) == [directory]
    assert storage.list_files(os.path.join(root, "missing"), "*") == []
    moved = os.path.join(directory, "h.jsonl")
    storage.rename(path, moved)
    assert not storage.exists(path) and storage.read_text(moved) == "one\ntwo\n"
    storage.unlink(moved)
    assert not storage.exists(moved)
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(moved)
    with pytest.raises(FileNotFoundError):
        storage.stat(moved)
    storage.fsync_dir(directory)


def test_directory_rename(storage_and_root: tuple[SessionStorage, str]) -> None:
    storage, root = storage_and_root
    src = os.path.join(root, "art")
    storage.ensure_dir(os.path.join(src, "sub"))
    storage.write_text(os.path.join(src, "sub", "x.txt"), "x")
    dst = os.path.join(root, "moved")
    storage.rename(src, dst)
    assert storage.read_text(os.path.join(dst, "sub", "x.txt")) == "x"
    assert not storage.exists(src)


def test_writer_appends_lines_in_order_with_torn_line_guard(
    storage_and_root: tuple[SessionStorage, str],
) -> None:
    storage, root = storage_and_root
    storage.ensure_dir(root)
    path = os.path.join(root, "w.jsonl")
    storage.write_text(path, '{"a":1}\n{"torn"')
    writer = storage.open_writer(path, "a")
    writer.write_line('{"b":2}')
    writer.write_line(b'{"c":3}\n')
    writer.write(b'{"d":4}\n{"e":5}\n')
    writer.flush()
    writer.fsync()
    writer.close()
    assert storage.read_text(path).split("\n") == [
        '{"a":1}',
        '{"torn"',
        '{"b":2}',
        '{"c":3}',
        '{"d":4}',
        '{"e":5}',
        "",
    ]
    assert writer.error is None


def test_writer_in_write_mode_makes_a_new_file_only(
    storage_and_root: tuple[SessionStorage, str],
) -> None:
    """Mode "w" is for a rewrite's temp file: it never writes through a name that exists
    (a planted file or symlink in the session's dir)."""
    storage, root = storage_and_root
    storage.ensure_dir(root)
    path = os.path.join(root, "t.jsonl")
    storage.write_text(path, "old content without newline")
    with pytest.raises(FileExistsError):
        storage.open_writer(path, "w")
    assert storage.read_text(path) == "old content without newline"
    fresh = os.path.join(root, "new.jsonl")
    writer = storage.open_writer(fresh, "w")
    writer.write(b"new\n")
    writer.close()
    assert storage.read_text(fresh) == "new\n"


def test_closed_writer_refuses_writes(storage_and_root: tuple[SessionStorage, str]) -> None:
    storage, root = storage_and_root
    storage.ensure_dir(root)
    writer = storage.open_writer(os.path.join(root, "c.jsonl"))
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError):
        writer.write_line("x")


def test_file_writer_latches_its_first_error(tmp_path: Path) -> None:
    writer = FileSessionStorage().open_writer(tmp_path / "e.jsonl")
    fd = writer._fd  # type: ignore[attr-defined]
    os.close(fd)  # break the descriptor under the writer
    with pytest.raises(OSError) as first:
        writer.write_line("x")
    assert writer.error is first.value
    with pytest.raises(OSError) as again:
        writer.write_line("y")
    assert again.value is first.value
    writer._fd = None  # type: ignore[attr-defined]  # already closed above


def test_atomic_write_replaces_and_cleans_up(storage_and_root: tuple[SessionStorage, str]) -> None:
    storage, root = storage_and_root
    storage.ensure_dir(root)
    path = os.path.join(root, "s.jsonl")
    storage.write_text(path, "old\n")
    atomic_write(storage, path, [b"a\n", b"b\n"])
    assert storage.read_text(path) == "a\nb\n"
    assert [p for p in storage.list_files(root) if p.endswith(".tmp")] == []


def test_temp_names_are_hidden_siblings() -> None:
    tmp = temp_path_for("/x/y/2025_abc.jsonl")
    assert os.path.dirname(tmp) == "/x/y"
    name = os.path.basename(tmp)
    assert name.startswith(".2025_abc.jsonl.") and name.endswith(".tmp")
    assert tmp != temp_path_for("/x/y/2025_abc.jsonl")


def test_memory_appends_extend_in_place() -> None:
    """O(1) amortised appends: the stored buffer grows in place, never copied."""
    storage = MemorySessionStorage()
    writer = storage.open_writer("/m/a.jsonl")
    writer.write_line("first")
    buffer = storage._files["/m/a.jsonl"].data
    for i in range(1000):
        writer.write_line(f"line {i}")
    assert storage._files["/m/a.jsonl"].data is buffer
    assert storage.stat("/m/a.jsonl").size == len(buffer)
    assert writer.last_write_span is not None  # type: ignore[attr-defined]


def _foreign_append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_file_writer_never_leaves_a_line_glued_to_a_foreign_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    writer = FileSessionStorage().open_writer(path)
    writer.write_line('{"n":1}')
    _foreign_append(path, b'{"foreign":1}\n{"torn":')  # another process crashed mid-line
    writer.write_line('{"n":2}')  # single line: checked after the write, repaired
    _foreign_append(path, b'{"torn again":')
    writer.write(b'{"n":3}\n{"n":4}\n')  # several lines: checked before the write
    writer.write_line('{"n":5}')  # nothing foreign since: plain append
    writer.close()
    objects = core.parse_jsonl_lenient(path.read_bytes())
    assert objects == [{"n": 1}, {"foreign": 1}, {"n": 2}, {"n": 3}, {"n": 4}, {"n": 5}]
    assert path.read_bytes().endswith(b'{"n":5}\n')


def test_atomic_write_keeps_mode_and_owner(tmp_path: Path) -> None:
    """A private (0600) transcript stays private through every kind of rewrite."""
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o600)
    if os.getuid() == 0:
        os.chown(target, 4321, 4321)  # a user's file rewritten by root stays the user's
    atomic_write(FileSessionStorage(), target, [b"new\n"])
    st = target.stat()
    assert target.read_bytes() == b"new\n"
    assert st.st_mode & 0o777 == 0o600
    if os.getuid() == 0:
        assert (st.st_uid, st.st_gid) == (4321, 4321)


def test_session_rewrite_keeps_mode(tmp_path: Path) -> None:
    manager = core.SessionManager.create("/w", session_dir=str(tmp_path))
    manager.ensure_on_disk()
    path = Path(manager.get_session_file() or "")
    os.chmod(path, 0o640)
    manager.set_session_name("renamed", "user")
    assert path.stat().st_mode & 0o777 == 0o640
    assert core.load_entries_from_file(path)[0]["title"] == "renamed"


def test_a_write_cut_short_by_a_full_disk_leaves_no_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session","id":"s"}\n')
    writer = FileSessionStorage().open_writer(path, "a")
    real_write = os.write
    calls = {"n": 0}

    def disk_fills_up(fd: int, data: bytes) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data[:5]))  # the first 5 bytes fit
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", disk_fills_up)
    with pytest.raises(OSError):
        writer.write_line(b'{"type":"message","id":"aaaaaaaa"}')
    monkeypatch.undo()
    assert path.read_bytes() == b'{"type":"session","id":"s"}\n'
    assert writer.error is not None


def test_a_symlink_planted_at_a_temp_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    planted = tmp_path / ".s.jsonl.0123456789ab.tmp"
    planted.symlink_to(victim)
    with pytest.raises(FileExistsError):
        FileSessionStorage().open_writer(planted, "w")
    assert victim.read_bytes() == b"keep me" and planted.is_symlink()


def test_files_and_dirs_made_for_sessions_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        storage = FileSessionStorage()
        storage.ensure_dir(tmp_path / "a" / "b")
        storage.open_writer(tmp_path / "a" / "b" / "s.jsonl").close()
        storage.write_text(tmp_path / "a" / "note", "x")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "a").rglob("*")}
    assert modes == {"b": 0o700, "s.jsonl": 0o600, "note": 0o600}
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700
