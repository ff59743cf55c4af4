"""A process's memory figures as the kernel reports them (``/proc/<pid>/status``): what
the mount tests bound the daemon's RSS with."""

from __future__ import annotations

from pathlib import Path


def status_mb(pid: int, key: str) -> float:
    """``key`` (``VmRSS``, ``VmHWM``: the peak) of process ``pid``, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")
