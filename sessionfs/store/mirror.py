"""The reader: a local agent-dir tree per machine, built from the store's immutable objects.

``<cache>/machines/<m>/sessions/<rel>`` is the concatenation of the newest generation's
contiguous segments from offset 0, and ``<cache>/machines/<m>/blobs/<sha>`` a hard link to
``<cache>/blobs/<sha>`` (each blob fetched once for every machine). A refresh fetches only
what is new: segments past the materialised size are appended; a newer generation is built
beside the file and renamed over it. The read-only mount serves ``machines/<m>/`` from here,
so its bytes are the bytes the machine's agent wrote.

A reader never trusts the store to be complete: a listing that fails part way, a gap
between segments, or a segment that does not end with ``\\n`` ends that file's view at the
last good byte, and the view never goes back to an older generation or a shorter length.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from .client import StoreClient, StoreError
from .layout import SegmentKey, StoreLayout

__all__ = ["MirrorResult", "StoreMirror", "StoreView"]

log = logging.getLogger("sessionfs.store.mirror")

STATE_NAME = "mirror-state.json"


@dataclass
class MachineView:
    #: rel -> generation -> start -> size
    sessions: dict[str, dict[int, dict[int, int]]] = field(default_factory=dict)
    blobs: set[str] = field(default_factory=set)


@dataclass
class StoreView:
    machines: dict[str, MachineView] = field(default_factory=dict)
    #: The listing failed part way: what is here is a prefix of the store in key order.
    partial: bool = False
    #: why the listing stopped (``partial``), for the mount's ``ctl``
    error: str | None = None


@dataclass
class MirrorResult:
    machines: list[str] = field(default_factory=list)
    files_changed: int = 0
    bytes_fetched: int = 0
    blobs_fetched: int = 0
    partial: bool = False
    #: why the listing stopped part way (the store unreachable, mostly)
    error: str | None = None


def list_store(client: StoreClient, layout: StoreLayout) -> StoreView:
    """Every machine's segments and blob markers; a failing listing gives a partial view."""
    view = StoreView()
    try:
        for item in client.list(layout.machines_prefix()):
            parsed = layout.parse_machine_key(item.key)
            if parsed is None:
                continue
            machine = view.machines.setdefault(parsed[0], MachineView())
            segment = layout.parse_segment(parsed[1])
            if segment is not None:
                generations = machine.sessions.setdefault(segment.rel, {})
                generations.setdefault(segment.generation, {})[segment.start] = item.size
                continue
            sha = layout.parse_machine_blob(parsed[1])
            if sha is not None:
                machine.blobs.add(sha)
    except StoreError as error:
        log.warning("store listing stopped part way (%s); showing what was listed", error)
        view.partial = True
        view.error = str(error)
    return view


def contiguous_chain(segments: dict[int, int], start: int = 0) -> Iterator[tuple[int, int]]:
    """``(start, size)`` of the segments that follow one another from ``start``, to a gap."""
    position = start
    while position in segments and segments[position] > 0:
        size = segments[position]
        yield position, size
        position += size


def newest_generation(generations: dict[int, dict[int, int]]) -> int | None:
    """The newest generation that has its first segment (a generation starts at 0)."""
    started = [generation for generation, segments in generations.items() if 0 in segments]
    return max(started, default=None)


class StoreMirror:
    """Keeps ``cache_dir`` in step with the store, one :meth:`refresh` at a time."""

    def __init__(self, client: StoreClient, cache_dir: Path, jobs: int = 8) -> None:
        self.client, self.cache_dir, self.jobs = client, cache_dir, jobs
        self.layout = StoreLayout(client.url)
        self._state_path = cache_dir / STATE_NAME
        self._files: dict[str, dict[str, int]] = self._load_state()

    def machine_dir(self, machine: str) -> Path:
        return self.cache_dir / "machines" / machine

    def _load_state(self) -> dict[str, dict[str, int]]:
        try:
            loaded = orjson.loads(self._state_path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}
        return dict(loaded.get("files", {})) if isinstance(loaded, dict) else {}

    def _save_state(self) -> None:
        temporary = self._state_path.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps({"files": self._files}))
        os.replace(temporary, self._state_path)

    def refresh(self) -> MirrorResult:
        """List the store and bring every machine's tree up to the listed objects."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        view = list_store(self.client, self.layout)
        result = MirrorResult(
            machines=sorted(view.machines), partial=view.partial, error=view.error
        )
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
        self._save_state()
        return result

    # -- blobs -------------------------------------------------------------------------

    def _fetch_blob(self, sha: str) -> int:
        """Fetch a blob into the shared ``blobs/`` once; returns 1 when it was fetched now."""
        shared = self.cache_dir / "blobs" / sha
        if shared.exists():
            return 0
        try:
            data = self.client.get(self.layout.blob(sha))
        except StoreError as error:
            log.warning("blob %s not fetched: %s", sha, error)
            return 0
        if hashlib.sha256(data).hexdigest() != sha:
            log.warning("blob %s: the store's bytes do not hash to its name; skipped", sha)
            return 0
        _write_atomically(shared, data)
        return 1

    def _link_blobs(self, view: StoreView) -> None:
        """Each machine's ``blobs/<sha>``: a hard link to the shared copy, once it is here."""
        for machine, machine_view in view.machines.items():
            for sha in machine_view.blobs:
                shared = self.cache_dir / "blobs" / sha
                if shared.exists():
                    _link_or_copy(shared, self.machine_dir(machine) / "blobs" / sha)

    # -- sessions ----------------------------------------------------------------------

    def _mirror_session(
        self, machine: str, rel: str, generations: dict[int, dict[int, int]]
    ) -> int:
        """Bring one file up to the store; returns the bytes fetched (0: unchanged)."""
        state_key = f"{machine}/{rel}"
        current = self._files.get(state_key)
        generation = newest_generation(generations)
        if generation is None or (current and generation < current["generation"]):
            return 0
        file = _MirroredFile(
            target=self.machine_dir(machine) / "sessions" / rel,
            machine=machine,
            rel=rel,
            generation=generation,
            segments=generations[generation],
        )
        try:
            same = current is not None and generation == current["generation"]
            if current and same and _has_size(file.target, current["size"]):
                if current["size"] not in file.segments:
                    return 0  # nothing new: never touch the file (its mtime is a change)
                size = self._append(file, current["size"])
                fetched = size - current["size"]
            else:
                size = self._rebuild(file)
                fetched = size
        except (OSError, StoreError) as error:
            log.warning("%s/%s: not brought up to date: %s", machine, rel, error)
            return 0
        if size == 0:
            return 0
        self._files[state_key] = {"generation": generation, "size": size}
        return fetched

    def _fetched_chain(self, file: _MirroredFile, start: int) -> Iterator[bytes]:
        """The bytes of each contiguous segment from ``start``, up to a gap or a bad one."""
        for position, size in contiguous_chain(file.segments, start):
            key = self.layout.segment(file.machine, SegmentKey(file.rel, file.generation, position))
            data = self.client.get(key)
            if len(data) != size or not data.endswith(b"\n"):
                log.warning("%s: not a whole segment (%d of %d bytes); stop", key, len(data), size)
                return
            yield data

    def _append(self, file: _MirroredFile, size: int) -> int:
        with file.target.open("r+b") as handle:
            if os.fstat(handle.fileno()).st_size != size:
                handle.truncate(size)  # bytes a killed refresh appended but never recorded
            handle.seek(size)
            for data in self._fetched_chain(file, size):
                handle.write(data)
                size += len(data)
        return size

    def _rebuild(self, file: _MirroredFile) -> int:
        """Write the generation beside the file and rename it over (0: nothing fetched)."""
        file.target.parent.mkdir(parents=True, exist_ok=True)
        temporary = file.target.with_name(f".{file.target.name}.g{file.generation}.tmp")
        size = 0
        with temporary.open("wb") as handle:
            for data in self._fetched_chain(file, 0):
                handle.write(data)
                size += len(data)
        if size == 0:
            temporary.unlink()
            return 0
        os.replace(temporary, file.target)
        return size


@dataclass(frozen=True)
class _MirroredFile:
    target: Path
    machine: str
    rel: str
    generation: int
    #: start -> size of the generation's listed segments
    segments: dict[int, int]


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size >= size
    except FileNotFoundError:
        return False


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _link_or_copy(source: Path, target: Path) -> None:
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        return
    except OSError:
        shutil.copyfile(source, target)
