"""The daemon's RSS and its render workers' peak, sampled every 100 ms while a step
runs: `WorkersRssSampler` (``bench_huge_file`` and ``bench_huge_session`` report both,
since a streamed rendering's memory is the workers', not the daemon's)."""

from __future__ import annotations

import threading
from pathlib import Path

from bench.bench_scale import SAMPLE_SECONDS, RssSampler, proc_status_mb

__all__ = ["WorkersRssSampler", "child_pids"]


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (the workers are started from any thread)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class WorkersRssSampler(RssSampler):
    """`RssSampler` of the daemon (``current_max``), and the peak VmRSS of its
    children (the render workers) beside it (``workers_max``), every 100 ms; `reset`
    starts both peaks again before a step."""

    def __init__(self, pid: int) -> None:
        self.workers_max = 0.0
        super().__init__(pid)
        self._workers = threading.Thread(target=self._sample_workers, daemon=True)
        self._workers.start()

    def _sample_workers(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            for child in child_pids(self.pid):
                rss = proc_status_mb(child, "VmRSS") or 0.0
                self.workers_max = max(self.workers_max, rss)

    def reset(self) -> None:
        self.current_max = proc_status_mb(self.pid, "VmRSS") or 0.0
        self.workers_max = 0.0

    def stop(self) -> None:
        super().stop()
        self._workers.join(timeout=2)
