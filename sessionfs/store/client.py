"""What every store client does: the five calls the sync and the mirror make, three errors.

A store is either an S3 bucket (`sessionfs.store.s3_client.S3Client`, boto3) or a
directory (`sessionfs.store.dir_client.DirStoreClient`, the local archive); both hold the
same keys (`sessionfs.store.layout`) and answer the same calls, so the sync engine and
the mirror never know which one they talk to. `sessionfs.store.open_client` makes the
right one; the S3 library is imported only for an ``s3://`` store.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import BinaryIO

from .url import AnyStoreURL

__all__ = [
    "CHUNK",
    "AlreadyExists",
    "Download",
    "ListedObject",
    "NotFound",
    "StoreClient",
    "StoreError",
    "StoreFull",
    "TooLarge",
    "Unreachable",
]


class StoreError(Exception):
    """Any failure of a store call that is not one of the ones below."""


class AlreadyExists(StoreError):
    """A conditional create lost: the key already holds an object."""


class NotFound(StoreError):
    """No object (or no bucket) at that key."""


class TooLarge(StoreError):
    """An object meant to be small (a claim) is bigger than its limit: not fetched."""


class Unreachable(StoreError):
    """The store did not answer (connection refused or reset, time-out, 5xx, throttling)."""


class StoreFull(Unreachable):
    """The store has no room left (a directory store's disk is full, or its quota):
    nothing half-written stays, and the same pass works again once there is room."""


@dataclass(frozen=True)
class ListedObject:
    key: str
    size: int
    #: the server's entity tag: with ``size``, what tells a changed object at one key
    etag: str = ""
    #: when the object was created (seconds since the epoch; 0: not known)
    modified: float = 0.0


#: Bytes per read of an object's body: objects go to disk in pieces this big.
CHUNK = 1 << 20


@dataclass(frozen=True)
class Download:
    """An object being fetched: its tag and size (from the response) and its body."""

    etag: str
    size: int
    chunks: Iterator[bytes]


class StoreClient(ABC):
    """The calls of one store; keys are full keys (the caller adds the prefix)."""

    url: AnyStoreURL

    @abstractmethod
    def put_if_absent(self, key: str, body: bytes | BinaryIO) -> None:
        """Create ``key`` holding ``body`` (bytes, or a file read from where it is);
        :class:`AlreadyExists` if any object is there. Never a partial object."""

    @abstractmethod
    def download(self, key: str) -> AbstractContextManager[Download]:
        """The object at ``key`` as a stream of :data:`CHUNK`-sized pieces, never whole
        in memory; :class:`NotFound` when there is none."""

    @abstractmethod
    def head(self, key: str) -> ListedObject:
        """The size and tag of the object at ``key``."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ListedObject]:
        """Every object whose key starts with ``prefix``, in key order. A failure part
        way raises after the objects already yielded: callers treat what they got as a
        partial listing (docs/store.md says what a reader does with one)."""

    @abstractmethod
    def create_bucket(self) -> None:
        """Make the store where it does not exist yet (an existing one is fine)."""

    def get(self, key: str, limit: int) -> bytes:
        """The whole body of a small object; :class:`TooLarge` past ``limit`` bytes."""
        with self.download(key) as download:
            if download.size > limit:
                raise TooLarge(f"get {key}: {download.size} bytes, more than {limit}")
            return b"".join(download.chunks)
