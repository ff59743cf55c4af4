"""Unit tests (no mount): long names, bounded renderings, the daemon's bookkeeping."""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

import orjson
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from core import SessionManager
from core.storage import MemorySessionStorage
from sessionfs.view import agent_index, head_reads, render
from sessionfs.view.agent_index import AgentIndex
from sessionfs.view.names import (
    NAME_MAX,
    PATH_NUMBER_RESERVE,
    decode_name,
    encode_name,
    entry_file_names,
    entry_file_names_when_asked,
    fit_name,
    general_entry_file_names,
    looks_shortened,
    unique_names,
)
from sessionfs.view.refusal import WriteRejected
from sessionfs.view.session_cache import NotASession, SessionCache
from sessionfs.writes.link_targets import SESSION_DIR, resolve_link_target

HEADER = {"type": "session", "version": 3, "id": "t", "timestamp": "2026-01-01T00:00:00Z"}


def byte_length(name: str) -> int:
    return len(name.encode("utf-8", "surrogatepass"))


# --- names ----------------------------------------------------------------------------


@given(st.text(min_size=1, max_size=400))
def test_fitted_names_fit_and_short_names_only_when_needed(name: str) -> None:
    encoded = encode_name(name)
    fitted = fit_name(encoded, ".json")
    assert byte_length(fitted + ".json") <= NAME_MAX
    if byte_length(encoded + ".json") <= NAME_MAX:
        assert fitted == encoded and decode_name(fitted) == name
    else:
        assert looks_shortened(fitted)


def test_short_names_are_stable_readable_and_unique() -> None:
    a, b = "é" * 2000 + "a", "é" * 2000 + "b"  # two bytes per character
    short_a, short_b = fit_name(encode_name(a)), fit_name(encode_name(b))
    assert short_a != short_b and short_a.startswith("éééé")
    assert short_a == fit_name(encode_name(a))  # a pure function: the same every mount
    assert byte_length(short_a) <= NAME_MAX
    # the prefix never ends inside an escape: "%2F" is kept whole or dropped whole
    for filler in range(3):
        short = fit_name(encode_name("x" * filler + "/" * 200))
        prefix = short.rsplit("~", 1)[0]
        assert not prefix.endswith("%") and not prefix.endswith("%2")


def test_unique_names_even_when_an_id_looks_like_a_short_name() -> None:
    long = "q" * 300
    impostor = fit_name(long)  # an id spelled exactly like the long one's short name
    names = unique_names([long, impostor])
    assert len(set(names)) == 2 and all(byte_length(n) <= NAME_MAX for n in names)


def test_entry_file_names_leave_room_for_path_numbers() -> None:
    ids = ["a" * (NAME_MAX - 5), "b", "b", None, "c" * 5000]
    names = entry_file_names(ids)
    assert names[1:4] == ["b.json", "b~2.json", "~3.json"]
    for name in (names[0], names[4]):
        assert looks_shortened(name.removesuffix(".json"))
        assert byte_length(name) <= NAME_MAX - PATH_NUMBER_RESERVE
        assert byte_length(f"{10**14}-{name}") <= NAME_MAX


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.integers(),
            st.sampled_from(["", ".", "..", "a", "a~2", "x" * 240, "y" * 300, "é"]),
            st.text(alphabet="ab/%.~\x00\n-", max_size=6),
        ),
        max_size=8,
    )
)
def test_entry_file_names_fast_path_names_as_the_general_one(ids: list[object]) -> None:
    assert entry_file_names(ids) == general_entry_file_names(ids)
    plain = [f"{i:08x}" for i in range(50)]  # the usual session: the fast path
    assert entry_file_names(plain) == general_entry_file_names(plain)
    for some in (ids, plain):  # the page's names, made when asked: the same names
        names = entry_file_names(some)
        asked = entry_file_names_when_asked(some)
        assert len(asked) == len(names)
        assert list(asked) == names and asked[1:3] == names[1:3]
        for name in names:
            assert asked.index(name) == names.index(name)
        with pytest.raises(ValueError):
            asked.index("no such entry.json")


def test_link_targets_resolve_short_names() -> None:
    ids = ["first", "x" * 5000, "x" * 5000]  # a long id, twice (a corrupt file)
    names = entry_file_names(ids)

    def resolve(target: str) -> str:
        return resolve_link_target(
            target,
            link_dir=SESSION_DIR,
            has_entry=lambda i: i in ids,
            entry_ids=lambda: ids,
        )

    assert resolve(f"entries/{names[1]}") == ids[1]
    assert resolve(f"entries/{names[2]}") == ids[1]  # the duplicate means the same id
    assert resolve(f"path/0001-{names[1]}") == ids[1]
    with pytest.raises(WriteRejected) as refused:
        resolve("entries/" + "x" * 100 + "~0123456789abcdef.json")
    assert refused.value.errno == errno.ENOENT


# --- renderings -----------------------------------------------------------------------


def tree_of(lines: list[dict]) -> tuple[list[dict], dict[str, dict], str | None]:
    storage = MemorySessionStorage()
    storage.write_bytes("/s.jsonl", b"".join(orjson.dumps(o) + b"\n" for o in [HEADER, *lines]))
    manager = SessionManager.open("/s.jsonl", storage=storage, browse=True, resolve_blobs=False)
    by_id = {e["id"]: e for e in manager.get_entries()}
    return manager.get_tree(), by_id, manager.get_leaf_id()


def message(entry_id: str, parent: str | None, timestamp: str) -> dict:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": timestamp,
        "message": {"role": "user", "content": entry_id, "timestamp": 0},
    }


def test_tree_orders_children_by_parsed_time_like_core() -> None:
    # 12:00+02:00 is 10:00Z: older than 11:00Z although it sorts after it as text
    roots, by_id, leaf = tree_of(
        [
            message("root", None, "2026-01-01T09:00:00Z"),
            message("late", "root", "2026-01-01T11:00:00Z"),
            message("early", "root", "2026-01-01T12:00:00+02:00"),
        ]
    )
    lines = render.tree_text(roots, leaf, by_id).decode().splitlines()
    assert [line.split()[-1] for line in lines] == ["root", "early", "late"]


def test_tree_indentation_is_capped_and_says_the_depth() -> None:
    rows = [message("s0", None, "2026-01-01T00:00:00Z")]
    for step in range(1, 200):
        rows.append(message(f"d{step}", f"s{step - 1}", "2026-01-01T00:00:00Z"))
        rows.append(message(f"s{step}", f"s{step - 1}", "2026-01-01T00:00:01Z"))
    roots, by_id, leaf = tree_of(rows)
    lines = render.tree_text(roots, leaf, by_id).decode().splitlines()
    assert len(lines) == len(rows)
    assert max(len(line) for line in lines) <= 2 * render.TREE_MAX_INDENT + 40
    assert lines[-1].lstrip().startswith("+ [depth 199] * s199")
    shallow = [line for line in lines if "[depth" not in line]
    assert len(shallow) == 2 * render.TREE_MAX_INDENT + 1  # root + both kids per level


def test_pretty_json_falls_back_to_compact_when_indentation_would_explode() -> None:
    nested: object = 1
    for _ in range(300):  # deeper than orjson writes
        nested = {"a": nested}
    text = render.pretty_json(nested)
    assert json.loads(text) == nested and text.count(b"\n") == 1
    wide: object = list(range(50))
    for _ in range(200):  # within orjson's limit, but indentation ~ depth squared
        wide = [wide]
    assert len(render.pretty_json(wide)) <= len(orjson.dumps(wide)) + 1
    small = {"a": {"b": [1, 2]}}
    assert render.pretty_json(small) == orjson.dumps(small, option=orjson.OPT_INDENT_2) + b"\n"


@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(0, 120), width=st.integers(0, 400), text=st.sampled_from(["x", "  ", ": "])
)
def test_pretty_json_decides_as_its_rule_says_without_the_second_encoding(
    depth: int, width: int, text: str
) -> None:
    # pretty_json skips the compact encoding when the pretty bytes alone show they are
    # within the limit; the outcome must be the rule's, for deep, wide and space-laden
    # values (strings of spaces and ": " inflate its estimate, never deflate it).
    value: object = [text * width] * 3
    for level in range(depth):
        value = {f"k{level}": value, "s": text * 3} if level % 2 else [value, width]
    pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
    compact = orjson.dumps(value) + b"\n"
    limit = render.PRETTY_GROWTH_LIMIT * len(compact) + render.PRETTY_SLACK
    # the estimate's premise: what indentation added is at most 1.5x the spaces, plus 2
    spaces = pretty.count(b" ")
    assert len(pretty) - len(compact) <= spaces + spaces // 2 + 2
    assert render.pretty_json(value) == (compact if len(pretty) > limit else pretty)
    assert render.pretty_json_size(value) == len(render.pretty_json(value))


def test_too_deep_for_any_encoder_is_a_note_not_an_error() -> None:
    nested: object = 1
    for _ in range(100_000):
        nested = [nested]
    assert render.pretty_json(nested) == render.TOO_DEEP
    assert render.pretty_json_size(nested) == len(render.TOO_DEEP)


# --- bookkeeping ----------------------------------------------------------------------


def session_file(path: Path, session_id: str) -> None:
    path.write_bytes(orjson.dumps({**HEADER, "id": session_id}) + b"\n")


def test_header_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_index, "HEADER_CACHE_SIZE", 5)
    project = tmp_path / "sessions" / "p"
    project.mkdir(parents=True)
    for number in range(12):
        session_file(project / f"{number:02d}.jsonl", f"s{number}")
    index = AgentIndex(tmp_path)
    assert len(index.sessions_in("p")) == 12
    assert len(index._headers) == 5
    assert index.session("p", "00") is not None  # forgotten, read again
    assert len(index._headers) == 5


def test_unreadable_file_is_skipped_and_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Tests run as root, which reads a mode-000 file anyway: the refusal is simulated.
    project = tmp_path / "sessions" / "p"
    project.mkdir(parents=True)
    session_file(project / "ok.jsonl", "ok")
    session_file(project / "secret.jsonl", "secret")
    real = head_reads.read_head

    def read_head(path: str | os.PathLike[str], size: int, follow: bool = True) -> head_reads.Head:
        if Path(path).name == "secret.jsonl":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, size, follow)

    monkeypatch.setattr(head_reads, "read_head", read_head)
    index = AgentIndex(tmp_path)
    with caplog.at_level(logging.WARNING, logger="sessionfs.view.agent_index"):
        for _ in range(3):
            assert [ref.stem for ref in index.sessions_in("p")] == ["ok"]
    assert sum("secret.jsonl" in r.getMessage() for r in caplog.records) == 1


def test_a_failed_load_leaves_nothing_behind(tmp_path: Path) -> None:
    project = tmp_path / "sessions" / "p"
    project.mkdir(parents=True)
    (project / "junk.jsonl").write_bytes(b"not a session\n")
    cache = SessionCache(AgentIndex(tmp_path), 1 << 20)

    async def main() -> None:
        for stem in ("junk", "missing"):
            with pytest.raises(NotASession):
                await cache.get("p", stem)
        assert cache._loading == {} and cache.loaded() == []

    trio.run(main)
