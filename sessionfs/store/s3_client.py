"""The S3 store client: a thin typed wrapper of boto3's S3 client (`StoreClient`'s calls).

Why boto3 (see docs/store.md): it reads credentials the way every AWS tool does (the
``AWS_*`` environment variables, ``~/.aws/credentials`` and ``~/.aws/config`` profiles,
SSO, instance roles) and ``AWS_ENDPOINT_URL``; ``PutObject(IfNoneMatch="*")`` is a plain
parameter; and it speaks to every S3-compatible server. Its client is thread-safe, so the
sync engine uploads in a thread pool. It is imported only here, never by the local mount.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from .client import (
    CHUNK,
    AlreadyExists,
    Download,
    ListedObject,
    NotFound,
    StoreClient,
    StoreError,
    Unreachable,
)
from .redact import quiet_s3_loggers, redact
from .url import StoreURL

__all__ = ["S3Client"]


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


def _mapped(error: Exception, what: str, secrets: tuple[str | None, ...] = ()) -> StoreError:
    """One of our exceptions for a botocore error, with the call named in the message and
    no credential in it (a server may quote the request it refused)."""
    mapped = _classified(error, what)
    return type(mapped)(redact(str(mapped), secrets))


def _classified(error: Exception, what: str) -> StoreError:
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


class S3Client(StoreClient):
    """The calls of one bucket; keys are full keys (the caller adds the prefix)."""

    url: StoreURL

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
        quiet_s3_loggers()
        session = boto3.session.Session()
        self._secrets = _credentials_of(session)
        self._s3: Any = session.client("s3", endpoint_url=endpoint_url, config=config)

    def _error(self, error: Exception, what: str) -> StoreError:
        return _mapped(error, what, self._secrets)

    def put_if_absent(self, key: str, body: bytes | BinaryIO) -> None:
        """Create ``key`` holding ``body`` (bytes, or a file read from where it is);
        :class:`AlreadyExists` if any object is there."""
        try:
            self._s3.put_object(Bucket=self.url.bucket, Key=key, Body=body, IfNoneMatch="*")
        except (ClientError, BotoCoreError) as error:
            raise self._error(error, f"put {key}") from None

    @contextmanager
    def download(self, key: str) -> Iterator[Download]:
        """The object at ``key`` as a stream of :data:`CHUNK`-sized pieces, never whole
        in memory; the connection is released when the block ends."""
        try:
            response = self._s3.get_object(Bucket=self.url.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._error(error, f"get {key}") from None
        body = response["Body"]
        try:
            yield Download(
                etag=str(response.get("ETag", "")),
                size=int(response.get("ContentLength", 0)),
                chunks=self._chunks(body, key),
            )
        finally:
            body.close()

    def _chunks(self, body: Any, key: str) -> Iterator[bytes]:
        try:
            while chunk := body.read(CHUNK):
                yield bytes(chunk)
        except (ClientError, BotoCoreError, OSError) as error:
            raise self._error(error, f"get {key}") from None

    def head(self, key: str) -> ListedObject:
        """The size and tag of the object at ``key``."""
        try:
            response = self._s3.head_object(Bucket=self.url.bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            raise self._error(error, f"head {key}") from None
        return ListedObject(key, int(response["ContentLength"]), str(response.get("ETag", "")))

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
                raise self._error(error, f"list {prefix}") from None
            for item in page.get("Contents", ()):
                yield ListedObject(
                    str(item["Key"]),
                    int(item["Size"]),
                    str(item.get("ETag", "")),
                    _timestamp(item.get("LastModified")),
                )
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
                raise self._error(error, f"create bucket {self.url.bucket}") from None
        except BotoCoreError as error:
            raise self._error(error, f"create bucket {self.url.bucket}") from None


def _credentials_of(session: Any) -> tuple[str | None, ...]:
    """The access key id, secret and token this client signs with, to keep them out of
    messages (none found: only the signature patterns are redacted)."""
    try:
        credentials = session.get_credentials()
        frozen = credentials.get_frozen_credentials() if credentials is not None else None
    except BotoCoreError:
        return ()
    if frozen is None:
        return ()
    return (frozen.access_key, frozen.secret_key, frozen.token)


def _timestamp(value: Any) -> float:
    """A listing's ``LastModified`` (a datetime) in seconds since the epoch (0: none)."""
    return float(value.timestamp()) if hasattr(value, "timestamp") else 0.0
