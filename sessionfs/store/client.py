"""A thin typed wrapper of boto3's S3 client: the five calls the store needs, three errors.

Why boto3 (see docs/store.md): it reads credentials the way every AWS tool does (the
``AWS_*`` environment variables, ``~/.aws/credentials`` and ``~/.aws/config`` profiles,
SSO, instance roles) and ``AWS_ENDPOINT_URL``; ``PutObject(IfNoneMatch="*")`` is a plain
parameter; and it speaks to every S3-compatible server. Its client is thread-safe, so the
sync engine uploads in a thread pool. It is imported only here, never by the local mount.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from .url import StoreURL

__all__ = [
    "AlreadyExists",
    "ListedObject",
    "NotFound",
    "StoreClient",
    "StoreError",
    "Unreachable",
]


class StoreError(Exception):
    """Any failure of a store call that is not one of the three below."""


class AlreadyExists(StoreError):
    """A conditional create lost: the key already holds an object."""


class NotFound(StoreError):
    """No object (or no bucket) at that key."""


class Unreachable(StoreError):
    """The store did not answer (connection refused or reset, time-out, 5xx, throttling)."""


@dataclass(frozen=True)
class ListedObject:
    key: str
    size: int


_NOT_FOUND = {"NoSuchKey", "NoSuchBucket", "404", "NotFound"}
_ALREADY_EXISTS = {"PreconditionFailed", "412"}
# 409 ConditionalRequestConflict: AWS's word for "a racing conditional write is in
# flight, try again", after which the retry gets its definite 412 or 200.
_TRANSIENT = {
    "SlowDown",
    "Throttling",
    "RequestTimeout",
    "ServiceUnavailable",
    "InternalError",
    "ConditionalRequestConflict",
}


def _mapped(error: Exception, what: str) -> StoreError:
    """One of our exceptions for a botocore error, with the call named in the message."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in _ALREADY_EXISTS or status == 412:
            return AlreadyExists(f"{what}: the key already exists")
        if code in _NOT_FOUND or status == 404:
            return NotFound(f"{what}: not found ({code or status})")
        if code in _TRANSIENT or status >= 500:
            return Unreachable(f"{what}: the store answered {code or status}")
        return StoreError(f"{what}: {code or status}: {error}")
    return Unreachable(f"{what}: {error}")


class StoreClient:
    """The calls of one bucket; keys are full keys (the caller adds the prefix)."""

    def __init__(self, url: StoreURL, endpoint_url: str | None = None) -> None:
        self.url = url
        config = Config(
            connect_timeout=5,
            read_timeout=60,
            # Our own loop retries with backoff; botocore's retries would only hide it.
            retries={"max_attempts": 2, "mode": "standard"},
            max_pool_connections=32,
            # Checksums on every request cost CPU on large bodies; TCP and TLS already
            # protect the bytes, and the engine checks what it adopts itself.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        self._s3: Any = boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url, config=config
        )

    def put_if_absent(self, key: str, body: bytes) -> None:
        """Create ``key`` holding ``body``; :class:`AlreadyExists` if any object is there."""
        try:
            self._s3.put_object(Bucket=self.url.bucket, Key=key, Body=body, IfNoneMatch="*")
        except (ClientError, BotoCoreError) as error:
            raise _mapped(error, f"put {key}") from error

    def get(self, key: str) -> bytes:
        try:
            response = self._s3.get_object(Bucket=self.url.bucket, Key=key)
            return bytes(response["Body"].read())
        except (ClientError, BotoCoreError) as error:
            raise _mapped(error, f"get {key}") from error

    def head(self, key: str) -> int:
        """The size of the object at ``key``."""
        try:
            response = self._s3.head_object(Bucket=self.url.bucket, Key=key)
            return int(response["ContentLength"])
        except (ClientError, BotoCoreError) as error:
            raise _mapped(error, f"head {key}") from error

    def list(self, prefix: str) -> Iterator[ListedObject]:
        """Every object under ``prefix`` in key order, one page at a time.

        A failure part way raises after the objects already yielded: callers treat what
        they got as a partial listing (docs/store.md says what a reader does with one).
        """
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.url.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            try:
                page = self._s3.list_objects_v2(**kwargs)
            except (ClientError, BotoCoreError) as error:
                raise _mapped(error, f"list {prefix}") from error
            for item in page.get("Contents", ()):
                yield ListedObject(key=str(item["Key"]), size=int(item["Size"]))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def create_bucket(self) -> None:
        """Create the bucket (tests and first-time set-up); an existing one is fine."""
        try:
            self._s3.create_bucket(Bucket=self.url.bucket)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise _mapped(error, f"create bucket {self.url.bucket}") from error
        except BotoCoreError as error:
            raise _mapped(error, f"create bucket {self.url.bucket}") from error
