"""Where session bytes live: the real filesystem or a dict.

`SessionManager` never touches `os` directly; it goes through a `SessionStorage`, so
tests (and `in_memory` sessions) can run against `MemorySessionStorage` and failure
tests can wrap a storage that breaks on purpose.

Writers are the only way bytes are appended to a session file. They are deliberately
unbuffered: one `write_line` (or one `write` for a batch) is one `os.write` on an
`O_APPEND` descriptor, so a line is either wholly in the file or not at all as far as
this process is concerned, and the order of calls is the order on disk.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat as stat_module
import threading
import time
from dataclasses import dataclass

from core.rewrite import SourceReplacedError, complete_lines, rewrite_file
from core.storage_api import (
    PathArg,
    RewriteResult,
    SessionStorage,
    SessionWriter,
    StorageStat,
    Transform,
    WriterMode,
    atomic_write,
    temp_path_for,
)

__all__ = [
    "FileSessionStorage",
    "FileSessionWriter",
    "MemorySessionStorage",
    "MemorySessionWriter",
    "PathArg",
    "SessionStorage",
    "SessionWriter",
    "StorageStat",
    "WriterMode",
    "atomic_write",
    "temp_path_for",
]
from core.private_files import (
    PRIVATE_FILE_MODE,
    create_new_private,
    make_private_dirs,
    private_opener,
)
from core.safe_open import open_regular, open_regular_fd


def _as_line(line: str | bytes) -> bytes:
    data = line.encode("utf-8") if isinstance(line, str) else line
    return data if data.endswith(b"\n") else data + b"\n"


# ---------------------------------------------------------------------------
# Real filesystem
# ---------------------------------------------------------------------------


#: How `FileSessionWriter` (mode "a") and `FileSessionStorage.append_synced` open a
#: session file: appending, readable for the torn-line guard, private when made.
_APPEND_FLAGS = os.O_CREAT | os.O_CLOEXEC | os.O_RDWR | os.O_APPEND


class FileSessionWriter:
    """Unbuffered `O_APPEND` writer with a torn-line guard.

    A crashed writer can leave half a line at the end of the file; a new line must
    never be glued onto it. Before the first write (and before any multi-line write)
    the file's last byte is checked and the write prefixed with b"\\n" if needed.
    Later single-line writes are checked after the fact, which costs one `lseek`
    instead of an `fstat`: if another process wrote a torn line since our previous
    write, the line is written again on a line of its own.
    """

    def __init__(self, path: PathArg, mode: WriterMode = "a") -> None:
        self.path = os.fspath(path)
        # Append mode reads too: the torn-line guard peeks at the file's last byte. A
        # file it makes is private (0600); "w" makes a new file (a rewrite's temp
        # file), never writing through a name that exists (`core.private_files`).
        self._fd: int | None = (
            os.open(self.path, _APPEND_FLAGS, PRIVATE_FILE_MODE)
            if mode == "a"
            else create_new_private(self.path)
        )
        self._mode = mode
        # Size the file had right after our last write; -1 = unknown, check tail.
        self._expected_end = -1 if mode == "a" else 0
        self._error: BaseException | None = None
        #: (file size before, file size after) of the last write, as far as we know.
        self.last_write_span: tuple[int, int] | None = None

    @property
    def error(self) -> BaseException | None:
        return self._error

    def continue_at(self, end: int) -> None:
        """The caller knows the file ended at ``end`` right after a line it appended
        itself: the first single-line write is then checked after the fact, like later
        ones (an ``lseek``), instead of an ``fstat`` and a read of the last byte first. A
        guest append opens a new writer every time, so this is its hot path."""
        if self._mode == "a" and self._expected_end < 0:
            self._expected_end = end

    def _fd_or_raise(self) -> int:
        if self._error is not None:
            raise self._error
        if self._fd is None:
            raise ValueError(f"writer for {self.path} is closed")
        return self._fd

    def write_line(self, line: str | bytes) -> None:
        self.write(_as_line(line))

    def write(self, data: bytes) -> None:
        fd = self._fd_or_raise()
        try:
            if self._mode != "a":
                self._write_all(fd, data)
                start = self._expected_end
                self._expected_end += len(data)
                self.last_write_span = (start, self._expected_end)
                return
            start, end, _ = _append_guarded(fd, data, self._expected_end)
            self._expected_end = end
            self.last_write_span = (start, end)
        except BaseException as exc:
            self._error = exc
            raise

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        written = os.write(fd, data)
        if written == len(data):
            return
        # Short write (disk full, signal): finish, or take the partial line back out.
        try:
            view = memoryview(data)[written:]
            while view:
                step = os.write(fd, view)
                written += step
                view = view[step:]
        except OSError:
            FileSessionWriter._remove_partial_write(fd, written)
            raise

    @staticmethod
    def _remove_partial_write(fd: int, written: int) -> None:
        """Cut off the `written` bytes of a write that failed half-way, so a disk-full
        error leaves no torn line behind. Only when nothing was appended after them
        (the file still ends where our partial data ends)."""
        if written <= 0:
            return
        with contextlib.suppress(OSError):
            end = os.lseek(fd, 0, os.SEEK_CUR)
            if os.fstat(fd).st_size == end:
                os.ftruncate(fd, end - written)

    def flush(self) -> None:
        # Nothing is buffered in user space; kept for the protocol.
        self._fd_or_raise()

    def fsync(self) -> None:
        fd = self._fd_or_raise()
        try:
            # This file is only ever appended to: fdatasync makes the new bytes and the
            # size that reaches them durable, skipping only the mtime update that
            # fsync would also force out (~10% of an append's cost here).
            os.fdatasync(fd)
        except BaseException as exc:
            self._error = exc
            raise

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.close(fd)
        except OSError as exc:
            if self._error is None:
                self._error = exc
            raise


def _append_guarded(
    fd: int, data: bytes, expected_end: int, *, want_stat: bool = False
) -> tuple[int, int, os.stat_result | None]:
    """Append ``data`` on ``fd`` (``O_APPEND``, readable) with the torn-line guard of
    `FileSessionWriter` (``expected_end``: where the file ended after our previous line,
    -1 when not known); where it landed, ``(start, end, st)``. ``st``, asked for with
    ``want_stat``: the file's ``fstat`` right after the write when it shows the file
    as our previous line left it plus this one (else None)."""
    checked = False
    if expected_end < 0 or data.count(b"\n") > 1:
        # First write, or several lines at once: look before writing.
        size = os.fstat(fd).st_size
        if size > 0 and size != expected_end and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        checked = True
    FileSessionWriter._write_all(fd, data)
    if want_stat and not checked:
        st = os.fstat(fd)
        if st.st_size == expected_end + len(data):
            # Nothing but this line since our previous one (files only grow between
            # our looks; a replaced one is another inode): it landed there, on a
            # line of its own, and the caller learns the file's state for free.
            return expected_end, st.st_size, st
    # With O_APPEND our position is now the end of what we wrote, so this tells
    # where our data landed without an fstat per line (the hot path).
    end = os.lseek(fd, 0, os.SEEK_CUR)
    start = end - len(data)
    if not checked and start != expected_end and start > 0 and os.pread(fd, 1, start - 1) != b"\n":
        # Someone else wrote since our last line and left it torn (a crash), so
        # this single line was glued onto theirs: write it again on its own line.
        # The glued copy is an invalid line that lenient readers skip.
        FileSessionWriter._write_all(fd, b"\n" + data)
        end = os.lseek(fd, 0, os.SEEK_CUR)
    return start, end, None


def _is_file_entry(entry: os.DirEntry[str]) -> bool:
    """A listed name that is (a symlink to) a regular file. ``DirEntry.is_file`` raises
    for a symlink loop or an unreadable target: that costs the one name, not the whole
    listing."""
    try:
        return entry.is_file(follow_symlinks=True)
    except OSError:
        return False


class FileSessionStorage:
    """`SessionStorage` on the real filesystem."""

    def ensure_dir(self, path: PathArg) -> None:
        make_private_dirs(path)

    def exists(self, path: PathArg) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: PathArg) -> bool:
        return os.path.isdir(path)

    def write_text(self, path: PathArg, text: str) -> None:
        with open(path, "w", encoding="utf-8", newline="", opener=private_opener) as fh:
            fh.write(text)

    def stat(self, path: PathArg) -> StorageStat:
        st = os.stat(path)
        return StorageStat(st.st_size, st.st_mtime, st.st_ino)

    def list_files(self, directory: PathArg, pattern: str = "*") -> list[str]:
        try:
            with os.scandir(directory) as it:
                return [
                    e.path for e in it if fnmatch.fnmatchcase(e.name, pattern) and _is_file_entry(e)
                ]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_dirs(self, directory: PathArg) -> list[str]:
        try:
            with os.scandir(directory) as it:
                return [e.path for e in it if e.is_dir(follow_symlinks=True)]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_text(self, path: PathArg) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    # Reads go through `open_regular`: a FIFO named *.jsonl must not block a reader.
    def read_bytes(self, path: PathArg) -> bytes:
        with open_regular(path) as fh:
            return fh.read()

    def read_bytes_with_stat(self, path: PathArg) -> tuple[bytes, StorageStat]:
        # fstat and read on the same descriptor: the stat describes the inode we read.
        fd = open_regular_fd(path)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            data = fh.read()
        return data, StorageStat(st.st_size, st.st_mtime, st.st_ino)

    def read_bytes_from(self, path: PathArg, offset: int) -> bytes:
        with open_regular(path) as fh:
            fh.seek(offset)
            return fh.read()

    def read_text_prefix(self, path: PathArg, max_bytes: int) -> str:
        with open_regular(path) as fh:
            data = fh.read(max_bytes)
        return data.decode("utf-8", errors="replace")

    def rename(self, src: PathArg, dst: PathArg) -> None:
        os.rename(src, dst)

    def unlink(self, path: PathArg) -> None:
        os.unlink(path)

    def fsync_dir(self, path: PathArg) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def copy_permissions(self, src: PathArg, dst: PathArg) -> None:
        """Give `dst` the mode and owner of `src`. Session files hold private
        transcripts (a 0600 file must not come back 0644 after a rewrite), and a rewrite
        run as root must not leave a user's session owned by root, which the agent could
        then no longer append to.

        `dst` is a temp file just made 0600: it is changed through a descriptor opened
        without following links, so a symlink swapped in at its name meanwhile fails
        the rewrite (``ELOOP``) instead of giving some other file the session's mode."""
        original = os.stat(src)
        fd = os.open(dst, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.fchmod(fd, stat_module.S_IMODE(original.st_mode))
            if (original.st_uid, original.st_gid) != (os.getuid(), os.getgid()):
                os.fchown(fd, original.st_uid, original.st_gid)
        finally:
            os.close(fd)

    def open_writer(self, path: PathArg, mode: WriterMode = "a") -> SessionWriter:
        return FileSessionWriter(path, mode)

    def append_synced(
        self, path: str, data: bytes, expected_end: int = -1
    ) -> tuple[int, int, os.stat_result | None]:
        """One append as a writer of ``path`` opened for it alone would make it
        (`FileSessionWriter`: the torn-line guard, ``expected_end`` as its
        `~FileSessionWriter.continue_at`), fdatasync'ed and closed again; where the
        data landed, ``(start, end, st)``, ``st`` the file's stat right after the
        write when nothing but it was written since ``expected_end`` (else None). A
        guest's append through the mount (its hot path): no writer object, the
        system calls alone, and the stat its caller would take next."""
        fd = os.open(path, _APPEND_FLAGS, PRIVATE_FILE_MODE)
        try:
            landed = _append_guarded(fd, data, expected_end, want_stat=True)
            os.fdatasync(fd)  # appended only: see `FileSessionWriter.fsync`
        except BaseException:
            os.close(fd)
            raise
        try:  # noqa: SIM105 -- suppress() costs a context manager on every append
            os.close(fd)
        except OSError:  # the data is durable already (as `close_writer` has it)
            pass
        return landed

    def overwrite_prefix(self, path: PathArg, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_size < len(data):
                raise ValueError(f"{path} is shorter than the {len(data)} bytes to overwrite")
            view, offset = memoryview(data), 0
            while offset < len(data):
                offset += os.pwrite(fd, view[offset:], offset)
            os.fsync(fd)
        finally:
            os.close(fd)

    def rewrite(
        self,
        path: PathArg,
        transform: Transform,
        *,
        expected_inode: int | None = None,
        target: PathArg | None = None,
    ) -> RewriteResult:
        return rewrite_file(self, path, transform, expected_inode=expected_inode, target=target)


# ---------------------------------------------------------------------------
# In memory
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class _MemoryFile:
    data: bytearray
    mtime: float
    inode: int


class MemorySessionWriter:
    """Writer into a `MemorySessionStorage` file; appends extend a bytearray (O(1)
    amortised), with the same torn-line guard as the file writer."""

    def __init__(self, storage: MemorySessionStorage, path: str, mode: WriterMode) -> None:
        self._storage = storage
        self._path = path
        self._mode = mode
        self._closed = False
        self._error: BaseException | None = None
        self.last_write_span: tuple[int, int] | None = None

    @property
    def error(self) -> BaseException | None:
        return self._error

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ValueError(f"writer for {self._path} is closed")

    def write_line(self, line: str | bytes) -> None:
        self.write(_as_line(line))

    def write(self, data: bytes) -> None:
        self._check()
        try:
            self.last_write_span = self._storage._append(
                self._path, data, guard_torn_line=self._mode == "a"
            )
        except BaseException as exc:
            self._error = exc
            raise

    def flush(self) -> None:
        self._check()

    def fsync(self) -> None:
        self._check()

    def close(self) -> None:
        self._closed = True


class MemorySessionStorage:
    """`SessionStorage` kept in a dict: for tests and `in_memory` sessions.

    Paths are normalised strings; directories exist implicitly for every stored file
    and explicitly once `ensure_dir` created them.
    """

    def __init__(self) -> None:
        self._files: dict[str, _MemoryFile] = {}
        self._dirs: set[str] = set()
        self._next_inode = 1
        self._lock = threading.RLock()

    @staticmethod
    def _key(path: PathArg) -> str:
        return os.path.normpath(os.fspath(path))

    def _new_inode(self) -> int:
        self._next_inode += 1
        return self._next_inode

    def _file(self, path: PathArg) -> _MemoryFile:
        key = self._key(path)
        try:
            return self._files[key]
        except KeyError:
            raise FileNotFoundError(2, "No such file", key) from None

    def _append(self, path: str, data: bytes, *, guard_torn_line: bool) -> tuple[int, int]:
        with self._lock:
            file = self._files.get(path)
            if file is None:
                file = self._files[path] = _MemoryFile(bytearray(), time.time(), self._new_inode())
            start = len(file.data)
            if guard_torn_line and file.data and file.data[-1:] != b"\n":
                file.data += b"\n"
            file.data += data
            file.mtime = time.time()
            return start, len(file.data)

    def ensure_dir(self, path: PathArg) -> None:
        with self._lock:
            key = self._key(path)
            while key not in self._dirs:
                self._dirs.add(key)
                parent = os.path.dirname(key)
                if parent == key:
                    break
                key = parent

    def exists(self, path: PathArg) -> bool:
        key = self._key(path)
        return key in self._files or self.is_dir(key)

    def is_dir(self, path: PathArg) -> bool:
        key = self._key(path)
        if key in self._dirs:
            return True
        prefix = key.rstrip(os.sep) + os.sep
        return any(name.startswith(prefix) for name in self._files)

    def write_text(self, path: PathArg, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def write_bytes(self, path: PathArg, data: bytes) -> None:
        with self._lock:
            key = self._key(path)
            self._files[key] = _MemoryFile(bytearray(data), time.time(), self._new_inode())

    def overwrite_prefix(self, path: PathArg, data: bytes) -> None:
        with self._lock:
            file = self._file(path)
            if len(file.data) < len(data):
                raise ValueError(f"{path} is shorter than the {len(data)} bytes to overwrite")
            file.data[: len(data)] = data
            file.mtime = time.time()

    def stat(self, path: PathArg) -> StorageStat:
        file = self._file(path)
        return StorageStat(len(file.data), file.mtime, file.inode)

    def list_files(self, directory: PathArg, pattern: str = "*") -> list[str]:
        key = self._key(directory)
        with self._lock:
            names = list(self._files)
        return [
            name
            for name in names
            if os.path.dirname(name) == key and fnmatch.fnmatchcase(os.path.basename(name), pattern)
        ]

    def list_dirs(self, directory: PathArg) -> list[str]:
        key = self._key(directory)
        with self._lock:
            candidates = set(self._dirs) | {os.path.dirname(name) for name in self._files}
        found: set[str] = set()
        prefix = key.rstrip(os.sep) + os.sep
        for cand in candidates:
            if cand.startswith(prefix):
                rest = cand[len(prefix) :]
                found.add(os.path.join(key, rest.split(os.sep, 1)[0]))
        return sorted(found)

    def read_text(self, path: PathArg) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def read_bytes(self, path: PathArg) -> bytes:
        with self._lock:
            return bytes(self._file(path).data)

    def read_bytes_with_stat(self, path: PathArg) -> tuple[bytes, StorageStat]:
        with self._lock:
            file = self._file(path)
            return bytes(file.data), StorageStat(len(file.data), file.mtime, file.inode)

    def read_bytes_from(self, path: PathArg, offset: int) -> bytes:
        with self._lock:
            return bytes(self._file(path).data[offset:])

    def read_text_prefix(self, path: PathArg, max_bytes: int) -> str:
        with self._lock:
            return bytes(self._file(path).data[:max_bytes]).decode("utf-8", errors="replace")

    def rename(self, src: PathArg, dst: PathArg) -> None:
        with self._lock:
            src_key, dst_key = self._key(src), self._key(dst)
            if src_key in self._files:
                self._files[dst_key] = self._files.pop(src_key)
                return
            if not self.is_dir(src_key):
                raise FileNotFoundError(2, "No such file or directory", src_key)
            # A directory: move every file below it (artifacts dirs in move_to).
            prefix = src_key.rstrip(os.sep) + os.sep
            for name in [n for n in self._files if n.startswith(prefix)]:
                self._files[dst_key + os.sep + name[len(prefix) :]] = self._files.pop(name)
            for name in [d for d in self._dirs if d == src_key or d.startswith(prefix)]:
                self._dirs.discard(name)
                self._dirs.add(dst_key + name[len(src_key) :])

    def unlink(self, path: PathArg) -> None:
        with self._lock:
            key = self._key(path)
            if self._files.pop(key, None) is None:
                raise FileNotFoundError(2, "No such file", key)

    def fsync_dir(self, path: PathArg) -> None:
        return None

    def copy_permissions(self, src: PathArg, dst: PathArg) -> None:
        return None  # dict entries have no mode or owner

    def open_writer(self, path: PathArg, mode: WriterMode = "a") -> SessionWriter:
        key = self._key(path)
        with self._lock:
            if mode == "w" and key in self._files:
                raise FileExistsError(17, "File exists", key)  # as the file writer's O_EXCL
            if mode == "w" or key not in self._files:
                self._files[key] = _MemoryFile(bytearray(), time.time(), self._new_inode())
        return MemorySessionWriter(self, key, mode)

    def rewrite(
        self,
        path: PathArg,
        transform: Transform,
        *,
        expected_inode: int | None = None,
        target: PathArg | None = None,
    ) -> RewriteResult:
        """Atomic under the lock: no other writer of this storage can interleave."""
        key = self._key(path)
        destination = self._key(target) if target is not None else key
        with self._lock:
            file = self._files.get(key)
            if file is not None and expected_inode is not None and file.inode != expected_inode:
                raise SourceReplacedError(f"{key} was replaced by another file")
            if file is None and expected_inode is not None:
                raise SourceReplacedError(f"{key} no longer exists")
            data = bytes(file.data) if file is not None else b""
            content = transform(complete_lines(data)[0])
            self._files.pop(key, None)
            new = _MemoryFile(bytearray(content), time.time(), self._new_inode())
            self._files[destination] = new
            return RewriteResult(len(content), 0, new.inode)
