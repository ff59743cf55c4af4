"""contrib/systemd's units rendered by its own ``install.sh`` into a tmp dir, running the
real ``sessionfs`` (a wrapper of this Python), as a user would install them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["CONTRIB", "install_units"]

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"


def install_units(tmp_path: Path, **env: str) -> Path:
    """Run ``install.sh`` with ``env`` (``SESSIONFS_STORE``, ``SESSIONFS_ARCHIVE_ARGS``,
    …); returns the dir the units were written to."""
    wrapper = tmp_path / "bin" / "sessionfs"  # the real command, as the units run it
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m sessionfs "$@"\n')
    wrapper.chmod(0o755)
    units = tmp_path / "units"
    subprocess.run(
        [CONTRIB / "systemd" / "install.sh", str(tmp_path / "mnt")],
        env={**os.environ, "SESSIONFS_BIN": str(wrapper), "UNIT_DIR": str(units), **env},
        check=True,
        capture_output=True,
        timeout=30,
    )
    return units
