"""Images in ``transcript.html``: which may be inlined as ``data:`` URIs, and how big.

A session is untrusted input, so an image is inlined only when its bytes *are* an
image of a type on `INLINE_TYPES` (told from its first bytes, whatever the message
claims: a "PNG" that holds HTML or SVG is not inlined), and only up to `IMAGE_CAP`
bytes each and `PAGE_IMAGE_BUDGET` per page, so a page's size stays bounded whatever
the session holds. Anything else is a link to the blob file in the mount (or a note,
for an inline image of the message itself, which has no file).

A blob is read only when whoever may read the session file may also read the blob
file (`BlobFiles`): inlining must not show a blob to a reader its own mode refuses.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from core.blobs import is_blob_hash
from core.safe_open import open_regular_with_stat
from sessionfs.view.access import FileAccess

__all__ = [
    "IMAGE_CAP",
    "INLINE_TYPES",
    "PAGE_IMAGE_BUDGET",
    "BlobFiles",
    "BlobRead",
    "ImageBudget",
    "ImageSource",
    "decode_base64_image",
    "sniff_image_type",
]

#: The media types a page inlines, by their files' first bytes (no SVG: it is a
#: document that may hold scripts and links, not a picture).
INLINE_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: Largest image inlined (decoded bytes); a bigger one is a link.
IMAGE_CAP: Final = 1024 * 1024
#: Inlined image bytes (decoded) per page; past it every image is a link.
PAGE_IMAGE_BUDGET: Final = 8 * 1024 * 1024


def sniff_image_type(data: bytes) -> str | None:
    """The `INLINE_TYPES` member ``data`` is, told from its magic bytes (``None``:
    none of them)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def decode_base64_image(text: str, cap: int) -> tuple[int, bytes | None]:
    """(decoded size, bytes) of base64 ``text``; bytes are ``None`` when it is bigger
    than ``cap`` (not decoded then) or not base64 (size 0)."""
    stripped = text.strip()
    size = len(stripped) // 4 * 3
    if size > cap + 3:
        return size, None
    try:
        data = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return 0, None
    return len(data), data if len(data) <= cap else None


@dataclass(frozen=True, slots=True)
class BlobRead:
    #: the blob file's size (``None``: no such blob, or not readable)
    size: int | None
    #: its bytes, when they were read (present, readable, at most the limit asked)
    data: bytes | None


class ImageSource(Protocol):
    """Where a page reads the blobs its messages refer to."""

    def read(self, sha: str, limit: int) -> BlobRead: ...


class BlobFiles:
    """The blob store of an xcsh agent dir, read for one session whose file has
    ``session_access``: a blob is read only if every reader of the session file may
    read it too (same owner; its read bits include the session file's)."""

    def __init__(self, blobs_dir: Path, session_access: FileAccess) -> None:
        self.blobs_dir = blobs_dir
        self.session_access = session_access

    def read(self, sha: str, limit: int) -> BlobRead:
        if not is_blob_hash(sha):
            return BlobRead(None, None)
        try:
            fd, st = open_regular_with_stat(self.blobs_dir / sha)
        except OSError:
            return BlobRead(None, None)
        try:
            if not self._as_readable(st):
                return BlobRead(None, None)
            if st.st_size > limit:
                return BlobRead(st.st_size, None)
            data = _read_up_to(fd, limit + 1)
        except OSError:
            return BlobRead(None, None)
        finally:
            os.close(fd)
        if len(data) > limit:  # grew since the stat (a blob never should)
            return BlobRead(len(data), None)
        return BlobRead(len(data), data)

    def _as_readable(self, st: os.stat_result) -> bool:
        """Whether every reader of the session file may read this blob file: the same
        owner, who may read it, and the session's group and other read bits (the
        group's only when the group is the same)."""
        session = self.session_access
        if st.st_uid != session.uid or not st.st_mode & stat.S_IRUSR:
            return False
        if session.mode & stat.S_IRGRP and (
            st.st_gid != session.gid or not st.st_mode & stat.S_IRGRP
        ):
            return False
        return not (session.mode & stat.S_IROTH and not st.st_mode & stat.S_IROTH)


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ImageBudget:
    """What one page may still inline (`PAGE_IMAGE_BUDGET`, at most `IMAGE_CAP` each)."""

    def __init__(self, total: int = PAGE_IMAGE_BUDGET, each: int = IMAGE_CAP) -> None:
        self.left = total
        self.each = each

    def limit(self) -> int:
        """The most the next image may be to be inlined."""
        return max(0, min(self.each, self.left))

    def spend(self, size: int) -> None:
        self.left -= size
