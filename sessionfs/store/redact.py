"""Credentials never reach a log, ``ctl`` or an error message.

botocore logs every request it signs at DEBUG (headers with the access key id, the
``Signature=``, the session token), so the S3 libraries' loggers are pinned at WARNING
whatever ``--debug`` sets on the root logger; and the text of a store error (which
quotes what the server answered) passes :func:`redact` before anyone sees it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

__all__ = ["S3_LOGGERS", "quiet_s3_loggers", "redact"]

#: The loggers of the S3 stack; their children inherit the level set here.
S3_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3")

# SigV4 and SigV2 spellings in headers and query strings: the value runs to the next
# separator. X-Amz-Security-Token is the session token of temporary credentials.
_SIGNED_PARTS = re.compile(
    r"(Signature|Credential|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token"
    r"|AWSAccessKeyId|SignedHeaders)=[^&\s,\"'<]*",
    re.ASCII | re.IGNORECASE,
)
REDACTED = "<redacted>"


def quiet_s3_loggers() -> None:
    """Pin the S3 libraries at WARNING: their DEBUG output carries signed headers."""
    for name in S3_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every signature part and each of ``secrets`` replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:  # never blank out every "a" of a message
            text = text.replace(secret, REDACTED)
    return _SIGNED_PARTS.sub(lambda match: f"{match.group(1)}={REDACTED}", text)
