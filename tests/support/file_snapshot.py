"""What "nothing was written" means in the tests: every file's size, mtime and bytes."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

__all__ = ["Fingerprint", "files_snapshot", "fingerprint"]

Fingerprint = dict[str, tuple[str, int, int, str]]


def files_snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root``: relative path -> (size, mtime_ns, sha256)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns, digest)
    return out


def fingerprint(root: Path) -> Fingerprint:
    """relative path -> (kind, size, mtime_ns, sha256 or link target) for everything
    under ``root``, itself and every dir included: a file created and removed again
    shows as a changed dir mtime."""
    out: Fingerprint = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        if stat.S_ISREG(st.st_mode):
            kind, detail = "file", hashlib.sha256(path.read_bytes()).hexdigest()
        elif stat.S_ISLNK(st.st_mode):
            kind, detail = "link", os.readlink(path)
        else:
            kind, detail = "dir" if stat.S_ISDIR(st.st_mode) else "other", ""
        out[str(path.relative_to(root))] = (kind, st.st_size, st.st_mtime_ns, detail)
    return out
