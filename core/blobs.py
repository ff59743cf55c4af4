"""Content-addressed blob store: ``<agent>/blobs/<sha256-hex>``, raw bytes, no extension."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Final

from core.private_files import create_new_private, make_private_dirs

__all__ = [
    "BLOB_REF_PREFIX",
    "BlobStore",
    "blob_ref",
    "is_blob_hash",
    "may_contain_blob_refs",
    "parse_blob_ref",
]

BLOB_REF_PREFIX: Final = "blob:sha256:"
_HASH_RE = re.compile(r"[0-9a-f]{64}")


def is_blob_hash(value: str) -> bool:
    """A lowercase sha256 hex digest: the only names the store ever reads or writes."""
    return _HASH_RE.fullmatch(value) is not None


def blob_ref(sha: str) -> str:
    return BLOB_REF_PREFIX + sha


def parse_blob_ref(value: object) -> str | None:
    """The hash inside ``blob:sha256:<hex>``, or ``None`` when ``value`` is not a ref."""
    if isinstance(value, str) and value.startswith(BLOB_REF_PREFIX):
        sha = value[len(BLOB_REF_PREFIX) :]
        if is_blob_hash(sha):
            return sha
    return None


class BlobStore:
    """Immutable blobs named by the sha256 of their bytes.

    ``put`` is idempotent: an existing blob is never rewritten, and a new one appears
    atomically (temp file + rename), so readers never see a partial blob.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, sha: str) -> Path:
        if not is_blob_hash(sha):
            # Hostile names (../, /) must never become paths outside the store.
            raise ValueError(f"not a sha256 blob name: {sha!r}")
        return self.directory / sha

    def has(self, sha: str) -> bool:
        return is_blob_hash(sha) and self.path_for(sha).is_file()

    def get(self, sha: str) -> bytes | None:
        if not is_blob_hash(sha):
            return None
        try:
            return self.path_for(sha).read_bytes()
        except OSError:
            return None

    def put(self, data: bytes) -> tuple[str, Path, str]:
        """Store ``data``; returns ``(hash, path, "blob:sha256:<hash>")``."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.path_for(sha)
        if not path.exists():
            make_private_dirs(self.directory)
            tmp = self.directory / f".{sha}.{secrets.token_hex(4)}.tmp"
            try:
                with open(create_new_private(tmp), "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
        return sha, path, blob_ref(sha)


def may_contain_blob_refs(data: bytes) -> bool:
    """Cheap pre-check on raw file bytes: only files that mention a ref need resolving."""
    return BLOB_REF_PREFIX.encode() in data
