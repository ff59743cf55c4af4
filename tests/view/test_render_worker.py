"""A render worker starts with only what rendering needs imported: the first ``grep -r``
over ``transcripts/`` waits for it (`sessionfs.view.render_worker`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import trio
from support.agent_messages import make_session

from sessionfs.view.prerender import Prerenderer
from sessionfs.view.render_worker import render_transcript

#: Modules a worker must not import: the event loop, FUSE, the daemon and the command
#: line, the search index and the prompt history (SQLite), every other agent's reader.
NOT_IN_A_WORKER = (
    "trio",
    "pyfuse3",
    "sessionfs.fs",
    "sessionfs.commands",
    "sessionfs.writes",
    "core.search_index",
    "core.history",
    "core.discovery",
    "sqlite3",
    "core.formats.registry",
    "core.formats.claude",
    "sessionfs.view.agent_index",
)


def test_a_worker_renders_without_the_daemons_modules(tmp_path: Path) -> None:
    session = make_session(tmp_path / "agent")

    async def scenario() -> list[str]:
        renders = Prerenderer(tmp_path / "agent" / "sessions", tmp_path / "cache", workers=1)
        try:
            outcome = await renders.outcome(session, want_bytes=True)
            assert outcome.rendered and outcome.data is not None and b"# " in outcome.data
            # The same (only) worker, asked what it has imported:
            asked = renders._executor().submit(eval, "sorted(__import__('sys').modules)")
            return await trio.to_thread.run_sync(asked.result, 60)
        finally:
            renders.close()

    modules = trio.run(scenario)
    assert "sessionfs.view.render_worker" in modules
    loaded = [m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IN_A_WORKER)]
    assert loaded == []


def test_a_render_job_parses_each_line_of_the_session_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker's job renders what it was asked from one parse of the file (the load
    # that indexes it hands its entries to the rendering), and the sizes it records
    # besides (header.json, title) from the header held: no line parsed twice.
    session = make_session(tmp_path / "agent")
    parsed: list[bytes] = []
    real_loads = orjson.loads

    def counted(data: bytes | memoryview) -> object:
        parsed.append(bytes(data))
        return real_loads(data)

    monkeypatch.setattr(orjson, "loads", counted)
    for what in ("transcript.md", "context.json", "transcript.html"):
        parsed.clear()
        outcome = render_transcript(str(session), "key", str(tmp_path / what), True, what=what)
        assert outcome.rendered and outcome.data
        lines = session.read_bytes().splitlines()
        # The header's line is looked at once more first: is the file at an older version?
        assert sorted(parsed) == sorted([lines[0], *lines])
