"""Rendered transcripts kept on disk (in ``--cache-dir``): ``RenderCache``.

One file per session file, named by a hash of its path below the sessions root::

    MAGIC | u32 length of the meta | u32 CRC of the meta | meta (JSON) | transcript

The meta names the session file's identity when it was rendered (device, inode, size,
mtime), the renderer's fingerprint, the sizes of the renderings and a CRC of the
transcript. A cache file is used only if all of that matches the session file as it is
now: a changed session file (an append changes size and mtime, a replacement the
inode) is never served stale, and a foreign file is ignored and rendered again.

What protects against a corrupt cache file without reading it twice: writes are
atomic (a temporary file renamed over the old one, so a crash never leaves half a file
under the real name); the header carries its own CRC; and the cache file's length must
be exactly the header plus the transcript's recorded size (a truncated or appended-to
file is rejected). `RenderCache.validate` checks just that, with one small read of the
head, so a remount serves a cached transcript with a header read and ``pread``s of the
body it was going to read anyway. The transcript's own CRC is checked where the body
is read whole in one place (`RenderCache.load`, the worker's path); the streamed path
trusts the file system for the body's bytes, as it does for the session files.

Any ``OSError`` (a full disk, a deleted or read-only cache dir) means "no cache" and
never an error for the reader. Deleting the cache dir loses nothing.

Synchronous: the daemon's render worker processes (`sessionfs.view.prerender`) write
cache files; the daemon validates and ``pread``s them (in a thread).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from core.file_identity import FileIdentity
from core.private_files import make_private_dirs
from sessionfs.view import (
    branch_pages,
    html_images,
    loaded_session,
    render,
    render_html,
    render_svg,
    renderings,
    streamed_json,
    streamed_render,
)

__all__ = [
    "MAGIC",
    "TEMP_PREFIX",
    "CachedRender",
    "EntryHead",
    "FileIdentity",
    "RenderCache",
    "entry_name",
    "read_entry_head",
    "renderer_fingerprint",
]

log = logging.getLogger(__name__)

MAGIC = b"SFSRNDR2"
#: the meta's length and CRC, after the magic
_HEAD = struct.Struct(">II")
_HEAD_SIZE = len(MAGIC) + _HEAD.size
#: A first read of the head this big holds the whole meta of every normal cache file.
_FIRST_READ = 4096
#: A meta block larger than this is not one of ours (guards a garbage length field).
MAX_META = 64 * 1024
#: Hex digits in a cache file's name (`entry_name`).
ENTRY_NAME_CHARS = 40
#: Cache files being written are named so (then renamed over the real name).
TEMP_PREFIX = ".tmp-"
#: What a cache file holds unless told otherwise.
TRANSCRIPT = "transcript.md"


def renderer_fingerprint() -> str:
    """A hash of the code that renders: a cache written by another version of the
    renderer (an upgrade, a fix) is never served as if it were current."""
    digest = hashlib.sha256()
    for module in (
        render,
        renderings,
        loaded_session,
        render_html,
        html_images,
        branch_pages,
        render_svg,
        streamed_render,
        streamed_json,
    ):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


_FINGERPRINT = renderer_fingerprint()


@dataclass(frozen=True, slots=True)
class CachedRender:
    """What is known of one session file's renderings (tiny: kept in memory per file)."""

    identity: FileIdentity
    #: byte sizes of the renderings made (the `body` always)
    sizes: dict[str, int]
    #: the cache file holding the transcript and its identity when validated, or
    #: ``None`` when it could not be stored (then the bytes come from a worker)
    stored: tuple[Path, FileIdentity] | None = None
    #: where the transcript's bytes start in the cache file
    data_offset: int = 0
    #: the transcript's CRC as stored (checked where the body is read whole)
    crc32: int = 0
    #: the rendering the cache file holds: ``transcript.md``, or ``transcript.html``
    #: in the pages' cache
    body: str = TRANSCRIPT

    @property
    def transcript_size(self) -> int:
        """The size of the `body`."""
        return self.sizes[self.body]


class RenderCache:
    """The cache files of one agent dir (``root`` = ``<cache dir>/agent-<hash>/renders``)
    holding one rendering each, ``body`` (the pages' cache: ``.../pages``, holding
    ``transcript.html``)."""

    def __init__(self, root: Path, body: str = TRANSCRIPT) -> None:
        self.root = root
        self.body = body

    def path_for(self, key: str) -> Path:
        """The cache file of the session file ``key`` (its path below the sessions root)."""
        return self.root / entry_name(key)

    def validate(
        self, key: str, identity: FileIdentity, prefetch: bool = False
    ) -> CachedRender | None:
        """The record for ``identity`` if the cache file has it, intact as far as its
        head and length tell (one small read; see the module doc). ``prefetch``: the
        transcript is about to be read, so the kernel starts reading it all now."""
        path = self.path_for(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            record = _validate_open(fd, path, key, identity, self.body)
            if record is not None and prefetch:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            return record
        except OSError:
            return None
        finally:
            os.close(fd)

    def load(self, key: str, identity: FileIdentity) -> tuple[CachedRender, bytes] | None:
        """The record and transcript for ``identity``, if a valid cache file has them
        (the transcript's CRC checked too: it is read whole here anyway)."""
        record = self.validate(key, identity)
        if record is None or record.stored is None:
            return None
        path, validated = record.stored
        try:
            with open(path, "rb", opener=_no_follow) as f:
                if FileIdentity.of(os.fstat(f.fileno())) != validated:
                    return None  # replaced since it was validated
                f.seek(record.data_offset)
                data = f.read()
        except OSError:
            return None
        if len(data) != record.transcript_size or zlib.crc32(data) != record.crc32:
            return None
        return record, data

    def store(
        self, key: str, identity: FileIdentity, sizes: dict[str, int], transcript: bytes
    ) -> CachedRender | None:
        """Write the cache file atomically; ``None`` when it cannot be written."""
        crc = zlib.crc32(transcript)
        meta = _meta(key, identity, sizes, crc)
        head = MAGIC + _HEAD.pack(len(meta), zlib.crc32(meta)) + meta
        path = self.path_for(key)
        try:
            make_private_dirs(self.root)  # again after a deleted cache dir
            cache_identity = _write_atomically(path, head, transcript)
        except OSError as exc:
            log.debug("render cache: cannot store %s: %s", key, exc)
            return None
        return CachedRender(identity, sizes, (path, cache_identity), len(head), crc, self.body)

    def store_streamed(
        self,
        key: str,
        identity: FileIdentity,
        sizes: dict[str, int],
        write_body: Callable[[BinaryIO], None],
    ) -> CachedRender | None:
        """`store` of a body written by ``write_body`` into the cache file itself (a
        rendering too big to hold: `sessionfs.view.streamed_render`). The head goes
        first as room of the largest size its meta can take, and is written there once
        the body's size and CRC are known, its meta padded with spaces (JSON allows
        them); the file is renamed into place complete, as `store`'s. ``None`` when it
        cannot be written (the body then cannot be had at all: the caller says why)."""
        room = len(_meta(key, identity, {**sizes, self.body: _LARGEST_SIZE}, 0xFFFFFFFF))
        path = self.path_for(key)
        try:
            make_private_dirs(self.root)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX)
        except OSError as exc:
            log.debug("render cache: cannot store %s: %s", key, exc)
            return None
        try:
            with os.fdopen(fd, "w+b") as f:
                offset = _HEAD_SIZE + room
                f.seek(offset)
                write_body(f)
                f.flush()
                size = f.tell() - offset
                crc = _crc_of(f.fileno(), offset, size)
                sizes = {**sizes, self.body: size}
                meta = _meta(key, identity, sizes, crc).ljust(room)
                os.pwrite(f.fileno(), MAGIC + _HEAD.pack(room, zlib.crc32(meta)) + meta, 0)
                cache_identity = FileIdentity.of(os.fstat(f.fileno()))
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                log.debug("render cache: cannot store %s: %s", key, exc)
                return None
            raise
        return CachedRender(identity, sizes, (path, cache_identity), offset, crc, self.body)


#: A size no rendering reaches, for the room a streamed cache file's head takes.
_LARGEST_SIZE = 10**15
#: How much of a streamed body one read takes when its CRC is worked out.
_CRC_CHUNK = 1 << 20


def _meta(key: str, identity: FileIdentity, sizes: dict[str, int], crc: int) -> bytes:
    return orjson.dumps(
        {
            "key": key,
            "identity": [identity.dev, identity.ino, identity.size, identity.mtime_ns],
            "renderer": _FINGERPRINT,
            "sizes": sizes,
            "crc32": crc,
        }
    )


def _crc_of(fd: int, offset: int, size: int) -> int:
    """The CRC of ``size`` bytes of a file from ``offset``, read a chunk at a time."""
    crc = 0
    end = offset + size
    while offset < end:
        chunk = os.pread(fd, min(_CRC_CHUNK, end - offset), offset)
        if not chunk:
            raise OSError(f"cache file shorter than written ({offset} of {end})")
        crc = zlib.crc32(chunk, crc)
        offset += len(chunk)
    return crc


def entry_name(key: str) -> str:
    """The cache file name of the session file ``key``: 40 hex digits of its hash."""
    return hashlib.sha256(os.fsencode(key)).hexdigest()[:ENTRY_NAME_CHARS]


def _no_follow(path: str, flags: int) -> int:
    """Cache files have fixed names: a symlink (or FIFO) planted at one is never read
    through; the validation that follows rejects whatever it is."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)


def _write_atomically(path: Path, head: bytes, data: bytes) -> FileIdentity:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX)
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


@dataclass(frozen=True, slots=True)
class EntryHead:
    """What a cache file's head says it holds: the session file (``key``, its path
    below the sessions root) and the identity it was rendered from."""

    key: str
    identity: FileIdentity


def read_entry_head(fd: int) -> EntryHead | None:
    """The head of an open cache file, if it is intact and ours (`sessionfs.view.
    render_cache_cleanup` uses it to tell which session file an entry belongs to)."""
    read = _read_meta(fd)
    if read is None:
        return None
    meta, _offset = read
    try:
        dev, ino, size, mtime_ns = (int(v) for v in meta["identity"])
        return EntryHead(str(meta["key"]), FileIdentity(dev, ino, size, mtime_ns))
    except (KeyError, TypeError, ValueError):
        return None


def _read_meta(fd: int) -> tuple[dict[str, Any], int] | None:
    """The meta block of an open cache file and the offset where the transcript
    starts, if the head is intact (magic, sane length, CRC, a JSON object)."""
    head = os.pread(fd, _FIRST_READ, 0)
    if len(head) < _HEAD_SIZE or not head.startswith(MAGIC):
        return None
    meta_length, meta_crc = _HEAD.unpack_from(head, len(MAGIC))
    if meta_length > MAX_META:
        return None
    offset = _HEAD_SIZE + meta_length
    if len(head) < offset:
        head += os.pread(fd, offset - len(head), len(head))
    meta_bytes = head[_HEAD_SIZE:offset]
    if len(meta_bytes) != meta_length or zlib.crc32(meta_bytes) != meta_crc:
        return None
    try:
        meta = orjson.loads(meta_bytes)
    except orjson.JSONDecodeError:
        return None
    return (meta, offset) if isinstance(meta, dict) else None


def _validate_open(
    fd: int, path: Path, key: str, identity: FileIdentity, body: str
) -> CachedRender | None:
    cache_identity = FileIdentity.of(os.fstat(fd))
    read = _read_meta(fd)
    if read is None:
        return None
    meta, offset = read
    parsed = _parse_meta(meta, key, identity, body)
    if parsed is None:
        return None
    sizes, crc = parsed
    if cache_identity.size != offset + sizes[body]:
        return None  # truncated, or something appended
    return CachedRender(identity, sizes, (path, cache_identity), offset, crc, body)


def _parse_meta(
    meta: dict[str, Any], key: str, identity: FileIdentity, body: str
) -> tuple[dict[str, int], int] | None:
    """(sizes, body CRC) when the meta is ours, for ``key`` at ``identity``, and holds
    ``body``."""
    try:
        expected = [identity.dev, identity.ino, identity.size, identity.mtime_ns]
        if meta["key"] != key or meta["identity"] != expected or meta["renderer"] != _FINGERPRINT:
            return None
        sizes = {str(k): int(v) for k, v in meta["sizes"].items()}
        if sizes[body] < 0:
            return None
        return sizes, int(meta["crc32"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
