"""Rendered transcripts kept on disk (in ``--cache-dir``): ``RenderCache``.

One file per session file, named by a hash of its path below the sessions root::

    MAGIC | u32 length of the meta | meta (JSON) | the transcript's bytes

The meta names the session file's identity when it was rendered (device, inode, size,
mtime), the renderer's fingerprint, the sizes of the renderings and a CRC of the
transcript. A cache file is used only if all of that matches the session file as it is
now and the bytes check out: a changed session file (an append changes size and
mtime, a replacement the inode) is never served stale, and a corrupt or foreign file
is ignored and rendered again. Writes are atomic (a temporary file renamed over the
old one); any ``OSError`` (a full disk, a deleted or read-only cache dir) means "no
cache" and never an error for the reader. Deleting the cache dir loses nothing.

Synchronous: the daemon's render worker processes (`sessionfs.view.prerender`) write
and validate cache files; the daemon itself only ``pread``s validated ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import orjson

from sessionfs.view import loaded_session, render

__all__ = [
    "MAGIC",
    "CachedRender",
    "FileIdentity",
    "RenderCache",
    "renderer_fingerprint",
]

log = logging.getLogger(__name__)

MAGIC = b"SFSRNDR1"
_META_LENGTH = struct.Struct(">I")
#: A meta block larger than this is not one of ours (guards a garbage length field).
MAX_META = 64 * 1024


def renderer_fingerprint() -> str:
    """A hash of the code that renders: a cache written by another version of the
    renderer (an upgrade, a fix) is never served as if it were current."""
    digest = hashlib.sha256()
    for module in (render, loaded_session):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


_FINGERPRINT = renderer_fingerprint()


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """What identifies one state of a file: any append, truncation or replacement
    changes at least one field."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class CachedRender:
    """What is known of one session file's renderings (tiny: kept in memory per file)."""

    identity: FileIdentity
    #: byte sizes of the renderings made (``transcript.md`` always)
    sizes: dict[str, int]
    #: the cache file holding the transcript and its identity when validated, or
    #: ``None`` when it could not be stored (then the bytes come from a worker)
    stored: tuple[Path, FileIdentity] | None = None
    #: where the transcript's bytes start in the cache file
    data_offset: int = 0

    @property
    def transcript_size(self) -> int:
        return self.sizes["transcript.md"]


class RenderCache:
    """The cache files of one agent dir (``root`` = ``<cache dir>/agent-<hash>/renders``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, key: str) -> Path:
        """The cache file of the session file ``key`` (its path below the sessions root)."""
        digest = hashlib.sha256(os.fsencode(key)).hexdigest()[:40]
        return self.root / digest

    def load(self, key: str, identity: FileIdentity) -> tuple[CachedRender, bytes] | None:
        """The record and transcript for ``identity``, if a valid cache file has them."""
        path = self.path_for(key)
        try:
            with open(path, "rb") as f:
                cache_identity = FileIdentity.of(os.fstat(f.fileno()))
                blob = f.read()
        except OSError:
            return None
        parsed = _parse(blob, key, identity)
        if parsed is None:
            return None
        sizes, offset = parsed
        record = CachedRender(identity, sizes, (path, cache_identity), offset)
        return record, blob[offset:]

    def store(
        self, key: str, identity: FileIdentity, sizes: dict[str, int], transcript: bytes
    ) -> CachedRender | None:
        """Write the cache file atomically; ``None`` when it cannot be written."""
        meta = orjson.dumps(
            {
                "key": key,
                "identity": [identity.dev, identity.ino, identity.size, identity.mtime_ns],
                "renderer": _FINGERPRINT,
                "sizes": sizes,
                "crc32": zlib.crc32(transcript),
            }
        )
        head = MAGIC + _META_LENGTH.pack(len(meta)) + meta
        path = self.path_for(key)
        try:
            self.root.mkdir(parents=True, exist_ok=True)  # again after a deleted cache dir
            cache_identity = _write_atomically(path, head, transcript)
        except OSError as exc:
            log.debug("render cache: cannot store %s: %s", key, exc)
            return None
        return CachedRender(identity, sizes, (path, cache_identity), len(head))


def _write_atomically(path: Path, head: bytes, data: bytes) -> FileIdentity:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            f.write(data)
            f.flush()
            identity = FileIdentity.of(os.fstat(f.fileno()))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return identity


def _parse(blob: bytes, key: str, identity: FileIdentity) -> tuple[dict[str, int], int] | None:
    """(sizes, data offset) when ``blob`` is a valid cache file for ``key`` at
    ``identity``; ``None`` for anything else (stale, foreign, truncated, garbage)."""
    head = len(MAGIC) + _META_LENGTH.size
    if len(blob) < head or not blob.startswith(MAGIC):
        return None
    (meta_length,) = _META_LENGTH.unpack_from(blob, len(MAGIC))
    if meta_length > MAX_META or len(blob) < head + meta_length:
        return None
    try:
        meta = orjson.loads(blob[head : head + meta_length])
        expected = [identity.dev, identity.ino, identity.size, identity.mtime_ns]
        if meta["key"] != key or meta["identity"] != expected or meta["renderer"] != _FINGERPRINT:
            return None
        sizes = {str(k): int(v) for k, v in meta["sizes"].items()}
        data = memoryview(blob)[head + meta_length :]
        if len(data) != sizes["transcript.md"] or zlib.crc32(data) != meta["crc32"]:
            return None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None
    return sizes, head + meta_length
