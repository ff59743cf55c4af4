"""One session file of ~500 MB (issue 26 point 6: "real users have them"): what a
user runs on it, each step timed, with the daemon's RSS sampled every 100 ms and the
peak RSS of its render workers beside it:

* ``cat transcript.md | tail``, then ``grep -c WORD transcript.md``;
* ``cat context.json | tail -c 200``;
* ``cat transcript.html | tail -c 120`` (the page, written by a worker too);
* ``ls entries/ | wc -l`` and ``cat`` of the last entry file.

The session is made by `bench.corpus`'s builder (prompts, assistant turns with
thinking and tool calls, tool results with a long tail of big outputs) with a
compaction every sixth of the way and a few outputs of several MB, as long real
sessions have; it is kept in ``--work`` and reused when its size matches. The target:
the daemon's RSS stays within ``--cache-mb`` + 100 MB (and so do the workers'), and
every step works (no ``EFBIG``).

``--claude`` / ``--codex``: the same session as Claude Code or Codex writes it, under
``agents/``. ``--checkout DIR`` runs the daemon of another checkout (``git worktree add /tmp/old
main``; the same ``--work`` reuses the session file): old and new alternated.
``--codex --zst``: the rollout archived as Codex compresses it (``archived_sessions/
*.jsonl.zst``, its text's size in its zstd header): a small file of a big text.
``--codex --codex-turns N``: the rollout is the tests' long one
(``tests/support/long_codex_sessions.py``: compactions, rollbacks, N turns a part;
11,000 make 352,022 lines, 223 MB, 1.7 MB compressed) instead of the corpus's.

    .venv/bin/python -m bench.bench_huge_file [--mb 500] [--work DIR] [--cache-mb 256]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from bench.bench_scale import proc_status_mb
from bench.claude_corpus import session_lines
from bench.common import REPO, mounted, sessionfs_args
from bench.corpus import COMMON_WORD, SessionBuilder, TextPools, _make_images
from bench.worker_rss import WorkersRssSampler
from core.zstd_files import ZSTD_SUFFIX, read_chunks

# The tests' long rollout (`--codex-turns`) is made by their support modules.
sys.path.append(str(REPO / "tests"))

CACHE_MB = 256
#: What one entry of the generated session weighs on average (measured), to aim at
#: ``--mb`` without building it twice.
AVERAGE_ENTRY_BYTES = 4_050
#: The same, written as Claude Code writes it (more lines, and more fields each).
CLAUDE_AVERAGE_ENTRY_BYTES = 4_370
#: The same, written as Codex writes it.
CODEX_AVERAGE_ENTRY_BYTES = 4_390
CODEX_SESSION_ID = "0199b000-0000-7000-8000-00000000b16f"
#: Compactions spread over the session (a long session is compacted again and again).
COMPACTIONS = 6
STEP_TIMEOUT = 900.0
SESSION_ID = "5e55f11e-0000-4000-8000-00000000b16f"
PROJECT_DIR = "--srv-huge--"


class _LongSessionBuilder(SessionBuilder):
    """The corpus's sessions, longer: a compaction every ``1/compactions`` of the way
    and one tool output in 1,000 of 1-4 MB (a generated file read whole, a long log)."""

    def __init__(self, *args: Any, compactions: int = COMPACTIONS, **kwargs: Any) -> None:
        self.compactions = compactions  # (read by `_plan_events`, which __init__ calls)
        super().__init__(*args, **kwargs)

    def _plan_events(self) -> dict[int, str]:
        events = super()._plan_events()
        if self.compactions == 0:  # the corpus's own (one, early) go too
            events = {at: kind for at, kind in events.items() if kind != "compaction"}
        for n in range(1, self.compactions + 1):
            events[self.probe_at * n // (self.compactions + 1)] = "compaction"
        return events

    def _tool_output(self, tool: str) -> str:
        if self.rng.random() < 1 / 1000:
            big = self.pools.big
            return "\n".join(self.rng.choices(big, k=self.rng.randint(20, 80)))
        return super()._tool_output(tool)


HEADER: dict[str, Any] = {
    "type": "session",
    "version": 3,
    "id": SESSION_ID,
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/srv/huge",
    "title": "One very long session",
}


def _entry_lines(
    blobs: Path, megabytes: int, entry_bytes: int, compactions: int = COMPACTIONS
) -> list[bytes]:
    """The session's entries (after its header), ~``megabytes`` MB when an entry is
    written in ``entry_bytes`` on average, ``compactions`` spread over it; its images
    into ``blobs``."""
    rng = random.Random(26)
    pools = TextPools(rng)
    images = _make_images(rng, blobs)
    start_ms = 1_767_225_600_000
    entries = megabytes * 1_000_000 // entry_bytes
    words = [COMMON_WORD]
    builder = _LongSessionBuilder(
        rng, pools, images, entries, words, start_ms, compactions=compactions
    )
    return builder.build()


def write_session(path: Path, megabytes: int, compactions: int = COMPACTIONS) -> None:
    lines = _entry_lines(path.parents[2] / "blobs", megabytes, AVERAGE_ENTRY_BYTES, compactions)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        out.write(orjson.dumps(HEADER) + b"\n")
        for line in lines:
            out.write(line + b"\n")


def write_claude_session(path: Path, megabytes: int, compactions: int = COMPACTIONS) -> None:
    """The same session as Claude Code writes it (`bench.claude_corpus`: a line per
    block of a response, tool results as user lines, compactions as boundaries)."""
    blobs = path.parents[2] / "blobs"
    lines = _entry_lines(blobs, megabytes, CLAUDE_AVERAGE_ENTRY_BYTES, compactions)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        for line in session_lines(HEADER, (orjson.loads(entry) for entry in lines)):
            out.write(orjson.dumps(line) + b"\n")


def _shell(command: str, cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
        check=False,
    )
    elapsed = time.perf_counter() - start
    out = done.stdout.strip().replace("\n", " | ")
    if done.returncode != 0:
        out = f"FAILED (exit {done.returncode}): {done.stderr.strip()[:160]}"
    return elapsed, out


#: (what it is, the shell command run in the session dir)
STEPS = (
    ("cat transcript.md | tail -n 2", "cat transcript.md | tail -n 2"),
    ("grep -c WORD transcript.md", f"grep -c {COMMON_WORD} transcript.md"),
    ("cat context.json | tail -c 120", "cat context.json | tail -c 120"),
    ("cat transcript.html | tail -c 60", "cat transcript.html | tail -c 60"),
    ("ls entries/ | wc -l", "ls entries/ | wc -l"),
    ("cat entries/<last>.json | wc -c", 'cat "entries/$(ls entries/ | tail -n 1)" | wc -c'),
)


def run_steps(
    session_dir: Path, sampler: WorkersRssSampler, word: str = COMMON_WORD
) -> list[tuple[str, float, str, float, float]]:
    """Each of `STEPS` (``word`` the one grepped): (name, seconds, output, daemon's max
    RSS, workers' max RSS)."""
    rows = []
    for name, command in STEPS:
        command = command.replace(COMMON_WORD, word)
        sampler.reset()
        seconds, out = _shell(command, session_dir)
        hwm = proc_status_mb(sampler.pid, "VmHWM") or 0.0
        rows.append((name, seconds, out[:70], sampler.current_max, sampler.workers_max))
        print(
            f"{name:34} {seconds:7.2f} s  daemon max {sampler.current_max:5.0f} MB "
            f"(HWM {hwm:.0f})  workers max {sampler.workers_max:5.0f} MB  {out[:60]}",
            flush=True,
        )
    return rows


def xcsh_session(
    work: Path, megabytes: int, cache_mb: int, compactions: int = COMPACTIONS
) -> tuple[list[str], Path]:
    """The agent dir with the ~``megabytes`` MB xcsh session (made once); the mount's
    arguments and the session's dir in the mount."""
    agent = work / "agent"
    session_file = agent / "sessions" / PROJECT_DIR / f"2026-01-01T00-00-00-000Z_{SESSION_ID}.jsonl"
    made = f"made-xcsh-{megabytes}mb{_variant(compactions)}"
    _write_once(
        work / made, session_file, partial(write_session, session_file, megabytes, compactions)
    )
    _describe(session_file, cache_mb)
    options = ["--no-agents", "--no-archive", f"--cache-mb={cache_mb}"]
    args = sessionfs_args(work / "mnt", agent, *options, f"--cache-dir={work / 'cache'}")
    return args, work / "mnt" / "sessions" / PROJECT_DIR / session_file.stem


def claude_session(
    work: Path, megabytes: int, cache_mb: int, compactions: int = COMPACTIONS
) -> tuple[list[str], Path]:
    """A Claude Code dir with one ~``megabytes`` MB session: the xcsh session's turns
    (thinking, parallel tool calls, big outputs, compactions) written as Claude Code
    writes them (`write_claude_session`), shown under ``agents/claude/`` (its
    project's name there is a pattern, found once mounted)."""
    claude = work / "claude"
    session_file = claude / "projects" / "-srv-huge" / f"{SESSION_ID}.jsonl"
    made = f"made-claude-{megabytes}mb{_variant(compactions)}"
    write = partial(write_claude_session, session_file, megabytes, compactions)
    args = _other_agent(work, ("claude", claude), (made, session_file, write), cache_mb)
    return args, work / "mnt" / "agents" / "claude" / "sessions" / "*" / SESSION_ID


def write_codex_session(path: Path, megabytes: int, compactions: int = COMPACTIONS) -> None:
    """The same session as a Codex rollout (`_codex_lines`)."""
    blobs = path.parents[4] / "blobs"
    lines = _entry_lines(blobs, megabytes, CODEX_AVERAGE_ENTRY_BYTES, compactions)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        for line in _codex_lines(orjson.loads(entry) for entry in lines):
            out.write(orjson.dumps(line) + b"\n")


def _codex_lines(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """xcsh entries as Codex writes a rollout: its items in file order (Codex's
    sessions are one chain), a response as reasoning, a message and a call per tool,
    each result as a call's output, a compaction as ``compacted`` with its summary as
    the replacement history."""
    stamp = HEADER["timestamp"]
    meta = {"id": CODEX_SESSION_ID, "timestamp": stamp, "cwd": HEADER["cwd"]}
    yield {"timestamp": stamp, "type": "session_meta", "payload": {**meta, "source": "cli"}}
    yield {"timestamp": stamp, "type": "turn_context", "payload": {"model": "gpt-5-codex"}}
    for entry in entries:
        line = partial(_codex_line, entry["timestamp"])
        if entry.get("type") == "compaction":
            said = [{"type": "input_text", "text": entry["summary"]}]
            history = [{"type": "message", "role": "user", "content": said}]
            yield line({"message": entry["summary"], "replacement_history": history}, "compacted")
        if entry.get("type") != "message":
            continue
        message = entry["message"]
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if message["role"] == "toolResult":
            output = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            yield line(
                {"type": "function_call_output", "call_id": message["toolCallId"], "output": output}
            )
            continue
        role = "user" if message["role"] == "user" else "assistant"
        texts = []
        for block in blocks:
            if block.get("type") == "thinking":
                summary = [{"type": "summary_text", "text": block["thinking"]}]
                yield line({"type": "reasoning", "summary": summary})
            elif block.get("type") == "text":
                kind = "output_text" if role == "assistant" else "input_text"
                texts.append({"type": kind, "text": block["text"]})
        if texts:
            yield line({"type": "message", "role": role, "content": texts})
        for block in blocks:
            if block.get("type") == "toolCall":
                arguments = orjson.dumps(block["arguments"]).decode()
                call = {"type": "function_call", "name": block["name"], "arguments": arguments}
                yield line({**call, "call_id": block["id"]})


def _codex_line(
    timestamp: str, payload: dict[str, Any], kind: str = "response_item"
) -> dict[str, Any]:
    return {"timestamp": timestamp, "type": kind, "payload": payload}


def codex_session(
    work: Path,
    megabytes: int,
    cache_mb: int,
    compactions: int = COMPACTIONS,
    rollout: tuple[int | None, bool] = (None, False),
) -> tuple[list[str], Path]:
    """A Codex home with the same session as one rollout (`write_codex_session`),
    shown under ``agents/codex/by-id/``. ``rollout``: the tests' long rollout of that
    many turns a part instead (`_long_codex_session`), and whether it is archived
    compressed (`_compressed_rollout`)."""
    turns, zst = rollout
    codex = work / "codex"
    session_id = CODEX_SESSION_ID if turns is None else _long_codex_session_id()
    name = f"rollout-2026-01-01T00-00-00-{session_id}.jsonl"
    session_file = codex / "sessions" / "2026" / "01" / "01" / name
    if turns is None:
        made = f"made-codex-{megabytes}mb{_variant(compactions)}"
        write = partial(write_codex_session, session_file, megabytes, compactions)
    else:
        made = f"made-codex-{turns}turns"
        write = partial(_long_codex_session, session_file, turns)
    if zst:
        archived = codex / "archived_sessions" / (name + ZSTD_SUFFIX)
        made, write = f"{made}-zst", partial(_compressed_rollout, write, session_file, archived)
        session_file = archived
    write = partial(_anew, codex, write)
    args = _other_agent(work, ("codex", codex), (made, session_file, write), cache_mb)
    return args, work / "mnt" / "agents" / "codex" / "by-id" / session_id


def _anew(home: Path, write: Callable[[], None]) -> None:
    """``write()`` into an emptied ``home``: no rollout of another variant stays beside
    (a live rollout of the same id would shadow an archived one)."""
    shutil.rmtree(home, ignore_errors=True)
    write()


def _long_codex_session_id() -> str:
    from support.long_codex_sessions import SESSION_ID  # (tests/ is on sys.path: above)

    return SESSION_ID


def _grepped_word(codex_turns: int | None) -> str:
    """The word ``grep -c`` counts: the corpus's common word, or the tests' long
    rollout's probe."""
    if codex_turns is None:
        return COMMON_WORD
    from support.long_sessions import PROBE

    return PROBE


def _long_codex_session(path: Path, turns: int) -> None:
    """The tests' long rollout (`--codex-turns`), ``turns`` turns a part."""
    from support.long_codex_sessions import a_long_codex_session

    a_long_codex_session(path, turns)


def _compressed_rollout(write: Callable[[], None], plain: Path, archived: Path) -> None:
    """``write()`` the rollout at ``plain``, then archive it as Codex does: compressed
    into ``archived`` (one frame, its text's size in its header), ``plain`` removed."""
    import zstandard

    write()
    archived.parent.mkdir(parents=True, exist_ok=True)
    with open(plain, "rb") as source, open(archived, "wb") as out:
        size = plain.stat().st_size
        zstandard.ZstdCompressor().copy_stream(source, out, size=size)
    plain.unlink()


def _other_agent(
    work: Path,
    agent: tuple[str, Path],
    session: tuple[str, Path, Callable[[], None]],
    cache_mb: int,
) -> list[str]:
    """Write the session file once (``session``: its marker, path and writer) and give
    the mount's arguments showing ``agent``'s dir (its name, its dir) under
    ``agents/`` beside an empty agent dir."""
    made, session_file, write = session
    _write_once(work / made, session_file, write)
    _describe(session_file, cache_mb)
    name, home = agent
    local = work / "agent"
    (local / "sessions").mkdir(parents=True, exist_ok=True)
    options = [f"--agents={name}", f"--{name}-dir={home}", "--no-archive"]
    args = sessionfs_args(work / "mnt", local, *options, f"--cache-mb={cache_mb}")
    args.append(f"--cache-dir={work / 'cache'}")
    return args


def _variant(compactions: int) -> str:
    return "" if compactions == COMPACTIONS else f"-{compactions}c"


def _write_once(made: Path, session_file: Path, write: Callable[[], None]) -> None:
    """``write()`` the session file unless the marker ``made`` says it is there as
    asked (``--work`` is reused: a session of other parameters is written anew)."""
    if made.exists() and session_file.exists():
        return
    started = time.perf_counter()
    variant = made.name.split("-", 2)[1]  # xcsh, claude or codex: its own session file
    for marker in made.parent.glob(f"made-{variant}-*"):
        marker.unlink()
    write()
    made.write_text("")
    print(f"generated in {time.perf_counter() - started:.0f} s", flush=True)


def _describe(session_file: Path, cache_mb: int) -> None:
    size_mb = session_file.stat().st_size / 1e6
    with open(session_file, "rb") as f:
        if session_file.name.endswith(ZSTD_SUFFIX):
            text = lines = 0
            for chunk in read_chunks(f):
                text, lines = text + len(chunk), lines + chunk.count(b"\n")
            what = f"{size_mb:.1f} MB compressed, its text {text / 1e6:.0f} MB"
        else:
            lines = sum(1 for _ in f)
            what = f"{size_mb:.0f} MB"
    print(f"session file: {what}, {lines} lines; --cache-mb {cache_mb}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=500, help="the session file's size")
    parser.add_argument("--cache-mb", type=int, default=CACHE_MB)
    parser.add_argument(
        "--compactions",
        type=int,
        default=COMPACTIONS,
        help="spread over the session (0: none, the whole session is its context)",
    )
    parser.add_argument("--work", type=Path, default=None, help="default: a temp dir")
    parser.add_argument(
        "--claude", action="store_true", help="the same session as Claude Code writes it"
    )
    parser.add_argument("--codex", action="store_true", help="the same session as a Codex rollout")
    parser.add_argument(
        "--zst", action="store_true", help="--codex: the rollout archived, zstd-compressed"
    )
    parser.add_argument(
        "--codex-turns",
        type=int,
        default=None,
        help="--codex: the tests' long rollout of this many turns a part (not the corpus's)",
    )
    parser.add_argument(
        "--checkout", type=Path, default=REPO, help="the checkout whose daemon is run"
    )
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="sessionfs-hugefile-"))
    if args.codex:
        rollout = (args.codex_turns, args.zst)
        make: Callable[..., tuple[list[str], Path]] = partial(codex_session, rollout=rollout)
    else:
        make = claude_session if args.claude else xcsh_session
    mount_args, session_dir = make(work, args.mb, args.cache_mb, args.compactions)
    for stale in (work / "cache").glob("agent-*/*/*"):
        if stale.parent.name in ("renders", "contexts", "pages"):
            stale.unlink()  # every run renders from the session file (the first cat's cost)
    mnt = work / "mnt"
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    with mounted(mount_args, mnt, cwd=args.checkout) as daemon:
        session_dir = next(mnt.glob(str(session_dir.relative_to(mnt))), session_dir)
        sampler = WorkersRssSampler(daemon.pid)
        try:
            rows = run_steps(session_dir, sampler, _grepped_word(args.codex_turns))
        finally:
            sampler.stop()
        hwm = proc_status_mb(daemon.pid, "VmHWM") or 0.0
        cpu = Path(f"/proc/{daemon.pid}/stat").read_text().rsplit(")", 1)[1].split()
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    bound = args.cache_mb + 100
    worst_worker = max(r[4] for r in rows)
    print(
        f"\ndaemon VmHWM {hwm:.0f} MB (bound {bound} MB: {'ok' if hwm <= bound else 'OVER'}); "
        f"workers' peak RSS {worst_worker:.0f} MB; daemon CPU "
        f"{(int(cpu[11]) + int(cpu[12])) / 100:.1f} s; load average {' '.join(load_before)} "
        f"-> {' '.join(load_after)}"
    )
    failed = [r[0] for r in rows if r[2].startswith("FAILED")]
    if failed:
        print("failed: " + ", ".join(failed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
