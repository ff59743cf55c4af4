"""``s3://BUCKET[/PREFIX]`` store addresses."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["StoreURL", "StoreURLError", "parse_store_url"]

# S3's bucket naming rules (lower case, digits, dots, hyphens; 3 to 63 characters).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class StoreURLError(ValueError):
    """The text is not an ``s3://BUCKET[/PREFIX]`` address."""


@dataclass(frozen=True)
class StoreURL:
    bucket: str
    #: Key prefix without leading or trailing ``/``; ``""`` for the bucket's root.
    prefix: str

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` joined with ``/`` under the prefix."""
        joined = "/".join(parts)
        return f"{self.prefix}/{joined}" if self.prefix else joined

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


def parse_store_url(text: str) -> StoreURL:
    """Parse ``s3://BUCKET[/PREFIX]``; the prefix keeps its inner ``/`` but no empty parts."""
    if not text.startswith("s3://"):
        raise StoreURLError(f"{text!r}: a store is s3://BUCKET[/PREFIX]")
    bucket, _, prefix = text[len("s3://") :].partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise StoreURLError(f"{text!r}: {bucket!r} is not a valid S3 bucket name")
    parts = [part for part in prefix.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise StoreURLError(f"{text!r}: the prefix may not contain '.' or '..' parts")
    return StoreURL(bucket=bucket, prefix="/".join(parts))
