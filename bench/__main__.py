"""``python -m bench`` (``make bench``): the figures a user meets, in one table.

On the 1,000-session agent dir of ``bench/corpus.py`` (generated once, then cached),
each figure beside a raw baseline taken the same way in the same run: first reads
against raw tools after the page cache is dropped (when run as root), warm figures as
the best of 3 against raw warm best of 3, ``search/`` as the first read of each of 40
distinct queries (no answer from a result cache) with p50/p95/max. 8–10 minutes on
the shared 2-core machine at load 12–17 (less when it is quiet); options are
``bench/bench_scale.py``'s (``--quick``: 100 sessions).

``python -m bench --all`` runs every ``bench/bench_*.py`` instead, one process each,
each printing its own tables (much longer; the mount and store ones need FUSE and
SeaweedFS).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_scale


def run_every_script() -> int:
    here = Path(__file__).resolve().parent
    failed = []
    for script in sorted(here.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        result = subprocess.run([sys.executable, str(script)], cwd=here.parent)
        if result.returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if "--all" in argv:
        return run_every_script()
    return bench_scale.main(["--summary", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
