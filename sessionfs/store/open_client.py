"""The client of a store address: a directory store, or S3 (imported only then)."""

from __future__ import annotations

from .client import StoreClient
from .url import AnyStoreURL, DirStoreURL

__all__ = ["open_store_client"]


def open_store_client(url: AnyStoreURL, endpoint_url: str | None = None) -> StoreClient:
    """The client of ``url``: a directory store, or S3 (`ImportError` without boto3)."""
    if isinstance(url, DirStoreURL):
        from .dir_client import DirStoreClient

        return DirStoreClient(url)
    from .s3_client import S3Client

    return S3Client(url, endpoint_url)
