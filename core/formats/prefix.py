"""What a listing learns from the first KiB of a session file, without parsing it.

Listing a project must not read its sessions (the scale rules: at most the first KiB
of each file). The fields a listing needs (Claude's ``sessionId``/``cwd``, Codex's
``id``/``cwd``/``parent_thread_id``) come early in the first lines, but a first line
can be far longer than a KiB (Codex's ``base_instructions``), so they are found as
``"key": "string"`` pairs in the raw prefix -- a torn last line included.
"""

from __future__ import annotations

import re
from typing import Final

from core.formats.lines import ZSTD_SUFFIX, read_zstd_prefix
from core.jsonl import loads
from core.safe_open import PathArg, open_regular

__all__ = ["LISTING_PREFIX_BYTES", "first_line", "read_prefix", "string_field"]

#: bytes of a session file a listing reads
LISTING_PREFIX_BYTES: Final = 1024
_STRING: Final = rb'"((?:[^"\\]|\\.)*)"'


def read_prefix(path: PathArg, limit: int = LISTING_PREFIX_BYTES) -> bytes:
    """The first ``limit`` bytes of a session file (decompressed for a ``.zst``)."""
    if str(path).endswith(ZSTD_SUFFIX):
        return read_zstd_prefix(path, limit)
    with open_regular(path) as f:
        return f.read(limit)


def first_line(prefix: bytes) -> bytes:
    """The prefix's first line (as far as the prefix holds it)."""
    return prefix.split(b"\n", 1)[0]


def string_field(prefix: bytes, key: str) -> str | None:
    """The first ``"key": "value"`` string in ``prefix`` (``None``: none there)."""
    pattern = re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*' + _STRING)
    match = pattern.search(prefix)
    if match is None:
        return None
    try:
        value = loads(b'"' + match.group(1) + b'"')
    except ValueError:
        return None
    return value if isinstance(value, str) and value else None
