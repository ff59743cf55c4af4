"""How much a ``send`` round trip adds over running the agent by hand (issue 20).

The same prompt, the same fake model server (`tests/support/fake_model_server.py`),
the same session file, the same pi 0.73 command line: once run by hand (a subprocess
of this script, as a shell would start it), once through the mount as
``echo PROMPT > send; cat send`` (the daemon starts the very same command and ``cat``
waits for it). The two are alternated so both see the same load and the same growing
file; the figures are the median and the fastest of each, and the difference.
Also: how long ``echo PROMPT > send`` takes to return (the agent has started then),
and the same comparison with ``true`` as the agent, where the agent costs nothing
and what is left is exactly what ``send`` adds (FUSE requests, the branch check, the
spawn, the wake-up of the waiting ``cat``).

Skipped (exit 0, one line) when pi cannot be installed here.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.fake_model_server import DEFAULT_MODEL, FakeModelServer  # noqa: E402
from support.pi_sessions import agent_template, branched_session  # noqa: E402
from support.real_agents import AgentUnavailable, PiAgent, install_pi  # noqa: E402

from bench.common import mounted, sessionfs_args  # noqa: E402

ROUNDS = int(os.environ.get("SESSIONFS_BENCH_SEND_ROUNDS", "5"))
TRIVIAL_ROUNDS = int(os.environ.get("SESSIONFS_BENCH_SEND_TRIVIAL_ROUNDS", "30"))


def by_hand(template: str, session: Path, prompt: str, cwd: Path) -> float:
    argv = [w.replace("{session}", str(session)) for w in shlex.split(template)] + [prompt]
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def through_send(directory: Path, prompt: str) -> tuple[float, float, str]:
    """(round trip, time until ``echo > send`` returned, status line)."""
    started = time.perf_counter()
    (directory / "send").write_text(prompt + "\n")
    returned = time.perf_counter() - started
    status = (directory / "send").read_text().strip()
    return time.perf_counter() - started, returned, status


def compare(
    root: Path, agent_dir: Path, session: Path, template: str, rounds: int, name: str
) -> tuple[list[float], list[float], list[float], list[str]]:
    """``rounds`` alternated runs by hand and through a mount whose ``send`` runs
    ``template``: (by hand, round trips, close() returns, status lines)."""
    mountpoint = root / f"mnt-{name}"
    args = sessionfs_args(mountpoint, agent_dir, "--agent-cmd", template)
    args += ["--cache-dir", str(root / f"cache-{name}")]
    hand: list[float] = []
    send: list[float] = []
    returned: list[float] = []
    statuses: list[str] = []
    with mounted(args, mountpoint):
        directory = mountpoint / "sessions" / session.parent.name / session.stem
        for n in range(rounds):
            hand.append(by_hand(template, session, f"by hand {n}", session.parent))
            took, back, status = through_send(directory, f"through send {n}")
            send.append(took)
            returned.append(back)
            statuses.append(status)
    assert all(s.startswith("exit 0 after ") for s in statuses), statuses
    return hand, send, returned, statuses


def report(title: str, figures: tuple[list[float], list[float], list[float], list[str]]) -> None:
    hand, send, returned, statuses = figures
    print(f"\n{title} ({len(hand)} rounds each, alternated)")
    for name, values in (("by hand", hand), ("echo > send; cat send", send)):
        median, fastest = statistics.median(values), min(values)
        print(f"  {name:24} median {median * 1000:8.1f} ms  fastest {fastest * 1000:8.1f} ms")
    added = statistics.median(s - h for s, h in zip(send, hand, strict=True))
    print(
        f"  {'added by send':24} median {added * 1000:+8.1f} ms  "
        f"(fastest vs fastest {(min(send) - min(hand)) * 1000:+.1f} ms)"
    )
    print(f"  echo > send returned after: median {statistics.median(returned) * 1000:.1f} ms")
    print(f"  status lines: {statuses[0]!r} ... {statuses[-1]!r}")
    sys.stdout.flush()


def main() -> int:
    try:
        install = install_pi()
    except AgentUnavailable as error:
        print(f"bench_send: skipped ({error})")
        return 0
    with (
        tempfile.TemporaryDirectory(prefix="sessionfs-bench-send-") as tmp,
        FakeModelServer() as model,
    ):
        root = Path(tmp)
        agent = PiAgent.at_home(root / "home", model.url, DEFAULT_MODEL, install)
        session, _ = branched_session(agent.agent_dir, root / "work")
        trivial = compare(root, agent.agent_dir, session, "true", TRIVIAL_ROUNDS, "true")
        report("send with `true` as the agent: what send itself costs", trivial)
        pi = compare(root, agent.agent_dir, session, agent_template(agent), ROUNDS, "pi")
        report("send with pi 0.73 against the fake model server", pi)
    return 0


if __name__ == "__main__":
    sys.exit(main())
