"""A process's memory as ``/proc/<pid>/status`` reports it: `status_mb`."""

from __future__ import annotations

from pathlib import Path

__all__ = ["status_mb"]


def status_mb(pid: int, key: str) -> float:
    """Field ``key`` (``VmRSS``, ``VmHWM``, …, given in kB) of process ``pid``, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")
