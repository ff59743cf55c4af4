"""The session cache's bound on the process's real RSS (`RssBound`), with a fake RSS
reader: least recently used sessions go for at least the excess, the one being served
stays, memory is released at once, and what the release could not give back is not
chased again until RSS grows past it."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio

from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.rss_bound import RssBound
from sessionfs.view.session_cache import SessionCache

MB = 1024 * 1024
BASELINE = 50 * MB
SLACK = 10 * MB


def write_sessions(agent: Path, count: int, entries: int = 300) -> None:
    project = agent / "sessions" / "p"
    project.mkdir(parents=True)
    for n in range(count):
        header = {"type": "session", "version": 3, "id": f"s{n}", "timestamp": "t", "cwd": "/"}
        lines = [header] + [
            {
                "type": "message",
                "id": f"{i:08x}",
                "parentId": f"{i - 1:08x}" if i else None,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": f"message {i}", "timestamp": 0},
            }
            for i in range(entries)
        ]
        (project / f"s{n}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


class FakeProcess:
    """An RSS reading the test sets; a release counts, and leaves ``after_release``
    resident (what fragmentation keeps) when that is set."""

    def __init__(self) -> None:
        self.rss = BASELINE
        self.after_release: int | None = None
        self.releases = 0

    def release(self) -> None:
        self.releases += 1
        if self.after_release is not None:
            self.rss = self.after_release

    def bound(self, **options: float) -> RssBound:
        """The bound under test; by default without margin, release interval or idle
        time, so each action is exactly the excess, always releases, and may let go
        any session but the one served."""
        settings: dict[str, float] = {
            "margin_fraction": 0.0,
            "release_interval": 0.0,
            "idle_seconds": 0.0,
        }
        settings.update(options)
        return RssBound(lambda: self.rss, self.release, slack=SLACK, **settings)


def parsed(cache: SessionCache) -> list[str]:
    return [s.ref.stem for s in cache.loaded() if s.is_loaded]


def test_sessions_go_least_recent_first_for_the_excess(tmp_path: Path) -> None:
    write_sessions(tmp_path, 6)
    process = FakeProcess()
    budget = 1024 * MB  # the estimate alone would keep all of them
    cache = SessionCache(AgentIndex(tmp_path), budget, rss_bound=process.bound())
    assert cache.rss_bound is not None and cache.rss_bound.baseline == BASELINE
    limit = budget + BASELINE + SLACK

    async def use(stem: str) -> None:
        session = await cache.get("p", stem)
        await cache.run(session, lambda: None)  # parsed again if it was dehydrated

    async def scenario() -> None:
        for n in range(4):
            await use(f"s{n}")
        assert parsed(cache) == ["s0", "s1", "s2", "s3"] and process.releases == 0
        one = (await cache.get("p", "s0")).memory_cost()  # s0 is now the most recent
        process.rss = limit + one + 1  # just over one session's worth
        process.after_release = limit + MB  # fragmentation keeps 1 MB over the limit
        await use("s4")
        assert parsed(cache) == ["s3", "s0", "s4"]  # s1 and s2 went (LRU), not s0
        assert process.releases == 1
        await use("s5")  # still over, but not grown past what the release left
        assert parsed(cache) == ["s3", "s0", "s4", "s5"] and process.releases == 1
        process.rss = limit * 2  # grown far past it: all but the served one go
        process.after_release = None
        await use("s1")
        assert parsed(cache) == ["s1"] and process.releases == 2
        process.rss = limit  # at the limit: nothing happens, the floor is forgotten
        await use("s2")
        assert parsed(cache) == ["s1", "s2"] and process.releases == 2
        process.rss = limit + 1
        await use("s3")
        assert parsed(cache) == ["s2", "s3"] and process.releases == 3

    trio.run(scenario)


def test_an_unknown_rss_never_evicts(tmp_path: Path) -> None:
    write_sessions(tmp_path, 3)
    releases: list[int] = []
    bound = RssBound(lambda: None, lambda: releases.append(1))
    assert bound.baseline == 0
    cache = SessionCache(AgentIndex(tmp_path), 1024 * MB, rss_bound=bound)

    async def scenario() -> None:
        for n in range(3):
            await cache.get("p", f"s{n}")

    trio.run(scenario)
    assert len(parsed(cache)) == 3 and not releases


def test_an_action_frees_a_margin_below_the_limit_and_releases_at_most_so_often(
    tmp_path: Path,
) -> None:
    """Acting frees the excess plus an eighth of the budget (the next loads then fit
    without acting again), and trims the heap at most once per release interval."""
    write_sessions(tmp_path, 8)
    process = FakeProcess()
    now = [0.0]
    cache_probe = SessionCache(AgentIndex(tmp_path), 1024 * MB)

    async def one_cost() -> int:
        return (await cache_probe.get("p", "s0")).memory_cost()

    cost = trio.run(one_cost)
    budget = cost * 16  # margin: two sessions' worth
    bound = process.bound(margin_fraction=1 / 8, release_interval=10.0, clock=lambda: now[0])
    cache = SessionCache(AgentIndex(tmp_path), budget, rss_bound=bound)
    limit = budget + BASELINE + SLACK

    async def use(stem: str) -> None:
        await cache.get("p", stem)

    async def scenario() -> None:
        for n in range(4):
            await use(f"s{n}")
        process.rss = limit + 1  # one byte over: the excess and the margin go
        await use("s4")
        assert parsed(cache) == ["s3", "s4"]  # s0..s2: 1 byte + two sessions' worth
        assert process.releases == 1
        process.rss = limit * 2  # over again at once: sessions go, no second trim yet
        await use("s5")
        assert parsed(cache) == ["s5"] and process.releases == 1
        now[0] = 10.0  # the interval has passed: the next action trims again
        process.rss = limit * 3
        await use("s6")
        assert parsed(cache) == ["s6"] and process.releases == 2

    trio.run(scenario)


def test_sessions_in_use_never_go_for_the_rss_and_a_quick_reload_is_counted(
    tmp_path: Path,
) -> None:
    """Over the RSS limit, only sessions idle for ``idle_seconds`` are let go (those in
    use would be loaded again at once: issue 26); the counts see every load, every
    eviction, and a load of a session let go moments before."""
    write_sessions(tmp_path, 5)
    process = FakeProcess()
    now = [0.0]
    bound = process.bound(idle_seconds=60.0)
    budget = 1024 * MB
    cache = SessionCache(AgentIndex(tmp_path), budget, rss_bound=bound, clock=lambda: now[0])
    limit = budget + BASELINE + SLACK

    async def use(stem: str) -> None:
        session = await cache.get("p", stem)
        await cache.run(session, lambda: None)

    async def scenario() -> None:
        await use("s0")
        await use("s1")
        now[0] = 50.0
        await use("s2")
        await use("s3")
        process.rss = limit * 2  # far over: all four would go if they could
        now[0] = 70.0  # s0 and s1 idle for 70 s, s2 and s3 for 20 s
        await use("s4")
        assert parsed(cache) == ["s2", "s3", "s4"]
        assert process.releases == 1
        assert (cache.counts.loads, cache.counts.evictions) == (5, 2)
        assert cache.counts.reloads_after_eviction == 0
        process.rss = BASELINE
        now[0] = 75.0
        await use("s0")  # 5 s after it went
        assert cache.counts.reloads_after_eviction == 1
        now[0] = 200.0
        await use("s1")  # long after it went: an ordinary load
        assert cache.counts.loads == 7 and cache.counts.reloads_after_eviction == 1

    trio.run(scenario)
