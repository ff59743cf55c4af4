"""What "nothing was written" means in the tests: every file's size, mtime and bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["files_snapshot"]


def files_snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: relative path -> (size, mtime_ns, sha256)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, digest)
    return out
