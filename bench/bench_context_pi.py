"""``build_session_context`` against the upstream pi agent's own, on the same files.

Run from the repo root: ``python bench/bench_context_pi.py`` (``--entries N`` for the
generated session, ``--repeat N``, ``--quick`` for a smoke run).

Both sides open the same file first (not timed), then the best of ``--repeat`` calls of
their context builder is kept: ours is ``SessionManager.build_session_context()``, pi's
is ``SessionManager.buildSessionContext()`` run by Node (``bench/context_pi.mjs``). Files:
the 2.4 MB real fixture (v1, migrated on load by both) and a generated session whose
leaf is 100,000 entries deep.

pi is the package tests/interop installs (``$SESSIONFS_PI_CACHE``, else
``<repo>/.cache/npm-pi``); without Node or that install the pi column is skipped with
the reason printed, and our figures are still given.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    # `python bench/bench_context_pi.py` puts bench/ on sys.path, not the repo root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from bench.bench_core import best_of, write_generated_session
from bench.common import FIXTURES
from core import SessionManager
from tests.support.real_agents import PI_PACKAGE, pi_cache_dir, pi_package_dir

FIXTURE = "pi-v1-before-compaction.jsonl"
PI_SCRIPT = Path(__file__).with_name("context_pi.mjs")
NODE_TIMEOUT_S = 600


def ours(path: Path, repeat: int) -> tuple[int, float]:
    """(message count, best ms) of our context at the file's leaf."""
    manager = SessionManager.open(path, browse=True)
    messages = len(manager.build_session_context()["messages"])
    return messages, best_of(repeat, manager.build_session_context) * 1000


def pi_install() -> tuple[Path | None, str]:
    """The pi install dir, or ``None`` and why it cannot be used."""
    if shutil.which("node") is None:
        return None, "node is not installed"
    cache = pi_cache_dir()
    if not (pi_package_dir(cache) / "package.json").is_file():
        return None, f"{PI_PACKAGE} is not in {cache} (the tests in tests/interop install it)"
    return cache, ""


def pi_figures(install: Path, files: list[Path], repeat: int) -> list[tuple[int, float]]:
    """(message count, best ms) of pi's context per file, one Node process for all."""
    done = subprocess.run(
        ["node", str(PI_SCRIPT), str(install), str(repeat), *map(str, files)],
        capture_output=True,
        timeout=NODE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"context_pi.mjs failed:\n{done.stderr.decode()[-2000:]}")
    return [(r["messages"], r["best_ms"]) for r in orjson.loads(done.stdout)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000, help="generated path depth")
    parser.add_argument("--repeat", type=int, default=20, help="calls per file (best kept)")
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    args = parser.parse_args(argv)
    if args.quick:
        args.entries, args.repeat = 5_000, 3
    workdir = Path(tempfile.mkdtemp(prefix="bench-context-pi-"))
    try:
        fixture = workdir / FIXTURE
        shutil.copyfile(FIXTURES / FIXTURE, fixture)
        generated = workdir / "generated.jsonl"
        write_generated_session(generated, args.entries, v1=False)
        files = [(f"{FIXTURE} (2.4 MB, v1)", fixture), (f"{args.entries:,}-entry path", generated)]
        mine = [ours(path, args.repeat) for _, path in files]
        install, reason = pi_install()
        theirs = pi_figures(install, [p for _, p in files], args.repeat) if install else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'build_session_context':<44} {'ours':>10} {'pi (Node)':>10} {'ratio':>7}  messages")
    print("-" * 90)
    for index, (label, _) in enumerate(files):
        count, ms = mine[index]
        if theirs is None:
            print(f"{label:<44} {ms:>8.2f}ms {'-':>10} {'-':>7}  {count}")
            continue
        pi_count, pi_ms = theirs[index]
        same = "same" if pi_count == count else f"pi: {pi_count}"
        print(f"{label:<44} {ms:>8.2f}ms {pi_ms:>8.2f}ms {ms / pi_ms:>6.2f}x  {count} ({same})")
    if theirs is None:
        print(f"(pi column skipped: {reason})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
