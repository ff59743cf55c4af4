"""Store addresses: ``s3://BUCKET[/PREFIX]`` (a team store) and ``file:///ABS/DIR`` (a
directory store: the local archive). Both give object keys the same way (`key`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

__all__ = ["AnyStoreURL", "DirStoreURL", "StoreURL", "StoreURLError", "parse_store_url"]

# S3's bucket naming rules (lower case, digits, dots, hyphens; 3 to 63 characters).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_FILE_SCHEME = "file://"


class StoreURLError(ValueError):
    """The text is not a store address."""


def _joined(prefix: str, parts: tuple[str, ...]) -> str:
    joined = "/".join(parts)
    return f"{prefix}/{joined}" if prefix else joined


@dataclass(frozen=True)
class StoreURL:
    """An S3 store."""

    bucket: str
    #: Key prefix without leading or trailing ``/``; ``""`` for the bucket's root.
    prefix: str

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` joined with ``/`` under the prefix."""
        return _joined(self.prefix, parts)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


@dataclass(frozen=True)
class DirStoreURL:
    """A directory store: the key ``a/b/c`` is the file ``<root>/a/b/c``."""

    root: Path
    #: always ``""``: the directory is the store's top (keys as in a bucket's root)
    prefix: str = ""

    def key(self, *parts: str) -> str:
        return _joined(self.prefix, parts)

    def __str__(self) -> str:
        return f"{_FILE_SCHEME}{self.root}"


AnyStoreURL = StoreURL | DirStoreURL


def parse_store_url(text: str) -> AnyStoreURL:
    """``s3://BUCKET[/PREFIX]`` (the prefix keeps its inner ``/`` but no empty parts) or
    ``file:///ABS/DIR`` (an absolute path, no ``.`` or ``..`` parts)."""
    if text.startswith(_FILE_SCHEME):
        return _parse_dir_url(text)
    if not text.startswith("s3://"):
        raise StoreURLError(f"{text!r}: a store is s3://BUCKET[/PREFIX] or file:///ABS/DIR")
    bucket, _, prefix = text[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise StoreURLError(f"{text!r}: {bucket!r} is not a valid S3 bucket name")
    parts = [part for part in prefix.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise StoreURLError(f"{text!r}: the prefix may not contain '.' or '..' parts")
    return StoreURL(bucket=bucket, prefix="/".join(parts))


def _parse_dir_url(text: str) -> DirStoreURL:
    rest = text[len(_FILE_SCHEME) :]
    host, slash, path = rest.partition("/")
    if host not in ("", "localhost") or not slash:
        raise StoreURLError(f"{text!r}: a directory store is file:///ABS/DIR (an absolute path)")
    decoded = unquote("/" + path)
    parts = [part for part in decoded.split("/") if part]
    if not parts or any(part in (".", "..") for part in parts) or "\x00" in decoded:
        raise StoreURLError(f"{text!r}: the path must be absolute, without '.' or '..' parts")
    return DirStoreURL(Path("/" + "/".join(parts)))
