"""Scale benchmark (issue 11): the mount on a real-sized agent dir against raw tools.

Run from the repo root: ``python bench/bench_scale.py [--quick] [--sessions 1000]
[--entries 400] [--cache-mb 256]``; ``python -m bench`` runs it at the full size.
``--only-fixture [--fixture-runs N]`` gives the fixture's ``context.json`` figure alone
(N times), ``--only-by-id`` the by-id/ figures alone, ``--only-listings`` the big
listings (10,000 one-line sessions it makes itself), ``--only-search`` the
``search/<q>`` figures alone (a fresh index built first).

Corpus: ``bench/corpus.py`` (1,000 sessions x 400 entries, ~0.9 GB, cached between runs
in the user cache dir; ``--quick`` = 100 x 400), plus a 60-session corpus for the
recursive greps and the 2.4 MB real fixture for ``context.json``. WORD is the corpus's
rare word: it is in exactly the sessions the manifest names.

Figures, each a step with a timeout, with the daemon's RSS (max VmRSS sampled every
100 ms during the step, VmHWM at its end):

* raw ``grep -rl WORD`` over the JSONL: cold (page cache dropped) and warm;
* ``grep -l WORD mnt/sessions/*/*/transcript.md``: first (fresh daemon, fresh cache dir,
  page cache dropped) and again;
* ``grep -rl WORD mnt/transcripts`` first / warm, ``search/<words>`` p95 (40 queries of
  four kinds, and the index's 50 most frequent terms with their 3-letter prefixes), and
  a remount
  with the cache dir kept (page cache dropped) -- "n/a" when the mount has no
  ``transcripts/`` or ``search/`` (before issue 11);
* ``cat`` every ``context.json`` (fresh daemon);
* on 60 sessions: ``grep -rl --include=transcript.md WORD mnt/sessions`` (warm) and
  ``grep -r WORD mnt/sessions``, against the same greps over the JSONL;
* first ``cat context.json`` of the 2.4 MB fixture against parsing the file (orjson);
* cold read of every ``entries/*.json`` (of ``--walk-sessions`` sessions; in the summary,
  of the 60-session corpus), all paths listed first and session by session, against the
  bare pyfuse3 filesystem of ``bench_mount.py`` serving the same bytes
  (``bench/entries_walk.py``), with the sessions the daemon loaded.

``--cache-dir`` is passed to the daemon only when ``sessionfs mount --help`` lists it, and
``--read-only`` likewise (the cached corpus must never change).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_mount, claude_corpus, corpus, entries_walk
from bench.common import (
    COMMON_TERMS,
    FIXTURES,
    REPO,
    common_term_queries,
    mounted,
    percentile,
    sessionfs_args,
)
from sessionfs.view import session_ids
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.search_view import search_db_path
from tests.support.agent_messages import write_header_session

FIXTURE = "pi-v1-before-compaction.jsonl"
SMALL_SESSIONS = 60
SAMPLE_SECONDS = 0.1


class StepTimeout(Exception):
    pass


# --- rows -------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    ours: str
    baseline: str = ""
    ratio: float | None = None
    aim: str = ""
    rss: str = ""
    note: str = ""


@dataclass
class Report:
    figures: list[Figure] = field(default_factory=list)

    def add(self, figure: Figure) -> None:
        self.figures.append(figure)
        print(f"  {figure.name}: {figure.ours}  [{figure.baseline}] {figure.note}", flush=True)

    def print(self, title: str) -> None:
        headers = ("measurement", "sessionfs", "baseline", "ratio", "aim", "daemon RSS", "note")
        cells = [headers] + [
            (
                f.name,
                f.ours,
                f.baseline,
                "" if f.ratio is None else f"{f.ratio:.2f}",
                f.aim,
                f.rss,
                f.note,
            )
            for f in self.figures
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
        print(f"\n{title}")
        for index, row in enumerate(cells):
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if index == 0:
                print("  " + "  ".join("-" * w for w in widths))
        sys.stdout.flush()


NOT_IN_BUILD = "n/a (not in this build)"


# --- the daemon's memory ----------------------------------------------------------


def proc_status_mb(pid: int, key: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def proc_cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user + system, every thread; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler:
    """Samples the daemon's VmRSS every 100 ms on a thread; ``step()`` gives the max
    during a block and the VmHWM (peak since start) at its end."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.current_max = 0.0
        self.overall_max = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            rss = proc_status_mb(self.pid, "VmRSS")
            if rss is not None:
                self.current_max = max(self.current_max, rss)
                self.overall_max = max(self.overall_max, rss)

    @contextmanager
    def step(self) -> Iterator[Callable[[], str]]:
        self.current_max = proc_status_mb(self.pid, "VmRSS") or 0.0
        readings: list[str] = []
        try:
            yield lambda: readings[0] if readings else ""
        finally:
            hwm = proc_status_mb(self.pid, "VmHWM")
            readings.append(f"max {self.current_max:.0f} / HWM {hwm or 0:.0f} MB")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


# --- running things ---------------------------------------------------------------


def run_timed(args: list[str], timeout: float) -> tuple[float, str]:
    """Run a command; (seconds, stdout). grep's exit 1 (no match) is not an error."""
    start = time.perf_counter()
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        raise StepTimeout(f"{args[0]} took more than {timeout:.0f} s") from error
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args[:4])} ...: exit {result.returncode}: {result.stderr}")
    return elapsed, result.stdout


def shell_timed(script: str, timeout: float, *args: str | Path) -> tuple[float, str]:
    """A shell line (so the shell expands the globs, as for a user), ``$1``... = args."""
    return run_timed(["sh", "-c", script, "sh", *map(str, args)], timeout)


def best(runs: int, fn: Callable[[], tuple[float, str]]) -> tuple[float, str]:
    return min((fn() for _ in range(runs)), key=lambda result: result[0])


def spread_ms(samples: list[float]) -> str:
    """p50 / p95 / max in milliseconds."""
    p50, p95 = percentile(samples, 0.5), percentile(samples, 0.95)
    return f"{p50 * 1e3:.1f} / {p95 * 1e3:.1f} / {max(samples) * 1e3:.1f} ms"


def slowest(samples: list[float], queries: tuple[tuple[str, str], ...]) -> str:
    worst = max(range(len(samples)), key=samples.__getitem__)
    kind, query = queries[worst]
    return f"{query[:30]!r} ({kind}) {samples[worst] * 1e3:.0f} ms"


def first_word(query: str) -> str:
    words = query.replace('"', " ").split()
    return words[0] if words else query


def search_ready(ctl: str) -> bool:
    """Whether the root ctl says every search index is ready (``search:``, and
    ``search_<agent>:`` for each other agent mounted beside)."""
    states = [
        value.strip()
        for name, _, value in (line.partition(":") for line in ctl.splitlines())
        if name == "search" or (name.startswith("search_") and not name.endswith("_last_error"))
    ]
    return bool(states) and all(state.startswith("ready") for state in states)


def wait_for_search(mnt: Path, timeout: float) -> None:
    """Until the root ctl says the search indexes are ready (their first builds done)."""
    deadline = time.monotonic() + timeout
    while not search_ready((mnt / "ctl").read_text()):
        if time.monotonic() > deadline:
            raise StepTimeout("the search index was not ready within the step timeout")
        time.sleep(0.2)


def read_search(mnt: Path, query: str) -> float:
    """Seconds to read ``search/<query>`` (one open + read, as ``cat`` does)."""
    start = time.perf_counter()
    (mnt / "search" / query).read_bytes()
    return time.perf_counter() - start


def session_keys(paths: str, marker: str) -> set[str]:
    """``<project>/<stem>`` of every session named in grep -l output."""
    keys = set()
    for line in paths.splitlines():
        parts = Path(line).parts
        at = parts.index(marker)
        project, rest = parts[at + 1], parts[at + 2]
        keys.add(f"{project}/{rest.removesuffix('.jsonl').removesuffix('.md')}")
    return keys


def drop_caches() -> bool:
    return bench_mount.drop_page_cache()


def mount_help() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sessionfs", "mount", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        raise SystemExit(f"sessionfs mount --help failed:\n{result.stderr}")
    return result.stdout


@dataclass
class MountSetup:
    work: Path
    cache_mb: int
    help_text: str
    peak_rss_mb: float = 0.0
    #: ``--claude``: a Claude Code dir of the same sessions mounted beside the agent dir
    claude_dir: Path | None = None

    def args(self, agent: Path, cache_dir: Path | None) -> list[str]:
        extra = ["--cache-mb", str(self.cache_mb)]
        if self.claude_dir is not None:
            extra += ["--agents", "claude", "--claude-dir", str(self.claude_dir)]
        elif "--no-agents" in self.help_text:
            extra.append("--no-agents")  # never the machine user's own Claude/Codex dirs
        if "--read-only" in self.help_text:
            extra.append("--read-only")
        if cache_dir is not None and "--cache-dir" in self.help_text:
            extra += ["--cache-dir", str(cache_dir)]
        return sessionfs_args(self.work / "mnt", agent, *extra)

    @contextmanager
    def mount(self, agent: Path, cache_dir: Path | None) -> Iterator[tuple[Path, RssSampler]]:
        mnt = self.work / "mnt"
        with mounted(self.args(agent, cache_dir), mnt) as daemon:
            sampler = RssSampler(daemon.pid)
            try:
                yield mnt, sampler
            finally:
                sampler.stop()
                hwm = proc_status_mb(daemon.pid, "VmHWM") or 0.0
                self.peak_rss_mb = max(self.peak_rss_mb, sampler.overall_max, hwm)


def fresh_cache_dir(work: Path, name: str) -> Path:
    path = work / "cache" / name
    shutil.rmtree(path, ignore_errors=True)
    return path


def guarded(report: Report, name: str, fn: Callable[[], None]) -> None:
    """Run one measurement; a timeout or error becomes a row, and the run goes on."""
    try:
        fn()
    except (StepTimeout, RuntimeError, OSError) as error:
        report.add(Figure(name, "FAILED", note=str(error)[:200]))


# --- the steps --------------------------------------------------------------------


@dataclass
class Bench:
    setup: MountSetup
    big: corpus.Corpus
    word: str
    timeout: float
    report: Report = field(default_factory=Report)
    raw_cold: float = math.nan
    raw_warm: float = math.nan
    raw_found: set[str] = field(default_factory=set)

    @property
    def expected(self) -> set[str]:
        names = self.big.sessions_with[self.word]
        return {name.removeprefix("agent/sessions/").removesuffix(".jsonl") for name in names}

    def found_note(self, found: set[str]) -> str:
        same = "same as" if found == self.raw_found else "DIFFERENT from"
        return f"{len(found)} sessions, {same} raw grep"

    def raw_grep(self) -> None:
        sessions = self.big.agent_dir / "sessions"
        cold_dropped = drop_caches()
        self.raw_cold, out = run_timed(["grep", "-rl", self.word, str(sessions)], self.timeout)
        self.raw_found = session_keys(out, "sessions")
        self.raw_warm, _ = best(3, lambda: run_timed(["grep", "-rl", self.word, str(sessions)], 60))
        note = f"{len(self.raw_found)} sessions (manifest: {len(self.expected)})"
        cold = "page cache dropped" if cold_dropped else "page cache NOT dropped (not root)"
        self.report.add(
            Figure("raw grep -rl WORD sessions/, cold", f"{self.raw_cold:.3f} s", cold, note=note)
        )
        self.report.add(
            Figure(
                "raw grep -rl WORD sessions/, warm",
                f"{self.raw_warm:.3f} s",
                "best of 3",
                note=note,
            )
        )
        # A word in every file: grep -l stops at the first match in each, so this is
        # the cheapest grep there is (not a baseline for the aims, which use WORD).
        args = ["grep", "-rl", corpus.COMMON_WORD, str(sessions)]
        common, out = best(3, lambda: run_timed(args, 60))
        self.report.add(
            Figure(
                f"raw grep -rl {corpus.COMMON_WORD} sessions/, warm (word in every session)",
                f"{common:.3f} s",
                "best of 3",
                note=f"{len(session_keys(out, 'sessions'))} sessions",
            )
        )

    def transcript_glob(self, cache_dir: Path) -> bool:
        """grep -l over sessions/*/*/transcript.md, first and again; whether the mount
        has transcripts/ (learnt on the way)."""
        script = 'grep -l "$1" "$2"/sessions/*/*/transcript.md'
        drop_caches()
        with self.setup.mount(self.big.agent_dir, cache_dir) as (mnt, rss):
            for label, aim_of in (("first", 10.0), ("again", 3.0)):
                with rss.step() as reading:
                    elapsed, out = shell_timed(script, self.timeout, self.word, mnt)
                base = self.raw_cold if label == "first" else self.raw_warm
                self.report.add(
                    Figure(
                        f"grep -l WORD sessions/*/*/transcript.md, {label}",
                        f"{elapsed:.2f} s",
                        f"{base:.3f} s raw {'cold' if label == 'first' else 'warm'}",
                        elapsed / base,
                        f"(info; transcripts/ aim <= {aim_of:g}x)",
                        reading(),
                        self.found_note(session_keys(out, "sessions")),
                    )
                )
            return (mnt / "transcripts").is_dir()

    def transcripts_first_and_warm(self, cache_dir: Path) -> bool:
        """grep -rl over transcripts/ in a first-ever mount, warm, and search/ p95;
        whether search/ exists."""
        drop_caches()
        with self.setup.mount(self.big.agent_dir, cache_dir) as (mnt, rss):
            args = ["grep", "-rl", self.word, str(mnt / "transcripts")]
            with rss.step() as reading:
                first, out = run_timed(args, self.timeout)
            self.report.add(
                Figure(
                    "grep -rl WORD transcripts/, first ever mount (fresh cache dir, cold)",
                    f"{first:.2f} s",
                    f"{self.raw_cold:.3f} s raw cold",
                    first / self.raw_cold,
                    "<= 5x",
                    reading(),
                    self.found_note(session_keys(out, "transcripts")),
                )
            )
            with rss.step() as reading:
                warm, out = best(3, lambda: run_timed(args, self.timeout))
            self.report.add(
                Figure(
                    "grep -rl WORD transcripts/, warm (best of 3)",
                    f"{warm:.3f} s",
                    f"{self.raw_warm:.3f} s raw warm (best of 3)",
                    warm / self.raw_warm,
                    "<= 1.5x",
                    reading(),
                    self.found_note(session_keys(out, "transcripts")),
                )
            )
            has_search = (mnt / "search").is_dir()
            if has_search:
                guarded(self.report, "search/<q>", lambda: self.search_first_reads(mnt, rss))
                guarded(
                    self.report,
                    "search/<q>, common terms",
                    lambda: self.common_term_first_reads(mnt, cache_dir),
                )
            return has_search

    def search_first_reads(self, mnt: Path, rss: RssSampler) -> None:
        """``search/<q>`` as a person typing new queries meets it: once the index says
        it is ready, each of `corpus.SEARCH_QUERIES` (40 distinct queries of four kinds)
        read once, so no answer comes from the daemon's result cache; p50/p95/max. The
        baseline, the same way: raw ``grep -rlFi`` of each query's first word over the
        JSONL, once each, warm (it only names files: no entries, order or snippets).
        Then the adversarial shapes, once each: their max."""
        wait_for_search(mnt, self.timeout)
        sessions = self.big.agent_dir / "sessions"
        with rss.step() as reading:
            ours = [read_search(mnt, query) for _, query in corpus.SEARCH_QUERIES]
        raw = [
            run_timed(["grep", "-rlFi", "--", first_word(query), str(sessions)], 60)[0]
            for _, query in corpus.SEARCH_QUERIES
        ]
        self.report.add(
            Figure(
                f"search/<q>, first read of {len(ours)} distinct queries: p50 / p95 / max",
                spread_ms(ours),
                f"{spread_ms(raw)} raw grep -rlFi",
                percentile(ours, 0.95) / percentile(raw, 0.95),
                "p95 <= 50 ms, max <= 100 ms",
                reading(),
                "slowest: " + slowest(ours, corpus.SEARCH_QUERIES),
            )
        )
        # The daemon's CPU time beside the wall time: on a shared machine the wall time
        # of a 40 ms query swings from 40 to 600 ms with the load.
        cpu = proc_cpu_seconds(rss.pid)
        hard = [read_search(mnt, query) for _, query in corpus.ADVERSARIAL_QUERIES]
        cpu = proc_cpu_seconds(rss.pid) - cpu
        self.report.add(
            Figure(
                f"search/<q>, {len(hard)} adversarial shapes, first read: p50 / p95 / max",
                spread_ms(hard),
                aim="max < 200 ms",
                note="slowest: "
                + slowest(hard, corpus.ADVERSARIAL_QUERIES)
                + f"; daemon CPU {cpu * 1000:.0f} ms for the {len(hard)}",
            )
        )

    def common_term_first_reads(self, mnt: Path, cache_dir: Path) -> None:
        """``search/<q>`` for the words everybody uses (issue 26): the corpus's
        `COMMON_TERMS` most frequent terms and their 3-letter prefixes, taken from the
        index's own vocabulary (not a hand list), each read once; p50/p95/max."""
        queries = common_term_queries(search_db_path(cache_dir, self.big.agent_dir))
        wait_for_search(mnt, self.timeout)
        ours = [read_search(mnt, query) for _, query in queries]
        self.report.add(
            Figure(
                f"search/<q>, first read of the {COMMON_TERMS} commonest terms and their "
                f"3-letter prefixes ({len(ours)}): p50 / p95 / max",
                spread_ms(ours),
                aim="p95 <= 30 ms, max <= 60 ms",
                note="slowest: " + slowest(ours, queries),
            )
        )

    def remount_kept_cache(self, cache_dir: Path, has_transcripts: bool) -> None:
        # Its own raw cold baseline, taken right before: on a VM the cold read speed
        # drifts between the start of the run and here (1.8-4.2 s for the same grep).
        drop_caches()
        sessions = self.big.agent_dir / "sessions"
        raw_cold, _ = run_timed(["grep", "-rl", self.word, str(sessions)], self.timeout)
        drop_caches()
        with (
            self.setup.mount(self.big.agent_dir, cache_dir) as (mnt, rss),
            rss.step() as reading,
        ):
            if has_transcripts:
                elapsed, out = run_timed(
                    ["grep", "-rl", self.word, str(mnt / "transcripts")], self.timeout
                )
                name, marker = "grep -rl WORD transcripts/", "transcripts"
            else:
                elapsed, out = shell_timed(
                    'grep -l "$1" "$2"/sessions/*/*/transcript.md',
                    self.timeout,
                    self.word,
                    mnt,
                )
                name, marker = "grep -l WORD sessions/*/*/transcript.md", "sessions"
        self.report.add(
            Figure(
                f"{name}, remount (cache dir kept, page cache dropped)",
                f"{elapsed:.2f} s",
                f"{raw_cold:.3f} s raw cold, just before",
                elapsed / raw_cold,
                "<= 2x",
                reading(),
                self.found_note(session_keys(out, marker)),
            )
        )

    def cat_contexts(self, cache_dir: Path) -> None:
        with (
            self.setup.mount(self.big.agent_dir, cache_dir) as (mnt, rss),
            rss.step() as reading,
        ):
            elapsed, _ = shell_timed(
                'cat "$1"/sessions/*/*/context.json > /dev/null', self.timeout, mnt
            )
        files = len(self.big.files)
        self.report.add(
            Figure(
                "cat every context.json (fresh daemon)",
                f"{elapsed:.2f} s",
                f"{files} sessions",
                None,
                "(info)",
                reading(),
            )
        )


def recursive_greps(bench: Bench, small: corpus.Corpus, cache_dir: Path) -> None:
    """The recursive greps a user types, on a 60-session agent dir (a recursive grep of
    the mount walks every entries/ and path/ dir too)."""
    raw_sessions = str(small.agent_dir / "sessions")
    word, timeout = bench.word, bench.timeout
    raw_l, _ = best(3, lambda: run_timed(["grep", "-rl", word, raw_sessions], 60))
    raw_r, _ = best(3, lambda: run_timed(["grep", "-r", word, raw_sessions], 60))
    sessions = len(small.files)
    with bench.setup.mount(small.agent_dir, cache_dir) as (mnt, rss):
        args = ["grep", "-rl", "--include=transcript.md", word, str(mnt / "sessions")]
        run_timed(args, timeout)
        with rss.step() as reading:
            warm, _ = run_timed(args, timeout)
        bench.report.add(
            Figure(
                f"grep -rl --include=transcript.md WORD sessions/ ({sessions} sessions), warm",
                f"{warm:.3f} s",
                f"{raw_l:.3f} s raw grep -rl",
                warm / raw_l,
                "(info)",
                reading(),
            )
        )
        with rss.step() as reading:
            recursive, _ = run_timed(["grep", "-r", word, str(mnt / "sessions")], timeout)
        bench.report.add(
            Figure(
                f"grep -r WORD sessions/ ({sessions} sessions)",
                f"{recursive:.2f} s",
                f"{raw_r:.3f} s raw grep -r",
                recursive / raw_r,
                "(info)",
                reading(),
            )
        )


#: The baseline of the fixture's first context.json: reading + parsing the file with
#: orjson (core.jsonl), timed in a fresh process as the daemon's first read is.
FRESH_PARSE = """
import sys, time
from core import jsonl
start = time.perf_counter()
jsonl.load_entries_from_file(sys.argv[1])
print(time.perf_counter() - start)
"""


def fresh_parse_seconds(path: Path) -> float:
    """Seconds of the first orjson parse of ``path`` in a new interpreter (imports done
    before the clock starts, as the daemon's are before the first read)."""
    return fresh_run(FRESH_PARSE, REPO, path)[0]


def fresh_run(script: str, checkout: Path, path: Path) -> list[float]:
    """The numbers ``script`` prints given ``path``, run in a new interpreter from
    ``checkout`` (its own packages)."""
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [float(word) for word in result.stdout.split()]


def fixture_context(bench: Bench, work: Path) -> None:
    """First ``cat context.json`` of the 2.4 MB fixture (fresh daemon and cache dir)
    against the first orjson parse of the file in a fresh process, each pair taken
    back to back, best of 3 of each: both are first reads of a process, which a parse
    repeated in a warm process is not (it reuses the heap the first one grew)."""
    agent = work / "fixture-agent"
    project = agent / "sessions" / "--fixture--"
    project.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / FIXTURE, project / FIXTURE)
    firsts, parses, readings = [], [], []
    for attempt in range(3):
        parses.append(fresh_parse_seconds(project / FIXTURE))
        cache_dir = fresh_cache_dir(work, f"fixture-{attempt}")
        with bench.setup.mount(agent, cache_dir) as (mnt, rss), rss.step() as reading:
            context = mnt / "sessions" / "--fixture--" / FIXTURE.removesuffix(".jsonl")
            firsts.append(_seconds((context / "context.json").read_bytes))
        readings.append(reading())
    first, parse = min(firsts), min(parses)
    bench.report.add(
        Figure(
            "first cat context.json, 2.4 MB fixture",
            f"{first * 1000:.0f} ms",
            f"{parse * 1000:.0f} ms orjson parse, fresh process",
            first / parse,
            "<= 2x",
            readings[firsts.index(first)],
            "best of 3 fresh daemons / 3 fresh parses",
        )
    )


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cold_entries_walk(bench: Bench, work: Path, walked: corpus.Corpus, sessions: int) -> None:
    """Cold read of every entries/*.json of the first ``sessions`` of ``walked`` in both
    orders of `entries_walk.ORDERS` (fresh daemon, fresh cache dir, page cache dropped,
    for each), each followed at once by the same read of a bare pyfuse3 fs serving the
    same bytes (mounted afresh), with the daemon's RSS and the sessions it loaded
    (issue 26: each once when they fit ``--cache-mb``)."""
    files = walked.files[:sessions]
    tree = work / "entries-tree"
    bare_mnt = work / "bare-mnt"
    bare_args = [sys.executable, bench_mount.__file__, "--serve-bare", str(bare_mnt), str(tree)]
    for order in entries_walk.ORDERS:
        drop_caches()
        with bench.setup.mount(walked.agent_dir, fresh_cache_dir(work, "walk")) as (mnt, rss):
            dirs = entries_walk.entries_dirs(mnt, files)
            with rss.step() as reading:
                ours = entries_walk.walk(dirs, order, bench.timeout)
            loads = entries_walk.cache_loads(mnt)
            if not tree.exists():
                entries_walk.snapshot(dirs, tree)
        with mounted(bare_args, bare_mnt):
            bare_dirs = [bare_mnt / f"d{n}" for n in range(len(files))]
            bare = entries_walk.walk(bare_dirs, order, 600)
        if (ours.files, ours.size) != (bare.files, bare.size):
            raise RuntimeError(f"bare fs served {bare.files} files, ours {ours.files}")
        bench.report.add(
            Figure(
                f"cold read every entries/*.json, {order} ({len(files)} sessions, "
                f"{ours.files:,} files)",
                f"{ours.rate:,.0f} files/s",
                f"{bare.rate:,.0f} files/s bare pyfuse3, right after",
                ours.rate / bare.rate,
                ">= 0.8x",
                reading(),
                f"{ours.size / 2**20:.0f} MB read; sessions loaded "
                f"{'n/a' if loads is None else loads}",
            )
        )
    shutil.rmtree(tree, ignore_errors=True)


# --- main -------------------------------------------------------------------------


#: ``by-id/`` lookups: sessions in the agent dir, spread over projects, and lookups timed.
BY_ID_SESSIONS = 3000
BY_ID_PROJECTS = 30
BY_ID_LOOKUPS = 1000


def id_corpus(agent: Path, sessions: int) -> list[tuple[str, str, str]]:
    """``sessions`` one-line session files (a header is all ``by-id/`` reads), as
    (project, stem, id)."""
    made = []
    for n in range(sessions):
        project = f"--work-p{n % BY_ID_PROJECTS:02d}--"
        session_id = f"0190{n:08d}-7e57-7000-8000-{n:012d}"
        stem = f"2026-01-01T00-00-00-000Z_{session_id}"
        write_header_session(agent / "sessions" / project, stem, session_id)
        made.append((project, stem, session_id))
    return made


def _per_call_us(paths: list[Path], fn: Callable[[Path], object]) -> float:
    start = time.perf_counter()
    for path in paths:
        with suppress(FileNotFoundError):
            fn(path)
    return (time.perf_counter() - start) / len(paths) * 1e6


def by_id_lookups(bench: Bench, work: Path, sessions: int = BY_ID_SESSIONS) -> None:
    """``lstat by-id/<id>`` of distinct ids (each a lookup the kernel has not cached)
    against ``lstat sessions/<project>/<stem>`` of distinct sessions (one stat in the
    daemon), in the same daemon; misses too; and in process, what a lookup used to
    cost (a listing of every session) against the id map's."""
    agent = work / "by-id-agent"
    made = id_corpus(agent, sessions)
    # A dir changed within the last RACY_NS is listed again at each sweep (its mtime may
    # not move on a second change): measure the steady state of an agent dir, whose
    # project dirs change when a session is created, not while it is written.
    time.sleep(session_ids.RACY_NS / 1e9)
    picked = made[:: max(1, len(made) // BY_ID_LOOKUPS)][:BY_ID_LOOKUPS]
    half = len(picked) // 2
    with bench.setup.mount(agent, fresh_cache_dir(work, "by-id")) as (mnt, rss):
        first = _seconds(lambda: os.lstat(mnt / "by-id" / picked[0][2]))
        with rss.step() as reading:
            # alternate halves so both kinds see the same machine noise
            runs = []
            for part in (picked[1:half], picked[half:]):
                by_id = _per_call_us([mnt / "by-id" / i for _p, _s, i in part], os.lstat)
                plain = _per_call_us([mnt / "sessions" / p / s for p, s, _i in part], os.lstat)
                runs.append((by_id, plain))
            misses = _per_call_us([mnt / "by-id" / f"nope-{n}" for n in range(half)], os.lstat)
        ratios = [b / p for b, p in runs]
        by_id_us = sum(b for b, _ in runs) / len(runs)
        plain_us = sum(p for _, p in runs) / len(runs)
        bench.report.add(
            Figure(
                f"lstat by-id/<id> ({sessions} sessions, {len(picked)} distinct ids)",
                f"{by_id_us:.0f} us",
                f"{plain_us:.0f} us lstat sessions/<p>/<s>",
                by_id_us / plain_us,
                "~1x",
                reading(),
                f"ratio range {min(ratios):.2f}-{max(ratios):.2f}; first lookup (builds the "
                f"id map) {first * 1000:.0f} ms; a miss {misses:.0f} us",
            )
        )
    index = AgentIndex(agent)
    old = min(_seconds(index.every_session) for _ in range(3))
    ids = [i for _p, _s, i in picked]
    index.ids.resolve(ids[0])
    new = min(_seconds(lambda: [index.ids.resolve(i) for i in ids]) for _ in range(3)) / len(ids)
    bench.report.add(
        Figure(
            "by-id lookup in process: id map vs listing every session (the old lookup)",
            f"{new * 1e6:.1f} us",
            f"{old * 1e6:.0f} us",
            new / old,
            "O(1) vs O(sessions)",
        )
    )


def load_line() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="sessionfs scale benchmark (issue 11)")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="100 sessions x 400 entries")
    parser.add_argument(
        "--summary", action="store_true", help="only the figures of make bench's table"
    )
    parser.add_argument("--cache-mb", type=int, default=256)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--walk-sessions", type=int, help="sessions to walk (default: all)")
    parser.add_argument("--step-timeout", type=float, default=900.0, help="seconds per step")
    parser.add_argument("--corpus-dir", type=Path, help="cache root for generated corpora")
    parser.add_argument(
        "--claude",
        action="store_true",
        help="mount the same sessions as Claude Code sessions beside them (agents/claude/) "
        "and add their figures",
    )
    parser.add_argument(
        "--only-by-id", action="store_true", help="only the by-id/ lookup figures (no corpus)"
    )
    parser.add_argument(
        "--only-fixture",
        action="store_true",
        help="only the first cat context.json of the 2.4 MB fixture (no corpus)",
    )
    parser.add_argument(
        "--only-listings",
        action="store_true",
        help="only the big listings figures (10,000 one-line sessions, made here)",
    )
    parser.add_argument(
        "--fixture-runs", type=int, default=1, help="with --only-fixture: figures to print"
    )
    parser.add_argument(
        "--only-search",
        action="store_true",
        help="only the search/<q> figures (a fresh daemon and index on the corpus)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.entries = 100, 400
    return args


def prepare_corpus(params: corpus.CorpusParams, base: Path | None) -> corpus.Corpus:
    root = None if base is None else base / corpus.default_dir(params).name
    built, elapsed = corpus.ensure(params, root)
    how = "from the cache" if elapsed is None else f"generated in {elapsed:.1f} s"
    print(
        f"corpus {built.agent_dir}: {len(built.files)} sessions x {params.entries} entries, "
        f"{built.total_bytes / 2**20:.0f} MB ({how})",
        flush=True,
    )
    return built


def prepare_claude(big: corpus.Corpus) -> Path:
    root, elapsed = claude_corpus.ensure(big)
    how = "from the cache" if elapsed is None else f"converted in {elapsed:.1f} s"
    print(f"Claude Code dir {root}: {len(big.files)} sessions ({how})", flush=True)
    return root


def claude_figures(bench: Bench, work: Path) -> None:
    """With ``--claude``: the other agent's tree itself, in a fresh mount: its listing,
    a first and a warm ``grep -rl`` over its transcripts, every ``context.json``."""
    cache_dir = fresh_cache_dir(work, "claude")
    drop_caches()
    with bench.setup.mount(bench.big.agent_dir, cache_dir) as (mnt, rss):
        claude = mnt / "agents" / "claude"
        with rss.step() as reading:
            listed, out = shell_timed('ls "$1"/sessions/*/ | wc -l', bench.timeout, claude)
        bench.report.add(
            Figure(
                "ls agents/claude/sessions/*/",
                f"{listed:.2f} s",
                f"{out.strip()} lines",
                None,
                "(info)",
                reading(),
            )
        )
        args = ["grep", "-rl", bench.word, str(claude / "transcripts")]
        for label, runs in (("first", 1), ("warm", 3)):
            with rss.step() as reading:
                elapsed, out = best(runs, lambda: run_timed(args, bench.timeout))
            base = bench.raw_cold if label == "first" else bench.raw_warm
            bench.report.add(
                Figure(
                    f"grep -rl WORD agents/claude/transcripts/, {label}",
                    f"{elapsed:.2f} s",
                    f"{base:.3f} s raw xcsh {'cold' if label == 'first' else 'warm'}",
                    elapsed / base,
                    "(info)",
                    reading(),
                    f"{len(out.splitlines())} sessions",
                )
            )
        with rss.step() as reading:
            elapsed, _ = shell_timed(
                'cat "$1"/sessions/*/*/context.json > /dev/null', bench.timeout, claude
            )
        bench.report.add(
            Figure(
                "cat every agents/claude context.json",
                f"{elapsed:.2f} s",
                f"{len(bench.big.files)} sessions",
                None,
                "(info)",
                reading(),
            )
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only_by_id:
        return main_by_id(args)
    if args.only_fixture:
        return main_fixture(args)
    if args.only_listings:
        return main_one_step(args, "big listings", big_listings)
    if not (FIXTURES / FIXTURE).is_file():
        print(f"bench_scale: fixture {FIXTURE} not found in {FIXTURES}", file=sys.stderr)
        return 1
    big = prepare_corpus(
        corpus.CorpusParams(args.sessions, args.entries, args.seed), args.corpus_dir
    )
    small_params = corpus.CorpusParams(min(SMALL_SESSIONS, args.sessions), args.entries, args.seed)
    small = prepare_corpus(small_params, args.corpus_dir)
    work = Path(tempfile.mkdtemp(prefix="sessionfs-scale-"))
    claude = prepare_claude(big) if args.claude else None
    try:
        setup = MountSetup(work, args.cache_mb, mount_help(), claude_dir=claude)
        bench = Bench(setup, big, corpus.RARE_WORD, args.step_timeout)
        load_before = load_line()
        if args.only_search:
            run_search_only(bench, work)
        elif args.summary:
            run_summary(bench, small, work)
        else:
            run_all(bench, small, work, args.walk_sessions or len(big.files))
        title = (
            f"sessionfs at scale: {len(big.files)} sessions x {args.entries} entries, "
            f"{big.total_bytes / 2**20:.0f} MB, --cache-mb {args.cache_mb}, WORD="
            f"{bench.word!r}"
            f"{'; the same sessions as Claude Code sessions beside them' if claude else ''}"
            f"; load avg before {load_before}, after {load_line()}, "
            f"{os.cpu_count()} CPUs"
        )
        bench.report.print(title)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main_by_id(args: argparse.Namespace) -> int:
    """``--only-by-id``: the by-id/ figures alone (seconds, not the big corpus)."""
    return main_one_step(args, "by-id/ lookups", by_id_lookups)


def main_fixture(args: argparse.Namespace) -> int:
    """``--only-fixture``: the first ``cat context.json`` of the fixture alone, run
    ``--fixture-runs`` times (each its own best of 3 fresh daemons)."""

    def runs(bench: Bench, work: Path) -> None:
        for _ in range(args.fixture_runs):
            fixture_context(bench, work)

    return main_one_step(args, "first cat context.json of the fixture", runs)


def main_one_step(args: argparse.Namespace, title: str, step: Callable[[Bench, Path], None]) -> int:
    """One step of the benchmark without the big corpus (it is not read)."""
    work = Path(tempfile.mkdtemp(prefix="sessionfs-scale-step-"))
    try:
        empty = corpus.Corpus(work, corpus.CorpusParams(0, 0), [], {}, 0)  # not read
        bench = Bench(MountSetup(work, args.cache_mb, mount_help()), empty, "", args.step_timeout)
        step(bench, work)
        bench.report.print(f"{title}; load avg {load_line()}, {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def transcripts_small(bench: Bench, small: corpus.Corpus, cache_dir: Path) -> None:
    """``grep -rl WORD transcripts/`` on the 60-session agent dir: warm (best of 3, after
    a first read) against raw ``grep -rl`` over its JSONL, warm (best of 3)."""
    raw_sessions = str(small.agent_dir / "sessions")
    raw, _ = best(3, lambda: run_timed(["grep", "-rl", bench.word, raw_sessions], 60))
    with bench.setup.mount(small.agent_dir, cache_dir) as (mnt, rss):
        args = ["grep", "-rl", bench.word, str(mnt / "transcripts")]
        run_timed(args, bench.timeout)
        with rss.step() as reading:
            warm, _ = best(3, lambda: run_timed(args, bench.timeout))
    bench.report.add(
        Figure(
            f"grep -rl WORD transcripts/ ({len(small.files)} sessions), warm (best of 3)",
            f"{warm:.3f} s",
            f"{raw:.3f} s raw warm (best of 3)",
            warm / raw,
            "<= 1.5x",
            reading(),
        )
    )


def index_size(bench: Bench, cache_dir: Path) -> None:
    """The search index's files (database, log) against the session files."""
    db = search_db_path(cache_dir, bench.big.agent_dir)
    size = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    bench.report.add(
        Figure(
            "search index size",
            f"{size / 2**20:.0f} MB",
            f"{bench.big.total_bytes / 2**20:.0f} MB session files",
            size / bench.big.total_bytes,
            "<= 0.40",
        )
    )


#: Big listings: one-line sessions in a few projects (issue 19's agent dir shape).
LISTING_SESSIONS = 10_000
LISTING_PROJECTS = 5

#: Reads each file's first 4 KiB, dir by dir: in a loop (argv[1] == "1"), or split in
#: runs over that many threads (how the mount reads a first listing: `head_reads`).
HEAD_READER = """
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
threads, dirs = int(sys.argv[1]), sys.argv[2:]
def read_run(paths):
    for path in paths:
        with open(path, "rb") as f:
            f.read(4096)
start = time.perf_counter()
for d in dirs:
    paths = [entry.path for entry in os.scandir(d)]
    if threads == 1:
        read_run(paths)
        continue
    step = -(-len(paths) // threads)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(read_run, [paths[i : i + step] for i in range(0, len(paths), step)]))
print(time.perf_counter() - start)
"""
#: Threads of the second baseline (`sessionfs.view.head_reads.HEAD_READERS`).
HEAD_READER_THREADS = 8


def read_heads_cold(projects: list[Path], threads: int) -> float:
    """Seconds to read each file's first 4 KiB after dropping the page cache (the
    reads alone, without the interpreter's start)."""
    drop_caches()
    _, out = run_timed([sys.executable, "-c", HEAD_READER, str(threads), *map(str, projects)], 60)
    return float(out)


def big_listings(bench: Bench, work: Path) -> None:
    """``ls`` of every project of an agent dir of 10,000 sessions in 5 projects whose
    dirs were last changed a minute ago: first (fresh daemon, page cache dropped)
    against reading each file's first 4 KiB the same way, and warm (best of 3)."""
    agent = work / "listing-agent"
    for n in range(LISTING_SESSIONS):
        session_id = f"0190{n:08d}-7e57-7000-8000-{n:012d}"
        project = agent / "sessions" / f"--work-p{n % LISTING_PROJECTS}--"
        write_header_session(project, f"2026-01-01T00-00-00-000Z_{session_id}", session_id)
    projects = sorted((agent / "sessions").iterdir())
    minute_ago = time.time_ns() - 60 * 10**9
    for project in projects:
        os.utime(project, ns=(minute_ago, minute_ago))
    heads = read_heads_cold(projects, 1)
    heads_threads = read_heads_cold(projects, HEAD_READER_THREADS)
    with bench.setup.mount(agent, fresh_cache_dir(work, "listing")) as (mnt, rss):
        listed = [mnt / "sessions" / project.name for project in projects]
        drop_caches()
        with rss.step() as reading:
            first, _ = run_timed(["ls", *map(str, listed)], bench.timeout)
            warm, _ = best(3, lambda: run_timed(["ls", *map(str, listed)], bench.timeout))
            warm_long, _ = best(3, lambda: idle_then_timed(["ls", "-l", *listed], bench.timeout))
    label = f"ls of every project ({LISTING_SESSIONS:,} sessions, {LISTING_PROJECTS} projects)"
    bench.report.add(
        Figure(
            f"{label}, first (fresh daemon, cold)",
            f"{first:.2f} s",
            f"{heads:.2f} s reading each file's first 4 KiB, cold",
            first / heads,
            "<= 2x",
            reading(),
            f"{heads_threads:.2f} s reading them in {HEAD_READER_THREADS} threads, cold",
        )
    )
    bench.report.add(Figure(f"{label}, warm (best of 3)", f"{warm:.3f} s", aim="<= 0.3 s"))
    bench.report.add(
        Figure(
            f"ls -l of every project, warm, {IDLE_SECONDS} s after the last (best of 3)",
            f"{warm_long:.3f} s",
            f"{warm:.3f} s warm ls",
            warm_long / warm,
            "about a warm ls (the session dirs' attributes kept by the kernel)",
        )
    )


#: Longer than every short cache timeout of the mount (0.5-1 s): what the kernel still
#: holds after it, it was told it may keep for long.
IDLE_SECONDS = 1.6


def idle_then_timed(args: list[str | Path], timeout: float) -> tuple[float, str]:
    """`run_timed` after `IDLE_SECONDS` without a request, as a user's next command."""
    time.sleep(IDLE_SECONDS)
    return run_timed([str(arg) for arg in args], timeout)


def run_search_only(bench: Bench, work: Path) -> None:
    """``--only-search``: the ``search/<q>`` figures alone, in a fresh daemon on a fresh
    cache dir once its first build is done (no ``grep`` before them)."""
    cache_dir = fresh_cache_dir(work, "search")
    with bench.setup.mount(bench.big.agent_dir, cache_dir) as (mnt, rss):
        guarded(bench.report, "search/<q>", lambda: bench.search_first_reads(mnt, rss))
        guarded(
            bench.report,
            "search/<q>, common terms",
            lambda: bench.common_term_first_reads(mnt, cache_dir),
        )


def run_summary(bench: Bench, small: corpus.Corpus, work: Path) -> None:
    """What ``make bench`` prints (issue 19): the figures a user meets, each beside a
    raw baseline taken the same way in the same run."""
    report = bench.report
    bench.raw_grep()
    kept_cache = fresh_cache_dir(work, "transcripts")
    guarded(report, "grep -rl WORD transcripts/", lambda: _first_warm_search(bench, kept_cache))
    guarded(report, "search index size", lambda: index_size(bench, kept_cache))
    guarded(report, "remount", lambda: bench.remount_kept_cache(kept_cache, True))
    guarded(
        report,
        "transcripts/, 60 sessions",
        lambda: transcripts_small(bench, small, fresh_cache_dir(work, "small")),
    )
    guarded(report, "first cat context.json", lambda: fixture_context(bench, work))
    guarded(
        report, "cold entries walk", lambda: cold_entries_walk(bench, work, small, len(small.files))
    )
    guarded(report, "big listings", lambda: big_listings(bench, work))
    if bench.setup.claude_dir is not None:
        guarded(report, "agents/claude", lambda: claude_figures(bench, work))
    peak_rss(bench)


def _first_warm_search(bench: Bench, cache_dir: Path) -> None:
    if not bench.transcripts_first_and_warm(cache_dir):
        bench.report.add(Figure("search/<q>, first reads", NOT_IN_BUILD))


def run_all(bench: Bench, small: corpus.Corpus, work: Path, walk_sessions: int) -> None:
    report = bench.report
    bench.raw_grep()
    has = {"transcripts": False, "search": False}

    glob_cache = fresh_cache_dir(work, "glob")

    def glob_step() -> None:
        has["transcripts"] = bench.transcript_glob(glob_cache)

    guarded(report, "grep -l WORD sessions/*/*/transcript.md", glob_step)
    # The remount reuses the cache dir of the mount that read the transcripts first.
    kept_cache = fresh_cache_dir(work, "transcripts") if has["transcripts"] else glob_cache
    if has["transcripts"]:

        def transcripts_step() -> None:
            has["search"] = bench.transcripts_first_and_warm(kept_cache)

        guarded(report, "grep -rl WORD transcripts/", transcripts_step)
    else:
        report.add(Figure("grep -rl WORD transcripts/, first ever mount", NOT_IN_BUILD))
        report.add(Figure("grep -rl WORD transcripts/, warm", NOT_IN_BUILD))
    if not has["search"]:
        report.add(Figure("search/<q>, first reads", NOT_IN_BUILD))
    guarded(
        report,
        "remount, cache dir kept",
        lambda: bench.remount_kept_cache(kept_cache, has["transcripts"]),
    )
    guarded(report, "cat every context.json", lambda: bench.cat_contexts(kept_cache))
    guarded(
        report,
        "recursive greps (60 sessions)",
        lambda: recursive_greps(bench, small, fresh_cache_dir(work, "small")),
    )
    guarded(report, "first cat context.json", lambda: fixture_context(bench, work))
    guarded(
        report,
        "cold entries walk",
        lambda: cold_entries_walk(bench, work, bench.big, walk_sessions),
    )
    guarded(report, "by-id lookups", lambda: by_id_lookups(bench, work))
    if bench.setup.claude_dir is not None:
        guarded(report, "agents/claude", lambda: claude_figures(bench, work))
    peak_rss(bench)


def peak_rss(bench: Bench) -> None:
    """The row of the daemons' peak RSS over every mount of the run."""
    limit = bench.setup.cache_mb + 100
    peak = bench.setup.peak_rss_mb
    bench.report.add(
        Figure(
            "daemon peak RSS, all mounts above",
            f"{peak:.0f} MB",
            f"--cache-mb {bench.setup.cache_mb}",
            peak / limit,
            f"<= {limit} MB",
            note="max of sampled VmRSS and VmHWM at unmount",
        )
    )


if __name__ == "__main__":
    sys.exit(main())
