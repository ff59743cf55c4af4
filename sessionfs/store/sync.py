"""The sync engine: ship an agent dir to the store and keep it shipped.

One pass (:meth:`SyncEngine.sync_once`) uploads, in this order:

1. blobs not yet shipped: ``blobs/<sha>`` (shared, content-addressed) and then the
   machine's marker ``machines/<m>/blobs/<sha>`` (so a marker implies the blob);
2. every ``sessions/**/*.jsonl`` (sub-agent sessions in artifacts dirs included): the
   complete lines past the uploaded offset, as new segment objects.

Every object is created with ``If-None-Match: *`` and never overwritten. A segment that
already exists is fetched and compared with the local bytes it claims to hold: equal means
a previous run (killed before it saved its progress) or a twin process made it, and it is
adopted; different means another sync writes this machine name, and the file is refused
(:class:`SegmentConflict`) without writing anything.

``history.db`` is not shipped: it is a SQLite database changed in place (WAL), so shipping
it means a consistent snapshot and a whole new object on each change, and every prompt in
it is already in the session files that are shipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from sessionfs.view.progress_text import rate_text

from .claims import ClaimedElsewhere, take_claim
from .client import AlreadyExists, NotFound, StoreClient, StoreError, Unreachable
from .layout import KeyOutOfRange, SegmentKey, StoreLayout, is_blob_name, is_safe_relpath
from .state import FileProgress, SyncState
from .sync_progress import SyncProgress

__all__ = [
    "ClaimedElsewhere",
    "PassResult",
    "SegmentConflict",
    "SyncEngine",
    "SyncOptions",
]

log = logging.getLogger("sessionfs.store.sync")

HASH_SPAN = 4096
READ_BLOCK = 1 << 20


class SegmentConflict(RuntimeError):
    """A segment key holds bytes that differ from ours: another sync writes this machine."""


@dataclass
class SyncOptions:
    agent_dir: Path
    machine: str
    segment_bytes: int = 16 << 20
    jobs: int = 8
    takeover: bool = False


@dataclass
class PassResult:
    segments: int = 0
    bytes: int = 0
    blobs: int = 0
    conflicts: list[str] = field(default_factory=list)

    def add(self, other: PassResult) -> None:
        self.segments += other.segments
        self.bytes += other.bytes
        self.blobs += other.blobs
        self.conflicts.extend(other.conflicts)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _stream_sha256(handle: BinaryIO) -> str:
    digest = hashlib.sha256()
    while block := handle.read(READ_BLOCK):
        digest.update(block)
    return digest.hexdigest()


def _read_at(handle: BinaryIO, start: int, size: int) -> bytes:
    return os.pread(handle.fileno(), size, start)


def complete_lines(handle: BinaryIO, start: int, limit: int) -> bytes:
    """Bytes from ``start`` through the last ``\\n`` within ``limit`` bytes.

    A line longer than ``limit`` is read on to its end; bytes after the last ``\\n``
    (a line being written, or torn) are never returned.
    """
    data = _read_at(handle, start, limit)
    end = data.rfind(b"\n")
    if end >= 0:
        return data[: end + 1]
    if len(data) < limit:
        return b""
    pieces = [data]
    position = start + len(data)
    while True:
        block = _read_at(handle, position, READ_BLOCK)
        if not block:
            return b""
        newline = block.find(b"\n")
        if newline >= 0:
            pieces.append(block[: newline + 1])
            return b"".join(pieces)
        pieces.append(block)
        position += len(block)


def _progress(handle: BinaryIO, inode: int, generation: int, offset: int) -> FileProgress:
    head = _read_at(handle, 0, min(HASH_SPAN, offset))
    tail_start = max(0, offset - HASH_SPAN)
    tail = _read_at(handle, tail_start, offset - tail_start)
    return FileProgress(inode, generation, offset, _sha256(head), _sha256(tail))


def _was_replaced(handle: BinaryIO, known: FileProgress, inode: int, size: int) -> bool:
    """New inode (the agents rewrite by rename), shorter, or an uploaded byte changed."""
    if inode != known.inode or size < known.offset:
        return True
    again = _progress(handle, inode, known.generation, known.offset)
    return (again.head_hash, again.tail_hash) != (known.head_hash, known.tail_hash)


def default_machine_name() -> str:
    """The host name with characters outside ``[A-Za-z0-9._-]`` made ``-``."""
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in socket.gethostname())
    return name.strip(".-_") or "localhost"


class SyncEngine:
    """Ships one agent dir as one machine name; one instance per (store, machine)."""

    def __init__(self, client: StoreClient, state: SyncState, options: SyncOptions) -> None:
        self.client, self.state, self.options = client, state, options
        self.layout = StoreLayout(client.url)
        self.machine = options.machine
        #: rel -> (newest valid generation, every generation listed), once a pass
        self._listed_generations: dict[str, tuple[int, set[int]]] | None = None
        self._generations_lock = threading.Lock()
        #: rel -> why it was refused (each said once)
        self._refused: dict[str, str] = {}
        #: what the pass under way has done (``sessionfs sync`` shows it on a terminal)
        self.progress = SyncProgress()

    # -- claim -------------------------------------------------------------------------

    def ensure_claim(self) -> None:
        """Hold the newest claim of the machine name, or raise :class:`ClaimedElsewhere`."""
        token, held = self.state.owner()
        epoch, created = take_claim(
            self.client, self.layout, self.machine, token, self.options.takeover
        )
        if epoch != held:
            self.state.set_epoch(epoch)
        if created:
            log.info("claimed machine name %s (epoch %d)", self.machine, epoch)

    # -- one pass ----------------------------------------------------------------------

    def sync_once(self) -> PassResult:
        """Claim, then ship new blobs, then new complete lines of every session file."""
        self.ensure_claim()
        self._listed_generations = None
        result = PassResult()
        self.progress.begin()
        with ThreadPoolExecutor(max_workers=self.options.jobs) as pool:
            uploaded = self.state.uploaded_blobs()
            blob_jobs = [
                pool.submit(self._ship_blob, sha, path)
                for sha, path in self._local_blobs()
                if sha not in uploaded
            ]
            self._collect(blob_jobs, result)
            session_jobs = [
                pool.submit(self._ship_session, rel, path) for rel, path in self._local_sessions()
            ]
            self._collect(session_jobs, result)
        self.progress.end()
        return result

    def _collect(self, jobs: list[Future[PassResult]], result: PassResult) -> None:
        """Wait for every job; re-raise the first :class:`Unreachable` after all ended."""
        self.progress.listed(len(jobs))
        unreachable: Unreachable | None = None
        for job in jobs:
            try:
                done = job.result()
            except Unreachable as error:
                unreachable = unreachable or error
                continue
            result.add(done)
            self.progress.file_done(done.bytes)
        if unreachable is not None:
            raise unreachable

    def _local_blobs(self) -> Iterator[tuple[str, Path]]:
        try:
            entries = list(os.scandir(self.options.agent_dir / "blobs"))
        except FileNotFoundError:
            return
        for entry in entries:
            if is_blob_name(entry.name) and entry.is_file(follow_symlinks=False):
                yield entry.name, Path(entry.path)

    def _local_sessions(self) -> Iterator[tuple[str, Path]]:
        root = self.options.agent_dir / "sessions"
        for directory, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(directory) / name
                rel = path.relative_to(root).as_posix()
                if not name.endswith(".jsonl") or path.is_symlink() or not path.is_file():
                    continue
                if not is_safe_relpath(rel) or not _is_utf8(rel):
                    log.warning("skipping %r: not a name the store can hold", rel)
                    continue
                yield rel, path

    # -- blobs -------------------------------------------------------------------------

    def _ship_blob(self, sha: str, path: Path) -> PassResult:
        """Upload a blob and then the machine's marker; the blob is hashed and uploaded
        from the file in pieces (an image can be hundreds of MB), never read whole."""
        try:
            with path.open("rb") as data:
                if _stream_sha256(data) != sha:
                    # Never put bytes into the shared store under a name they do not hash to
                    # (readers check too: a blob changed after this check is never served).
                    log.warning("blob %s: its bytes hash to something else; not shipped", sha)
                    return PassResult()
                size = data.tell()
                data.seek(0)
                with contextlib.suppress(AlreadyExists):  # content-addressed: same bytes
                    self.client.put_if_absent(self.layout.blob(sha), data)
        except OSError as error:
            log.warning("blob %s unreadable: %s", sha, error)
            return PassResult()
        with contextlib.suppress(AlreadyExists):
            self.client.put_if_absent(self.layout.machine_blob(self.machine, sha), b"")
        self.state.add_blob(sha)
        return PassResult(blobs=1, bytes=size)

    # -- sessions ----------------------------------------------------------------------

    def _ship_session(self, rel: str, path: Path) -> PassResult:
        try:
            handle = path.open("rb")
        except OSError as error:
            log.warning("session %s unreadable: %s", rel, error)
            return PassResult()
        with handle:
            try:
                return self._ship_open_session(rel, handle)
            except Unreachable:
                raise  # the whole pass is retried
            except (SegmentConflict, KeyOutOfRange, StoreError) as error:
                # Once per file and reason: a running sync meets it again every pass.
                if self._refused.get(rel) != str(error):
                    log.error("%s: not synced: %s", rel, error)
                    self._refused[rel] = str(error)
                return PassResult(conflicts=[rel])

    def _ship_open_session(self, rel: str, handle: BinaryIO) -> PassResult:
        info = os.fstat(handle.fileno())
        known = self.state.file(rel)
        if known is None:
            generation, offset = self._next_generation(rel, 0), 0
        elif _was_replaced(handle, known, info.st_ino, info.st_size):
            generation, offset = self._next_generation(rel, known.generation), 0
            log.info("%s was rewritten: generation %d", rel, generation)
        else:
            generation, offset = known.generation, known.offset
        result = PassResult()
        while True:
            chunk = complete_lines(handle, offset, self.options.segment_bytes)
            if not chunk:
                break
            segment = SegmentKey(rel=rel, generation=generation, start=offset)
            offset += self._put_segment(segment, chunk, handle)
            self.state.save_file(rel, _progress(handle, info.st_ino, generation, offset))
            result.segments += 1
            result.bytes += len(chunk)
        return result

    def _put_segment(self, segment: SegmentKey, chunk: bytes, handle: BinaryIO) -> int:
        """Create the segment; adopt an equal one already there. Returns bytes covered."""
        key = self.layout.segment(self.machine, segment)
        try:
            self.client.put_if_absent(key, chunk)
            return len(chunk)
        except AlreadyExists:
            pass
        adopted = self._adoptable_size(key, handle, segment.start)
        if adopted:
            log.info("%s: adopted the segment already in the store", key)
            return adopted
        raise SegmentConflict(
            f"the store already holds different bytes at {key}; another sync "
            f"writes machine name {self.machine!r}"
        )

    def _adoptable_size(self, key: str, handle: BinaryIO, start: int) -> int:
        """The size of the object at ``key`` if it is a whole-line run of the file's
        bytes from ``start``, else 0 (compared as it streams: a huge foreign object is
        never held whole)."""
        available = os.fstat(handle.fileno()).st_size - start
        with self.client.download(key) as existing:
            if not 0 < existing.size <= available:
                return 0
            position = start
            for chunk in existing.chunks:
                if _read_at(handle, position, len(chunk)) != chunk:
                    return 0
                position += len(chunk)
        size = position - start
        whole = size == existing.size and _read_at(handle, position - 1, 1) == b"\n"
        return size if whole else 0

    def _next_generation(self, rel: str, above: int) -> int:
        """A new generation for ``rel``: above ``above`` and above every valid one in the
        store, and not used by any key listed (junk included: its key is taken). Past the
        8-digit width, writing the segment raises `KeyOutOfRange` and the file is refused."""
        valid, used = self._store_generations(rel)
        generation = max(above, valid) + 1
        while generation in used:
            generation += 1
        return generation

    def _store_generations(self, rel: str) -> tuple[int, frozenset[int]]:
        """The newest *valid* generation of ``rel`` in the store (0: none; valid: it has
        a non-empty segment at 0, as readers require) and every generation any key of
        ``rel`` names; from one listing a pass."""
        with self._generations_lock:
            if self._listed_generations is None:
                self._listed_generations = self._list_generations()
            valid, used = self._listed_generations.get(rel, (0, set()))
            return valid, frozenset(used)

    def _list_generations(self) -> dict[str, tuple[int, set[int]]]:
        found: dict[str, tuple[int, set[int]]] = {}
        for item in self.client.list(self.layout.sessions_prefix(self.machine)):
            parsed = self.layout.parse_machine_key(item.key)
            segment = self.layout.parse_segment(parsed[1]) if parsed else None
            if segment is None:
                continue
            valid, used = found.get(segment.rel, (0, set()))
            used.add(segment.generation)
            if segment.start == 0 and item.size > 0:
                valid = max(valid, segment.generation)
            found[segment.rel] = (valid, used)
        return found


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Backoff:
    """Exponential delays: ``initial``, doubling, capped at ``maximum``."""

    def __init__(self, initial: float = 1.0, maximum: float = 60.0) -> None:
        self.initial, self.maximum = initial, maximum
        self._next = initial

    def reset(self) -> None:
        self._next = self.initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self.maximum, self._next * 2)
        return delay


def run_sync_loop(
    engine: SyncEngine,
    *,
    once: bool,
    interval: float,
    retry_seconds: float,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Pass after pass; an unreachable store is retried with backoff.

    Exit status: 0 done (``--once``), 3 refused (claim or segment conflict), 75
    (EX_TEMPFAIL) when ``--once`` could not reach the store within ``retry_seconds``.
    """
    failing_since: float | None = None
    while True:
        try:
            result = engine.sync_once()
        except Unreachable as error:
            now = time.monotonic()
            failing_since = failing_since if failing_since is not None else now
            delay = backoff.next()
            if once and now - failing_since + delay > retry_seconds:
                log.error("store unreachable for %.0f s, giving up: %s", now - failing_since, error)
                return 75
            log.warning("store unreachable (%s); retrying in %.1f s", error, delay)
            sleep(delay)
            continue
        except ClaimedElsewhere as error:
            log.error("%s", error)
            return 3
        except NotFound as error:
            log.error("%s (does the bucket exist?)", error)
            return 2
        except StoreError as error:  # refused by the store (access denied, say)
            log.error("%s", error)
            return 2
        failing_since = None
        backoff.reset()
        log.debug(
            "pass done: %d segments, %d files refused", result.segments, len(result.conflicts)
        )
        if result.segments or result.blobs or once:  # a quiet loop logs nothing
            moment = engine.progress.now()
            log.info(
                "shipped %d segments, %d blobs, %d bytes; %d files looked at in %.1f s (%s)",
                result.segments,
                result.blobs,
                result.bytes,
                moment.files_done,
                moment.elapsed,
                rate_text(result.bytes, moment.elapsed),
            )
        if once:
            return 3 if result.conflicts else 0
        sleep(interval)
