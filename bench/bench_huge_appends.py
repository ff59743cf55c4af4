"""Appends to one very long session after it was listed (issue 26 point 6: cost grows
with the work touched, not the session), each checkout given against the others.

`bench_huge_session`'s flat session (200,000 entries, ~49 MB by default), a fresh
copy and a fresh daemon per checkout and round (rounds alternate the checkouts'
order), its search index built first: ``ls -l entries/`` (the session is then held
compact), `APPENDS` appends through ``append/`` (``cp`` of a JSON message, each timed),
then ``ls -l entries/`` again. Per checkout: the median append and the slowest, the
second listing, the daemon's CPU over the appends and its peak RSS, and what its
cache holds at the end (the root ``ctl``).

    .venv/bin/python -m bench.bench_huge_appends [CHECKOUT ...] [--entries N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_append_ceiling import daemon_cpu_seconds
from bench.bench_huge_session import CACHE_MB, PROJECT_DIR, SESSION_ID, write_session
from bench.bench_scale import proc_status_mb, wait_for_search
from bench.common import mounted, sessionfs_args, timed

APPENDS = 20
ROUNDS = 2


def one_run(checkout: Path, pristine: Path, work: Path) -> dict[str, float | str]:
    """One fresh daemon of ``checkout`` over a fresh copy of the session."""
    agent = work / "agent"
    if agent.exists():
        shutil.rmtree(agent)
    session_file = agent / "sessions" / PROJECT_DIR / pristine.name
    session_file.parent.mkdir(parents=True)
    shutil.copyfile(pristine, session_file)
    mnt, cache = work / "mnt", work / f"cache-{checkout.name}"
    mount_args = sessionfs_args(
        mnt, agent, "--no-agents", "--no-archive", "--cache-mb", str(CACHE_MB),
        "--cache-dir", str(cache),
    )  # fmt: skip
    session_dir = mnt / "sessions" / PROJECT_DIR / session_file.stem
    message = work / "msg.json"
    message.write_bytes(orjson.dumps({"role": "user", "content": "appended"}))

    def ls() -> int:
        listed = subprocess.run(
            ["ls", "-l", str(session_dir / "entries")], capture_output=True, check=True
        )
        return listed.stdout.count(b"\n")

    with mounted(mount_args, mnt, cwd=checkout) as daemon:
        wait_for_search(mnt, 600)
        first_ls, _ = timed(ls)
        cpu_before = daemon_cpu_seconds(mnt)
        appends = []
        for n in range(APPENDS):
            target = str(session_dir / "append" / f"m{n}.json")
            took, _ = timed(lambda t=target: subprocess.run(["cp", str(message), t], check=True))
            appends.append(took)
        cpu = (daemon_cpu_seconds(mnt) - cpu_before) / APPENDS
        second_ls, listed = timed(ls)
        cache = (mnt / "ctl").read_text().split("cache: ", 1)[1].split("\n", 1)[0]
        peak = proc_status_mb(daemon.pid, "VmHWM") or 0.0
    return {
        "first ls -l": first_ls,
        "append median": statistics.median(appends),
        "append max": max(appends),
        "daemon CPU an append": cpu,
        "ls -l after": second_ls,
        "VmHWM MB": peak,
        "cache": cache,
        "listed": listed,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    parser.add_argument("--entries", type=int, default=200_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sessionfs-huge-appends-") as tmp:
        work = Path(tmp)
        pristine = work / f"2026-01-01T00-47-19-278Z_{SESSION_ID}.jsonl"
        write_session(pristine, args.entries)
        print(f"{args.entries} entries, {pristine.stat().st_size / 1e6:.0f} MB")
        checkouts = [c.resolve() for c in args.checkouts]
        for round_ in range(ROUNDS):
            order = checkouts if round_ % 2 == 0 else checkouts[::-1]
            for checkout in order:
                loads = [round(x, 1) for x in os.getloadavg()]
                result = one_run(checkout, pristine, work)
                shown = ", ".join(
                    f"{k} {v * 1000:.0f} ms" if isinstance(v, float) and "MB" not in k
                    else f"{k} {v}"
                    for k, v in result.items()
                )  # fmt: skip
                print(f"round {round_} {checkout}: {shown}; load {loads}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
