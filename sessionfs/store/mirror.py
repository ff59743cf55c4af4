"""The reader: a local agent-dir tree per machine, built from the store's immutable objects.

``<cache>/machines/<m>/sessions/<rel>`` (and ``<cache>/machines/<m>/agents/<agent>/<rel>``
for another agent's file) is the concatenation of the newest generation's contiguous
segments from offset 0, and ``<cache>/machines/<m>/blobs/<sha>`` a hard link to
``<cache>/blobs/<sha>`` (each blob fetched once for every machine). A refresh fetches only
what is new: segments past the materialised size are appended; a newer generation is built
beside the file and renamed over it. The read-only mount serves ``machines/<m>/`` from here,
so its bytes are the bytes the machine's agent wrote.

A reader never trusts the store (docs/store.md, "Trust"): every object is streamed to disk
in pieces, never held whole, and checked as it comes (a blob hashed into a temp file that
is renamed only if it matches its name; a segment appended and cut back unless it has its
listed size and ends with ``\\n``). An object that failed is remembered by key, ETag and
size and not fetched again until it changes. A listing that fails part way, a gap, or a bad
segment ends that file's view at the last good byte, and the view never goes back to an
older generation or a shorter length. Machines without a session object, and machines
past :data:`MAX_MACHINES`, are not mirrored. Everything is created private (0600/0700).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from .client import ListedObject, StoreClient, StoreError
from .layout import MAX_MACHINES, SegmentKey, StoreLayout, split_tree_key, tree_key
from .mirror_state import FileState, MirrorState
from .private import make_private_dirs, private_temp

__all__ = ["MirrorResult", "StoreMirror", "StoreView"]

log = logging.getLogger("sessionfs.store.mirror")

#: ``--mirror-max-gb``'s default: room for a team's sessions, not for a runaway's junk.
DEFAULT_MAX_BYTES = 20 << 30

#: Blobs are kept in the mirror's state beside the files, under keys no ``<m>/<rel>``
#: can be (a machine name never starts with ``/``).
BLOB_STATE_PREFIX = "/blobs/"

#: start -> the listed segment (size and ETag)
Segments = dict[int, ListedObject]


@dataclass
class MachineView:
    #: file (its `tree_key`: the bare rel for ``sessions/``) -> generation -> start ->
    #: listed segment
    sessions: dict[str, dict[int, Segments]] = field(default_factory=dict)
    blobs: set[str] = field(default_factory=set)


@dataclass
class StoreView:
    machines: dict[str, MachineView] = field(default_factory=dict)
    #: The listing failed part way: what is here is a prefix of the store in key order.
    partial: bool = False
    #: why the listing stopped (``partial``), for the mount's ``ctl``
    error: str | None = None
    #: machine names left out: no session object, or past :data:`MAX_MACHINES`
    machines_ignored: int = 0


@dataclass
class MirrorResult:
    machines: list[str] = field(default_factory=list)
    files_changed: int = 0
    bytes_fetched: int = 0
    blobs_fetched: int = 0
    partial: bool = False
    #: why the listing stopped part way (the store unreachable, mostly)
    error: str | None = None
    machines_ignored: int = 0
    #: session files removed to stay under the disk budget by this refresh
    files_evicted: int = 0


def list_store(client: StoreClient, layout: StoreLayout) -> StoreView:
    """Every machine's segments and blob markers; a failing listing gives a partial view.

    Keys that do not parse (strictly: docs/store.md, "Strict keys") are skipped. A
    machine's keys come together (key order), so a machine without a session object is
    dropped as soon as its keys end, and once :data:`MAX_MACHINES` machines are kept the
    rest of the listing is only counted: a flood of machine names costs no memory.
    """
    view = StoreView()
    current: str | None = None
    try:
        for item in client.list(layout.machines_prefix()):
            parsed = layout.parse_machine_key(item.key)
            if parsed is None:
                continue
            name, rest = parsed
            if name != current:
                _drop_if_sessionless(view, current)
                current = name
                if len(view.machines) >= MAX_MACHINES:
                    view.machines_ignored += 1
            if name not in view.machines and len(view.machines) >= MAX_MACHINES:
                continue
            _add_key(view, name, rest, item, layout)
        _drop_if_sessionless(view, current)
    except StoreError as error:
        log.warning("store listing stopped part way (%s); showing what was listed", error)
        view.partial = True
        view.error = str(error)
        _drop_if_sessionless(view, current)
    return view


def _add_key(
    view: StoreView, name: str, rest: str, item: ListedObject, layout: StoreLayout
) -> None:
    segment = layout.parse_segment(rest)
    if segment is not None:
        machine = view.machines.setdefault(name, MachineView())
        generations = machine.sessions.setdefault(tree_key(segment.tree, segment.rel), {})
        generations.setdefault(segment.generation, {})[segment.start] = item
    elif (sha := layout.parse_machine_blob(rest)) is not None:
        view.machines.setdefault(name, MachineView()).blobs.add(sha)


def _drop_if_sessionless(view: StoreView, name: str | None) -> None:
    """A machine whose keys ended without one session object is not mirrored."""
    if name is None:
        return
    machine = view.machines.get(name)
    if machine is not None and not machine.sessions:
        del view.machines[name]
        view.machines_ignored += 1


def contiguous_chain(segments: Segments, start: int = 0) -> Iterator[tuple[int, ListedObject]]:
    """``(start, listed)`` of the segments that follow one another from ``start``, to a
    gap or an empty segment (no segment is empty: it holds at least one line)."""
    position = start
    while position in segments and segments[position].size > 0:
        listed = segments[position]
        yield position, listed
        position += listed.size


def started_generations(
    generations: dict[int, Segments], usable: Callable[[ListedObject], bool] = bool
) -> list[int]:
    """Generations that have a usable, non-empty segment at 0, newest first (a
    generation is written from its start; one without it is not there, or is junk)."""
    return sorted(
        (
            generation
            for generation, segments in generations.items()
            if 0 in segments and segments[0].size > 0 and usable(segments[0])
        ),
        reverse=True,
    )


def newest_generation(generations: dict[int, Segments]) -> int | None:
    started = started_generations(generations)
    return started[0] if started else None


@dataclass(frozen=True)
class _MirroredFile:
    target: Path
    machine: str
    #: the file's `tree_key`
    name: str
    generation: int
    segments: Segments

    def segment_key(self, start: int) -> SegmentKey:
        tree, rel = split_tree_key(self.name)
        return SegmentKey(rel, self.generation, start, tree)


class StoreMirror:
    """Keeps ``cache_dir`` in step with the store, one :meth:`refresh` at a time."""

    def __init__(
        self,
        client: StoreClient,
        cache_dir: Path,
        jobs: int = 8,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.client, self.cache_dir, self.jobs = client, cache_dir, jobs
        self.layout = StoreLayout(client.url)
        self.state = MirrorState(cache_dir)
        #: the disk budget (``--mirror-max-gb``) and what the mirror used at the last refresh
        self.max_bytes = max_bytes
        self.used_bytes = 0
        #: which files (state keys) may be evicted now; None: every one. An archive
        #: shown beside the live dirs evicts only its copies of files the agents still
        #: have, and fetches a copy back once it is the only one (`_fetch_back`)
        self.evictable: Callable[[str], bool] | None = None
        #: files read equally long ago go oldest written first, not in key order (an
        #: archive's: its mount reads the live files, so it reads none of them)
        self.by_age = False
        #: objects downloaded (whole or not) since this mirror was made
        self.downloads = 0
        self._downloads_lock = threading.Lock()

    def machine_dir(self, machine: str) -> Path:
        return self.cache_dir / "machines" / machine

    def refresh(self) -> MirrorResult:
        """List the store and bring every machine's tree up to the listed objects."""
        make_private_dirs(self.cache_dir)
        view = list_store(self.client, self.layout)
        result = MirrorResult(
            machines=sorted(view.machines),
            partial=view.partial,
            error=view.error,
            machines_ignored=view.machines_ignored,
        )
        self._fetch_back()
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            wanted = sorted(set().union(*(machine.blobs for machine in view.machines.values())))
            blob_jobs = [pool.submit(self._fetch_blob, sha) for sha in wanted]
            file_jobs = [
                pool.submit(self._mirror_session, machine, rel, generations)
                for machine, machine_view in view.machines.items()
                for rel, generations in machine_view.sessions.items()
            ]
            result.blobs_fetched = sum(job.result() for job in blob_jobs)
            self._link_blobs(view)
            for job in file_jobs:
                fetched = job.result()
                result.files_changed += fetched > 0
                result.bytes_fetched += fetched
        result.files_evicted = self._evict_over_budget()
        self.state.save()
        return result

    # -- the disk budget ---------------------------------------------------------------

    def _session_path(self, state_key: str) -> Path:
        machine, _, name = state_key.partition("/")
        return self.file_path(machine, name)

    def file_path(self, machine: str, name: str) -> Path:
        """Where the mirror keeps a machine's file (its `tree_key`)."""
        tree, rel = split_tree_key(name)
        return self.machine_dir(machine) / tree / rel

    def _paths_of(self, state_key: str) -> list[Path]:
        """The files of a session (one) or of a blob (the shared copy and each
        machine's link to it)."""
        if not state_key.startswith(BLOB_STATE_PREFIX):
            return [self._session_path(state_key)]
        sha = state_key.removeprefix(BLOB_STATE_PREFIX)
        links = (self.cache_dir / "machines").glob(f"*/blobs/{sha}")
        return [self.cache_dir / "blobs" / sha, *links]

    def _fetch_back(self) -> None:
        """Evicted files that may not be evicted now (`evictable`) are fetched by this
        refresh: an archive's copy of a file its agent has since deleted."""
        if self.evictable is None:
            return
        for key in self.state.evicted_keys():
            if not self.evictable(key):
                self.state.set_evicted(key, False)

    def _eviction_order(self, item: tuple[str, FileState]) -> tuple[int, int, str]:
        """Least recently read first (never read: 0), then with `by_age` the oldest
        written, then in key order."""
        key, state = item
        written = 0
        if self.by_age:
            with contextlib.suppress(OSError):
                written = self._paths_of(key)[0].stat().st_mtime_ns
        return state.read_ns, written, key

    def _evict_over_budget(self) -> int:
        """Remove whole files (sessions and blobs) that may be evicted (`evictable`),
        least recently read first (`_eviction_order`), until the mirror is under
        ``max_bytes``; returns how many. An evicted file is fetched again when the
        mount asks for it (`restore`, `restore_blob`) or, for an archive's, when it
        may no longer be evicted (`_fetch_back`)."""
        kept = self.state.kept_files()
        self.used_bytes = sum(state.size for _, state in kept)
        if self.used_bytes <= self.max_bytes:
            return 0
        may = self.evictable or (lambda key: True)
        evicted = 0
        for key, state in sorted(filter(lambda item: may(item[0]), kept), key=self._eviction_order):
            if self.used_bytes <= self.max_bytes:
                break
            try:
                for path in self._paths_of(key):
                    path.unlink(missing_ok=True)
            except OSError as error:
                log.warning("%s: not evicted: %s", key, error)
                continue
            self.state.set_evicted(key, True)
            self.used_bytes -= state.size
            evicted += 1
        return evicted

    def note_read(self, machine: str, rel: str) -> None:
        """The mount read ``rel`` of ``machine``: last in line for eviction."""
        self.state.mark_read(f"{machine}/{rel}", time.time_ns())

    def is_blob_evicted(self, sha: str) -> bool:
        known = self.state.file(blob_state_key(sha))
        return known is not None and known.evicted

    def note_blob_read(self, sha: str) -> None:
        self.state.mark_read(blob_state_key(sha), time.time_ns())

    def restore_blob(self, machine: str, sha: str) -> bool:
        """Fetch an evicted blob again and link it into ``machine``'s ``blobs/`` (the
        other machines get their links at the next refresh)."""
        state_key = blob_state_key(sha)
        known = self.state.file(state_key)
        if known is None or not known.evicted:
            return False
        self.state.set_evicted(state_key, False)
        self._fetch_blob(sha)
        self.state.mark_read(state_key, time.time_ns())
        self.state.save()
        shared = self.cache_dir / "blobs" / sha
        if not shared.exists():
            return False
        _link_or_copy(shared, self.machine_dir(machine) / "blobs" / sha)
        return True

    def is_evicted(self, machine: str, rel: str) -> bool:
        state = self.state.file(f"{machine}/{rel}")
        return state is not None and state.evicted

    def restore(self, machine: str, rel: str) -> bool:
        """Fetch an evicted file again (the mount asked for it), from a listing of its
        own keys; True when it is back on disk."""
        state_key = f"{machine}/{rel}"
        if not self.is_evicted(machine, rel):
            return False
        generations: dict[int, Segments] = {}
        tree, bare = split_tree_key(rel)
        for item in self.client.list(self.layout.session_prefix(machine, bare, tree)):
            parsed = self.layout.parse_machine_key(item.key)
            segment = self.layout.parse_segment(parsed[1]) if parsed else None
            if segment is not None and (segment.tree, segment.rel) == (tree, bare):
                generations.setdefault(segment.generation, {})[segment.start] = item
        self.state.set_evicted(state_key, False)
        self._mirror_session(machine, rel, generations)
        self.note_read(machine, rel)
        self.state.save()
        return self._session_path(state_key).exists()

    def fetch_file(self, machine: str, name: str, generations: dict[int, Segments]) -> Path | None:
        """Bring one file (its `tree_key`) of ``machine`` up to the listed segments now,
        by the reader rules; where it is in the mirror, or ``None`` when no generation of
        it could be fetched (`sessionfs restore`)."""
        self._mirror_session(machine, name, generations)
        target = self.file_path(machine, name)
        return target if target.exists() else None

    def _count_download(self) -> None:
        with self._downloads_lock:
            self.downloads += 1

    def _failed(self, key: str, listed: ListedObject) -> bool:
        return self.state.has_failed(key, listed.etag, listed.size)

    def _reject(self, key: str, etag: str, size: int, why: str) -> None:
        """Remember a bad object (not fetched again until it changes), warn once."""
        log.warning("%s: %s; not fetched again until it changes", key, why)
        self.state.record_failure(key, etag, size)

    # -- blobs -------------------------------------------------------------------------

    def _fetch_blob(self, sha: str) -> int:
        """Fetch a blob into the shared ``blobs/`` once; returns 1 when it was fetched now."""
        shared = self.cache_dir / "blobs" / sha
        if self.state.file(blob_state_key(sha)) is None and shared.exists():
            self.state.set_file(blob_state_key(sha), 0, shared.stat().st_size)  # older mirror
        known = self.state.file(blob_state_key(sha))
        if known is not None and (known.evicted or shared.exists()):
            return 0  # here, or evicted: fetched again when the mount asks for it
        key = self.layout.blob(sha)
        try:
            if self.state.failed_before(key) and self._failed(key, self.client.head(key)):
                return 0
            make_private_dirs(shared.parent)
            return self._download_blob(key, sha, shared)
        except (OSError, StoreError) as error:
            log.warning("blob %s not fetched: %s", sha, error)
            return 0

    def _download_blob(self, key: str, sha: str, shared: Path) -> int:
        with self.client.download(key) as download, private_temp(shared.parent, sha) as temp:
            self._count_download()
            digest = hashlib.sha256()
            for chunk in download.chunks:
                digest.update(chunk)
                temp.handle.write(chunk)
            if digest.hexdigest() != sha:
                self._reject(key, download.etag, download.size, "does not hash to its name")
                return 0
            temp.commit(shared)
            self.state.set_file(blob_state_key(sha), 0, download.size)
        self.state.forget_failure(key)
        return 1

    def _link_blobs(self, view: StoreView) -> None:
        """Each machine's ``blobs/<sha>``: a hard link to the shared copy, once it is here."""
        for machine, machine_view in view.machines.items():
            for sha in machine_view.blobs:
                shared = self.cache_dir / "blobs" / sha
                if shared.exists():
                    _link_or_copy(shared, self.machine_dir(machine) / "blobs" / sha)

    # -- sessions ----------------------------------------------------------------------

    def _mirror_session(self, machine: str, rel: str, generations: dict[int, Segments]) -> int:
        """Bring one file up to the store; returns the bytes fetched (0: unchanged)."""
        state_key = f"{machine}/{rel}"
        current = self.state.file(state_key)
        if current is not None and current.evicted:
            return 0  # fetched again when the mount asks for it
        target = self.file_path(machine, rel)
        for generation in started_generations(
            generations, lambda listed: not self._failed(listed.key, listed)
        ):
            if current is not None and generation < current.generation:
                return 0  # never back to an older generation
            self._keep_older(machine, rel, generations, generation)
            file = _MirroredFile(target, machine, rel, generation, generations[generation])
            try:
                same = current is not None and generation == current.generation
                if same and current is not None and _has_size(target, current.size):
                    return self._grow(file, state_key, current.size)
                size = self._rebuild(file)
            except (OSError, StoreError) as error:
                log.warning("%s/%s: not brought up to date: %s", machine, rel, error)
                return 0
            if size > 0:
                self.state.set_file(state_key, generation, size)
                return size
            # Its first segment failed (and is remembered): the next older one may do.
        return 0

    def generations_dir(self, machine: str, name: str) -> Path:
        """Where the older generations of a machine's file (its `tree_key`) are kept,
        ``g<gen>.jsonl`` each (`_keep_older`)."""
        tree, rel = split_tree_key(name)
        return self.generations_tree(machine, tree) / rel

    def generations_tree(self, machine: str, tree: str) -> Path:
        return self.cache_dir / "generations" / machine / tree

    def _keep_older(
        self, machine: str, name: str, generations: dict[int, Segments], shown: int
    ) -> None:
        """Each generation older than the one shown, written once beside the mirror (a
        sync never adds to a generation once a newer one exists): a file rewritten or
        replaced keeps what it held before reachable (the mount's ``generations/``)."""
        if len(generations) < 2:
            return
        directory = self.generations_dir(machine, name)
        for generation in started_generations(generations):
            target = directory / f"g{generation:08d}.jsonl"
            if generation >= shown or target.exists():
                continue
            older = _MirroredFile(target, machine, name, generation, generations[generation])
            try:
                self._rebuild(older)
            except (OSError, StoreError) as error:
                log.warning("%s/%s g%d: not kept: %s", machine, name, generation, error)

    def _grow(self, file: _MirroredFile, state_key: str, size: int) -> int:
        """Append the segments past ``size``; returns the bytes fetched."""
        if size not in file.segments:
            return 0  # nothing new: never touch the file (its mtime is a change)
        with file.target.open("r+b") as handle:
            if os.fstat(handle.fileno()).st_size != size:
                handle.truncate(size)  # bytes a killed refresh appended but never recorded
            handle.seek(size)
            end = self._write_chain(file, size, handle)
        if end > size:
            self.state.set_file(state_key, file.generation, end)
        return end - size

    def _rebuild(self, file: _MirroredFile) -> int:
        """Write the generation beside the file and rename it over (0: nothing fetched)."""
        make_private_dirs(file.target.parent)
        with private_temp(file.target.parent, file.target.name) as temp:
            size = self._write_chain(file, 0, temp.handle)
            if size > 0:
                temp.commit(file.target)
        return size

    def _write_chain(self, file: _MirroredFile, start: int, handle: BinaryIO) -> int:
        """Append each contiguous segment from ``start`` up to a gap or a bad one;
        returns where the good bytes end."""
        end = start
        for position, listed in contiguous_chain(file.segments, start):
            key = self.layout.segment(file.machine, file.segment_key(position))
            if self._failed(key, listed) or not self._append_segment(key, listed, handle):
                break
            end = position + listed.size
        if end > start:
            _stamp(handle, file.segments, end)
        return end

    def _append_segment(self, key: str, listed: ListedObject, handle: BinaryIO) -> bool:
        """Stream one segment onto ``handle``; cut it off again unless it is whole: its
        listed size exactly, ending with ``\\n``."""
        begin = handle.tell()
        whole, written, last = False, 0, b""
        try:
            with self.client.download(key) as download:
                self._count_download()
                for chunk in download.chunks:
                    written += len(chunk)
                    if written > listed.size:
                        break
                    handle.write(chunk)
                    last = chunk[-1:] or last
                whole = written == listed.size and last == b"\n"
        finally:
            if not whole:
                handle.seek(begin)
                handle.truncate(begin)
        if not whole:
            why = f"not a whole segment ({written} bytes, {listed.size} listed, or no final \\n)"
            self._reject(key, listed.etag, listed.size, why)
        return whole


def _stamp(handle: BinaryIO, segments: Segments, end: int) -> None:
    """The file's mtime: when the newest of its segments up to ``end`` was stored (so a
    file only the archive holds shows when it was last archived, and sorts by it)."""
    newest = max(
        (listed.modified for position, listed in contiguous_chain(segments) if position < end),
        default=0.0,
    )
    if newest > 0:
        handle.flush()  # a later flush would set the mtime again
        os.utime(handle.fileno(), (newest, newest))


def blob_state_key(sha: str) -> str:
    return BLOB_STATE_PREFIX + sha


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size >= size
    except FileNotFoundError:
        return False


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        return
    make_private_dirs(target.parent)
    try:
        os.link(source, target)
    except FileExistsError:
        return
    except OSError:  # another file system: a private copy
        with source.open("rb") as data, private_temp(target.parent, target.name) as temp:
            shutil.copyfileobj(data, temp.handle)
            temp.commit(target)
