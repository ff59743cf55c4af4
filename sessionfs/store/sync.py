"""The sync engine: ship an agent dir and the other agents' sessions to the store (an
S3 bucket or the local archive) and keep them shipped.

One pass (:meth:`SyncEngine.sync_once`) uploads, in this order:

1. blobs not yet shipped: ``blobs/<sha>`` (shared, content-addressed) and then the
   machine's marker ``machines/<m>/blobs/<sha>`` (so a marker implies the blob);
2. every session file (`sessionfs.store.archive_sources`: the agent dir's
   ``sessions/**/*.jsonl``, Claude Code's and Codex's files): the complete lines past
   the uploaded offset, as new segment objects. A file whose inode, size and mtime are
   those saved with its progress is unchanged and is not even opened: an unchanged
   pass is a ``stat`` per file.

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

from core.agent_homes import AgentHome
from sessionfs.view.progress_text import rate_text

from .archive_sources import ArchiveFile, agent_dir_files, agent_files, open_archive_file
from .claims import ClaimedElsewhere, take_claim
from .client import AlreadyExists, NotFound, StoreClient, StoreError, StoreFull, Unreachable
from .layout import KeyOutOfRange, SegmentKey, StoreLayout, is_blob_name, tree_key
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
    #: other agents' directories archived too (each by its connector's `archive_files`)
    agent_homes: tuple[AgentHome, ...] = ()


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


def _progress(
    handle: BinaryIO, file: ArchiveFile, generation: int, offset: int, *, done: bool
) -> FileProgress:
    """What is shipped of ``file``; ``done``: every complete line of it as listed, so the
    same inode, size and mtime next time mean nothing to ship (`_is_unchanged`)."""
    head = _read_at(handle, 0, min(HASH_SPAN, offset))
    tail_start = max(0, offset - HASH_SPAN)
    tail = _read_at(handle, tail_start, offset - tail_start)
    inode, size, mtime_ns = file.identity if done else (file.identity[0], -1, -1)
    return FileProgress(inode, generation, offset, _sha256(head), _sha256(tail), size, mtime_ns)


def _is_unchanged(file: ArchiveFile, known: FileProgress | None) -> bool:
    """Same inode, size and mtime as when its progress was saved: nothing to read."""
    return known is not None and file.identity == (
        known.inode,
        known.source_size,
        known.source_mtime_ns,
    )


def _was_replaced(handle: BinaryIO, known: FileProgress, file: ArchiveFile, size: int) -> bool:
    """New inode (the agents rewrite by rename; not for a file the agent moves, told by
    its bytes), shorter, or an uploaded byte changed."""
    if (not file.moves and file.identity[0] != known.inode) or size < known.offset:
        return True
    again = _progress(handle, file, known.generation, known.offset, done=False)
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
        #: tree key -> what the store holds of the file, listed once a pass when needed
        self._listed_generations: dict[str, _StoredFile] | None = None
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
            known = self.state.all_files()
            session_jobs = [
                pool.submit(self._ship_session, file, progress)
                for file in self._local_files()
                if not _is_unchanged(file, progress := known.get(tree_key(file.tree, file.rel)))
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

    def _local_files(self) -> Iterator[ArchiveFile]:
        """The agent dir's session files, then each other agent's; one file per store
        path (a Codex rollout both live and archived is archived once, live first)."""
        seen: set[tuple[str, str]] = set()
        sources = [agent_dir_files(self.options.agent_dir)]
        for home in self.options.agent_homes:
            files = agent_files(home)
            if files is None:  # a connector without `archive_files`: not archived yet
                log.debug("%s: its connector archives no file", home.agent)
                continue
            sources.append(files)
        for source in sources:
            for file in source:
                if (file.tree, file.rel) not in seen:
                    seen.add((file.tree, file.rel))
                    yield file

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

    def _ship_session(self, file: ArchiveFile, known: FileProgress | None) -> PassResult:
        name = tree_key(file.tree, file.rel)
        try:
            with open_archive_file(file) as handle:
                return self._ship_open_session(file, known, handle)
        except Unreachable:
            raise  # the whole pass is retried
        except OSError as error:
            log.warning("session %s unreadable: %s", file.path, error)
            return PassResult()
        except (SegmentConflict, KeyOutOfRange, StoreError) as error:
            # Once per file and reason: a running sync meets it again every pass.
            if self._refused.get(name) != str(error):
                log.error("%s: not synced: %s", name, error)
                self._refused[name] = str(error)
            return PassResult(conflicts=[name])

    def _ship_open_session(
        self, file: ArchiveFile, known: FileProgress | None, handle: BinaryIO
    ) -> PassResult:
        name = tree_key(file.tree, file.rel)
        size = os.fstat(handle.fileno()).st_size
        if known is not None and not _was_replaced(handle, known, file, size):
            generation, offset = known.generation, known.offset
            chunk = self._next_chunk(handle, offset, size)
        elif known is None and (resumed := self._resumable(name, file, handle))[0]:
            generation, offset = resumed
            chunk = self._next_chunk(handle, offset, size)
        else:
            offset = 0
            chunk = self._next_chunk(handle, offset, size)
            if not chunk:
                return PassResult()  # no whole line yet: no generation (no listing) either
            generation = self._next_generation(name, known.generation if known else 0)
            if known is not None:
                log.info("%s was rewritten: generation %d", name, generation)
        result = PassResult()
        while chunk:
            segment = SegmentKey(file.rel, generation, offset, file.tree)
            offset += self._put_segment(segment, chunk, handle)
            self.state.save_file(name, _progress(handle, file, generation, offset, done=False))
            result.segments += 1
            result.bytes += len(chunk)
            chunk = self._next_chunk(handle, offset, size)
        if offset:
            # All of it is shipped (or it was moved or compressed, or a line is still
            # being written): with its stat, the next pass knows it unchanged unread.
            self.state.save_file(name, _progress(handle, file, generation, offset, done=True))
        return result

    def _next_chunk(self, handle: BinaryIO, offset: int, size: int) -> bytes:
        """The next segment's bytes from ``offset`` (``size``: the file's size when the
        pass looked; a line still growing past it is read to its end): reads what is
        there, not a whole segment's worth of buffer for a small file."""
        if offset >= size:
            return b""
        return complete_lines(handle, offset, min(self.options.segment_bytes, size - offset))

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

    def _next_generation(self, name: str, above: int) -> int:
        """A new generation for the file: above ``above`` and above every valid one in
        the store, and not used by any key listed (junk included: its key is taken).
        Past the 8-digit width, writing the segment raises `KeyOutOfRange` and the file
        is refused."""
        stored = self._stored(name)
        generation = max(above, stored.valid) + 1
        while generation in stored.used:
            generation += 1
        return generation

    def _resumable(self, name: str, file: ArchiveFile, handle: BinaryIO) -> tuple[int, int]:
        """``(generation, offset)`` to go on from for a file with no saved progress: the
        store's newest valid generation when every segment of it is the file's own bytes
        (a sync killed before it saved the progress of a new file, or a lost state dir),
        so it is adopted, not shipped twice; ``(0, 0)`` when there is none."""
        stored = self._stored(name)
        segments = stored.segments.get(stored.valid, {})
        offset = 0
        while offset in segments:
            segment = SegmentKey(file.rel, stored.valid, offset, file.tree)
            size = self._adoptable_size(self.layout.segment(self.machine, segment), handle, offset)
            if size == 0 or size != segments[offset]:
                return 0, 0
            offset += size
        if offset == 0 or offset != sum(segments.values()):
            return 0, 0  # a gap: a generation readers cut short; not ours to go on
        log.info("%s: adopted generation %d already in the store", name, stored.valid)
        return stored.valid, offset

    def _stored(self, name: str) -> _StoredFile:
        """What the store holds of the file (its `tree_key`); from one listing a pass."""
        with self._generations_lock:
            if self._listed_generations is None:
                self._listed_generations = self._list_generations()
            return self._listed_generations.get(name) or _StoredFile()

    def _list_generations(self) -> dict[str, _StoredFile]:
        found: dict[str, _StoredFile] = {}
        for item in self.client.list(self.layout.machine_prefix(self.machine)):
            parsed = self.layout.parse_machine_key(item.key)
            segment = self.layout.parse_segment(parsed[1]) if parsed else None
            if segment is not None:
                found.setdefault(tree_key(segment.tree, segment.rel), _StoredFile()).add(
                    segment, item.size
                )
        return found


@dataclass
class _StoredFile:
    """One file's keys in the store."""

    #: the newest *valid* generation (0: none; valid: it has a non-empty segment at 0,
    #: as readers require)
    valid: int = 0
    #: every generation any key of the file names (junk included: its key is taken)
    used: set[int] = field(default_factory=set)
    #: generation -> start -> size
    segments: dict[int, dict[int, int]] = field(default_factory=dict)

    def add(self, segment: SegmentKey, size: int) -> None:
        self.used.add(segment.generation)
        self.segments.setdefault(segment.generation, {})[segment.start] = size
        if segment.start == 0 and size > 0:
            self.valid = max(self.valid, segment.generation)


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
    (EX_TEMPFAIL) when ``--once`` could not reach the store within ``retry_seconds``, or
    at once when the store is full (waiting would not make room; the next run goes on
    where this one stopped).
    """
    failing_since: float | None = None
    while True:
        try:
            result = engine.sync_once()
        except Unreachable as error:
            now = time.monotonic()
            failing_since = failing_since if failing_since is not None else now
            delay = backoff.next()
            if once and isinstance(error, StoreFull):
                log.error("%s; the next sync goes on from here", error)
                return 75
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
