"""Unit tests of the daemon's pure parts (no mount): names, renderings, the cache."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from support.fixture_paths import fixture_files

from core import SessionManager, build_session_context
from core.context import context_sources
from core.formats.xcsh import XcshSession
from core.storage import MemorySessionStorage
from sessionfs.view import render
from sessionfs.view.agent_index import AgentIndex, read_header
from sessionfs.view.loaded_session import (
    LISTING_BYTES_PER_ROW,
    PARSED_SIZE_FACTOR,
    TABLE_BYTES_PER_ENTRY,
    build_entry_table,
)
from sessionfs.view.names import decode_name, dedupe, encode_name
from sessionfs.view.session_cache import SessionCache


@given(st.text())
def test_encoded_names_are_file_names_and_round_trip(name: str) -> None:
    encoded = encode_name(name)
    assert "/" not in encoded and "\x00" not in encoded
    assert encoded not in (".", "..")
    assert decode_name(encoded) == name


def test_special_names() -> None:
    assert encode_name(".") == "%2E" and encode_name("..") == "%2E%2E"
    assert encode_name("a/b%c") == "a%2Fb%25c"
    assert dedupe(["a", "a", "b", "a", "a~2"]) == ["a", "a~3", "b", "a~4", "a~2"]


def test_entry_table_names_duplicates_and_odd_ids() -> None:
    table = build_entry_table(["x", "x", "a/b", None, ""])
    assert table.names == ["x.json", "x~2.json", "a%2Fb.json", "~3.json", "~4.json"]
    assert table.index_of_name["x~2.json"] == 1


def chain(n: int) -> list[dict]:
    return [
        {
            "type": "message",
            "id": f"{i:08x}",
            "parentId": f"{i - 1:08x}" if i else None,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": f"m{i}", "timestamp": 0},
        }
        for i in range(n)
    ]


def session_bytes(entries: list[dict]) -> bytes:
    header = {"type": "session", "version": 3, "id": "t", "timestamp": "2026-01-01T00:00:00Z"}
    return b"".join(orjson.dumps(o) + b"\n" for o in [header, *entries])


def tree_of(entries: list[dict]) -> tuple[list[dict], dict[str, dict]]:
    """core's ``get_tree`` of these entries and its entries by id (a browse-loaded
    in-memory file)."""
    storage = MemorySessionStorage()
    storage.write_bytes("/s.jsonl", session_bytes(entries))
    manager = SessionManager.open("/s.jsonl", storage=storage, browse=True, resolve_blobs=False)
    by_id = {e["id"]: e for e in manager.get_entries() if isinstance(e.get("id"), str)}
    return manager.get_tree(), by_id


def test_tree_of_a_deep_chain_stays_flat_and_fast(tmp_path: Path) -> None:
    entries = chain(100_000)
    roots, by_id = tree_of(entries)
    text = render.tree_text(roots, entries[-1]["id"], by_id)
    lines = text.decode().splitlines()
    assert len(lines) == 100_000 and all(line.startswith("* ") for line in lines)
    (tmp_path / "s.jsonl").write_bytes(session_bytes(entries))
    stats = XcshSession(tmp_path / "s.jsonl").stats()
    assert stats["depth"] == 100_000 and stats["leafCount"] == 1


def test_tree_with_a_cycle_shows_every_entry_once() -> None:
    entries = chain(3)
    entries[0]["parentId"] = entries[2]["id"]  # 0 -> 2 -> 1 -> 0
    roots, by_id = tree_of(entries)
    lines = render.tree_text(roots, entries[2]["id"], by_id).decode().splitlines()
    assert sorted(line.split()[1] for line in lines) == sorted(by_id)


def test_transcript_sources_match_core_context_on_real_files() -> None:
    for path in fixture_files():
        sm = SessionManager.open(path, browse=True, resolve_blobs=False)
        entries = sm.get_entries()
        by_id = {e["id"]: e for e in entries}
        context = build_session_context(entries, sm.get_leaf_id(), by_id)
        sources = context_sources(entries, sm.get_leaf_id(), by_id)
        assert len(sources) == len(context["messages"])
        md = render.transcript_md(None, context["messages"], sources).decode()
        for source, message in zip(sources, context["messages"], strict=True):
            assert f"\n## {message['role']} · {source['id']} · " in md


def test_fences_never_break_on_backticks() -> None:
    message = {
        "role": "toolResult",
        "toolName": "bash",
        "toolCallId": "c",
        "content": [{"type": "text", "text": "```\nnot the end\n````"}],
    }
    md = render.transcript_md("t", [message], None).decode()
    assert "`````\n```\nnot the end\n````\n`````" in md


@given(st.text(alphabet="a`\né😀", max_size=80))
def test_a_fence_is_three_backticks_unless_the_text_holds_three_in_a_row(text: str) -> None:
    # The search looks at the first backticks one by one, then for three in a row
    # (render._has_fence): the fence is what a plain search for "```" gave.
    runs = [len(run) for run in re.findall("`+", text)]
    expected = "`" * (max(runs) + 1) if "```" in text else "```"
    assert render._fence_ticks(text) == expected
    many = (text + "\n") * 5  # past the backticks looked at one by one
    assert render._fence_ticks(many) == expected


@given(st.text(alphabet="a >\n`", max_size=40))
def test_thinking_is_quoted_line_by_line(text: str) -> None:
    # The quoting is done by str.replace passes; a line is "> line", an empty one ">",
    # however many empty lines follow each other.
    message = {"role": "assistant", "content": [{"type": "thinking", "thinking": text}]}
    md = render.transcript_md("t", [message], None).decode()
    body = md.split("\n\n", 2)[2]
    assert body == "".join(f"> {line}\n" if line else ">\n" for line in text.split("\n"))


def test_blocks_are_separated_by_one_blank_line_and_empty_ones_take_none() -> None:
    content = [
        {"type": "thinking", "thinking": None},  # shows nothing, takes no separator
        {"type": "text", "text": "one"},
        {"type": "thinking"},
        {"type": "text", "text": "two\n"},
        {"type": "thinking", "thinking": 3},
    ]
    md = render.transcript_md("t", [{"role": "user", "content": content}], None).decode()
    assert md == "# t\n\n## user · ? · \n\none\n\ntwo\n"


_TEXT = st.text(alphabet="a`\n>é😀\ud800", max_size=12)
_BLOCK = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, st.one_of(_TEXT, st.integers())),
    _TEXT,
    st.builds(lambda text: {"type": "thinking", "thinking": text}, st.one_of(_TEXT, st.none())),
    st.builds(lambda name: {"type": "toolCall", "name": name, "arguments": {"a": 1}}, _TEXT),
    st.just({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
    st.one_of(st.integers(), st.none(), st.just({"type": "other"})),
)
_MESSAGE = st.builds(
    lambda role, content: {"role": role, "content": content, "toolName": "t", "summary": "s"},
    st.sampled_from(["user", "assistant", "toolResult", "compactionSummary"]),
    st.one_of(_TEXT, st.lists(_BLOCK, max_size=4), _BLOCK),
)


@given(st.lists(_MESSAGE, max_size=5), st.one_of(st.none(), _TEXT))
def test_the_transcript_a_section_at_a_time_is_the_whole_transcript(
    messages: list[dict[str, object]], title: str | None
) -> None:
    turns = [(message, f"e{n}", "t") for n, message in enumerate(messages)]
    sections = list(render.transcript_md_sections(title, turns))
    assert b"".join(sections) == render.transcript_md_of_turns(title, turns)
    assert len(sections) == len(messages) + 1
    assert all(section.startswith(b"\n## ") for section in sections[1:])


def test_read_header_skips_junk_lines_and_reads_long_headers(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"junk\n" + orjson.dumps({"type": "session", "id": "h"}) + b"\n")
    assert read_header(f) == {"type": "session", "id": "h"}
    long = {"type": "session", "id": "L", "title": "x" * 10_000}
    f.write_bytes(orjson.dumps(long) + b"\n" + b"{}\n" * 10)
    assert read_header(f) == long
    f.write_bytes(orjson.dumps({"type": "message", "id": "m"}) + b"\n")
    assert read_header(f) is None


def test_session_cache_is_bounded_and_reloads_evicted_sessions(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    project = agent / "sessions" / "p"
    project.mkdir(parents=True)
    for n in range(6):
        header = {"type": "session", "version": 3, "id": f"s{n}", "timestamp": "t", "cwd": "/"}
        lines = [header, *chain(200)]
        (project / f"s{n}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    size = os.path.getsize(project / "s0.jsonl")
    table = 200 * TABLE_BYTES_PER_ENTRY  # each session's entries/ table, built below
    budget = (size * PARSED_SIZE_FACTOR + table) * 2 + 1  # two parsed sessions
    cache = SessionCache(AgentIndex(agent), budget_bytes=budget)

    def parsed() -> int:  # compact or parsed: loaded in any form
        return sum(1 for s in cache.loaded() if s.is_loaded)

    async def scenario() -> None:
        for n in range(6):
            session = await cache.get("p", f"s{n}")
            assert await cache.render(session, "title") == b""
            assert await cache.run(session, lambda s=session: len(s.table().names)) == 200
            # read only: held compact (tiny entries: the index is ~3x their bytes), so
            # the budget of two parsed sessions holds three
            assert isinstance(session.source, XcshSession)
            assert session.memory_cost() - table < size * 4
            assert parsed() == min(n + 1, 3)
        # fill the budget with parsed sessions (writes hold the manager): s0 goes
        for n in range(1, 6):
            session = await cache.get("p", f"s{n}")
            await cache.write(session, lambda m: m.get_leaf_id())
            assert parsed() <= 2
        first = await cache.get("p", "s0")  # unloaded long ago: loaded again on demand
        assert not first.is_loaded
        assert (await cache.run(first, first.header))["id"] == "s0"
        with pytest.raises(Exception, match="nope"):
            await cache.get("p", "nope")

    trio.run(scenario)


def test_entry_names_looked_up_are_counted_until_the_session_is_let_go(tmp_path: Path) -> None:
    """Each entry file the kernel looked up by name holds a node and an inode until its
    session is let go (issue 26): the cache counts them as listing rows."""
    project = tmp_path / "agent" / "sessions" / "p"
    project.mkdir(parents=True)
    header = {"type": "session", "version": 3, "id": "s0", "timestamp": "t", "cwd": "/"}
    lines = [header, *chain(20)]
    (project / "s0.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    cache = SessionCache(AgentIndex(tmp_path / "agent"), budget_bytes=2**30)

    async def scenario() -> None:
        session = await cache.get("p", "s0")
        await cache.run(session, session.table)
        before = session.memory_cost()
        session.names_looked_up += 20
        assert session.memory_cost() == before + 20 * LISTING_BYTES_PER_ROW
        session.dehydrate()  # the mount drops those names with it
        assert session.names_looked_up == 0

    trio.run(scenario)
